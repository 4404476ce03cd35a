"""A traced run's primitive graph and `sol replay`: what a survey records as the program's calls,
the graph a traced run writes beside its trace, and the graph run again without the framework."""
import glob
import json
import os
import tempfile

import pytest

from conftest import PY_PROGRAMS, PYTHON, SOL, SOURCE, run


def trace_files(trace_dir, suffix):
    return sorted(glob.glob(os.path.join(str(trace_dir), "**", "sol-*" + suffix), recursive=True))


def summary_ops(trace_dir):
    ops = []
    for path in trace_files(trace_dir, ".summary.json"):
        with open(path) as f:
            ops += json.load(f)["ops"]
    return ops


def test_a_numpy_survey_records_no_dnnl_call(tmp_path):
    # Under auto, measuring with a fresh profile, the onednn backend sets itself up ahead on a thread
    # of SOL's (matmul primitives: libdnnl's dnnl_primitive_desc_create calls
    # dnnl_primitive_desc_iterator_create through libsol's wrapper). None of that is the program's.
    # The script waits after importing NumPy, so that the set-up runs on that thread rather than in
    # the first call (the verdict does not depend on it: no dnnl_* call is recorded either way).
    trace_dir = tmp_path / "trace"
    env = {"SOL_TRACE": "1", "SOL_TRACE_DIR": str(trace_dir), "SOL_TUNE": "1",
           "SOL_CONFIG": str(SOURCE / "tests" / "integration" / "onednn-matmul.toml"),
           "XDG_CACHE_HOME": tempfile.mkdtemp(dir=str(tmp_path))}
    script = ("import time, numpy as np\ntime.sleep(1)\n"
              "a, b = np.ones((150, 90), np.float32), np.ones((90, 70), np.float32)\n"
              "print(float((a @ b).sum()))\n")
    r = run([PYTHON, "-c", script], env=env)
    assert r.returncode == 0, r.stderr
    ops = summary_ops(trace_dir)
    assert any(o["symbol"] == "cblas_sgemm" for o in ops)
    assert [o["symbol"] for o in ops if o["symbol"].startswith("dnnl")] == []
