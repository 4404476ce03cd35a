"""A traced run's primitive graph and `sol replay`: what a survey records as the program's calls,
the graph a traced run writes beside its trace, and that graph run again without the framework:
the op list it replays is the trace's, native reproduces the program's results bit for bit from
its data, the backends pass --check against native, and a bad or cut graph is one line or a
prefix, never a crash."""
import glob
import json
import os
import re
import signal
import subprocess
import tempfile
from collections import Counter

import pytest

from conftest import LIBSOL, PROGRAMS, PY_PROGRAMS, PYTHON, SOL, SOURCE, clean_env, run, sol_lines


def trace_files(trace_dir, suffix):
    return sorted(glob.glob(os.path.join(str(trace_dir), "**", "sol-*" + suffix), recursive=True))


def summary_ops(trace_dir):
    ops = []
    for path in trace_files(trace_dir, ".summary.json"):
        with open(path) as f:
            ops += json.load(f)["ops"]
    return ops


def traced(cmd, tmp_path, data=True, cwd=PY_PROGRAMS, env=None):
    trace_dir = tmp_path / "trace"
    e = {"SOL_TRACE": "1", "SOL_TRACE_DIR": str(trace_dir), "SOL_TRACE_DATA": "1" if data else "0"}
    r = run(cmd, env=dict(e, **(env or {})), cwd=cwd)
    assert r.returncode == 0, r.stderr
    return r, trace_dir


def replay(path, *args):
    """`sol replay PATH ARGS --format json`, run without libsol: its exit status, document, stderr."""
    r = run([SOL, "replay", str(path), "--format", "json"] + list(args), preload=False)
    return r.returncode, json.loads(r.stdout) if r.stdout.strip() else None, r.stderr


def trace_op_list(trace_dir):
    """The computing calls the trace recorded, per op signature (symbol, op, dtype, shape)."""
    counts = Counter()
    for o in summary_ops(trace_dir):
        if o["op"] not in ("dnnl_api", "cublas_api", "cudnn_api") and o["backend"] != "invalid":
            counts[(o["symbol"], o["op"], o["dtype"], o["shape"])] += o["calls"]
    return counts


def replay_op_list(doc):
    return Counter({(o["symbol"], o["op"], o["dtype"], o["shape"]): o["calls"] for o in doc["ops"]})


def assert_bit_identical(doc):
    native = doc["backends"]["native"]
    assert native["error"] is None
    assert native["hashed"] == doc["nodes"] > 0
    # Nodes the program computed on several threads may differ by how the library split the work,
    # within verify's tolerance; every other one is the program's result, bit for bit.
    assert native["reproduced"] + native["tolerated"] == native["hashed"], native["differ"]


def opencl_ran(doc):
    b = doc["backends"]["opencl"]
    return b["error"] is None and b["ran"] > 0


# ---------------------------------------------------------------------------------- the PyTorch CNN

@pytest.fixture(scope="module")
def cnn(tmp_path_factory):
    """One traced run of the PyTorch CNN (convolutions, batch normalization, pooling, linear
    layers, forward and backward) with its data, replayed on native, reference and opencl."""
    tmp = tmp_path_factory.mktemp("cnn")
    cmd = [PYTHON, str(PY_PROGRAMS / "torch_dnn_cnn.py")]
    r, trace_dir = traced(cmd, tmp)
    plain = run(cmd, preload=False, cwd=PY_PROGRAMS)
    assert r.stdout == plain.stdout  # saving the graph's data does not change the program's results
    status, doc, err = replay(trace_dir, "--backend", "reference,opencl", "--check")
    assert doc is not None, err
    return {"dir": trace_dir, "status": status, "doc": doc, "stderr": err}


def test_cnn_replay_runs_the_traces_op_list(cnn):
    assert replay_op_list(cnn["doc"]) == trace_op_list(cnn["dir"])
    kinds = {o["op"] for o in cnn["doc"]["ops"]}
    assert {"convolution", "batch_normalization", "pooling", "gemm"} <= kinds


def test_cnn_native_replay_is_the_programs_results_bit_for_bit(cnn):
    assert_bit_identical(cnn["doc"])


def test_cnn_replays_on_reference_and_opencl_pass_check(cnn):
    doc = cnn["doc"]
    assert cnn["status"] == 0, cnn["stderr"]
    assert doc["mismatches"] == 0
    ref = doc["backends"]["reference"]
    assert ref["error"] is None and ref["ran"] == doc["nodes"] and ref["checked"] > 0
    if not opencl_ran(doc):
        pytest.skip("opencl unavailable: %s" % doc["backends"]["opencl"]["error"])
    assert doc["backends"]["opencl"]["checked"] > 0


def test_a_replaying_process_loads_no_framework(cnn):
    for name, b in cnn["doc"]["backends"].items():
        assert b["libraries"], name
        assert not [l for l in b["libraries"] if "libpython" in l or "libtorch" in l], (name, b["libraries"])
        assert any("libdnnl" in l for l in b["libraries"])  # the program's oneDNN, opened as native


def test_a_lazy_opencl_replay_moves_fewer_bytes_than_an_eager_one(cnn):
    if not opencl_ran(cnn["doc"]):
        pytest.skip("opencl unavailable")
    moved = {}
    for lazy in ("0", "1"):
        status, doc, err = replay(cnn["dir"], "--backend", "opencl", "--lazy", lazy)
        assert status == 0, err
        t = doc["backends"]["opencl"]["transfers"]
        assert t["nodes"] > 0
        moved[lazy] = t["bytes_to_device"] + t["bytes_to_host"]
    assert moved["1"] < moved["0"], moved


# ---------------------------------------------------------------------------------- NumPy, C

def test_a_numpy_chain_replays_bit_for_bit_and_passes_check(tmp_path):
    # NumPy's own code changes data between calls (an in-place ReLU, the weights' update): those
    # versions are the graph's inputs, saved with their bytes.
    r, trace_dir = traced([PYTHON, str(PY_PROGRAMS / "numpy_chain.py")], tmp_path)
    status, doc, err = replay(trace_dir, "--backend", "reference", "--check")
    assert status == 0, err
    assert replay_op_list(doc) == trace_op_list(trace_dir)
    assert doc["inputs"] > 0
    assert_bit_identical(doc)
    assert doc["mismatches"] == 0 and doc["backends"]["reference"]["ran"] == doc["nodes"]


def test_a_forked_threaded_c_program_has_a_graph_per_process(tmp_path):
    r, trace_dir = traced([str(PROGRAMS / "trace_volume"), "2", "300"], tmp_path, cwd=None)
    assert len(trace_files(trace_dir, ".graph.jsonl")) == 2  # the parent's and its forked child's
    status, doc, err = replay(trace_dir, "--backend", "reference", "--check")
    assert status == 0, err
    assert doc["graphs"] == 2
    assert replay_op_list(doc) == trace_op_list(trace_dir)
    assert_bit_identical(doc)
    assert doc["mismatches"] == 0


def test_cublas_calls_are_graph_nodes_as_blas_calls_are(tmp_path):
    # Without a GPU the program's cuBLAS calls fail, but SOL describes them all the same: a device
    # GEMM is a gemm node with its device arguments, in the same graph format as a host one.
    program = PROGRAMS / "cublas_calls"
    if not program.exists():
        pytest.skip("cublas_calls not built (no CUDA toolkit)")
    r, trace_dir = traced([str(program)], tmp_path, cwd=None)
    if "device present" in r.stdout:
        pytest.skip("a CUDA device is present: the calls this test reads are not made")
    (path,) = trace_files(trace_dir, ".graph.jsonl")
    with open(path) as f:
        records = [json.loads(l) for l in f]
    descs = {d["symbol"]: d for d in records if "desc" in d and "node" not in d}
    sgemm = descs["cublasSgemm_v2"]
    assert (sgemm["api"], sgemm["op"], sgemm["dtype"]) == ("cublas", "gemm", "f32")
    assert sgemm["args"]["m"] == 64 and sgemm["args"]["transa"] == "T" and sgemm["device"]["batch"] == 0
    assert descs["cublasGemmStridedBatchedEx"]["device"]["batch"] == 3
    status, doc, err = replay(trace_dir, "--backend", "reference")
    assert status == 0, err
    assert replay_op_list(doc) == trace_op_list(trace_dir)
    # The batched calls have no host routine; the single one had no device memory to pass.
    assert doc["backends"]["reference"]["declined"] == doc["nodes"] == 3


def test_a_killed_process_leaves_a_graph_whose_complete_prefix_replays(tmp_path):
    trace_dir = tmp_path / "trace"
    env = clean_env({"SOL_TRACE": "1", "SOL_TRACE_DIR": str(trace_dir), "SOL_TRACE_DATA": "1"})
    p = subprocess.Popen([str(PROGRAMS / "repeated_gemm"), "8", "60"], env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    try:
        # Waits (up to a minute) for the graph's first block of records, which reaches the file
        # whole, before the process is killed: how soon it comes cannot change the verdict.
        deadline = 600
        while deadline and not [f for f in trace_files(trace_dir, ".graph.jsonl") if os.path.getsize(f) > 8192]:
            deadline -= 1
            subprocess.run(["sleep", "0.1"])
        assert deadline, "no graph records after a minute"
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait()
    status, doc, err = replay(trace_dir)
    assert status == 0, err
    assert "did not finish its graph" in err and "complete nodes" in err
    assert doc["nodes"] > 0 and [o["op"] for o in doc["ops"]] == ["gemm"]
    assert_bit_identical(doc)


# ---------------------------------------------------------------------------------- bad graphs

@pytest.fixture(scope="module")
def small_graph(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("small")
    _, trace_dir = traced([PYTHON, str(PY_PROGRAMS / "numpy_chain.py")], tmp)
    (path,) = trace_files(trace_dir, ".graph.jsonl")
    with open(path) as f:
        return f.read().split("\n")


def write_graph(tmp_path, lines, name="sol-1.graph.jsonl"):
    path = tmp_path / name
    path.write_text("\n".join(lines))
    return path


def one_error_line(path):
    r = run([SOL, "replay", str(path)], preload=False)
    assert r.returncode == 2 and r.stdout == "", r.stdout
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("sol: "), r.stderr
    return lines[0]


def test_a_cut_graph_replays_up_to_its_last_complete_record(tmp_path, small_graph):
    lines = small_graph[:]
    nodes = [i for i, l in enumerate(lines) if l.startswith('{"node"')]
    cut = lines[: nodes[3]] + [lines[nodes[3]][:20]]  # the fourth node is cut mid-record
    status, doc, err = replay(write_graph(tmp_path, cut))
    assert status == 0, err
    assert "its last record is cut short" in err and doc["nodes"] == 3


def test_a_foreign_file_is_one_error_line(tmp_path):
    path = tmp_path / "sol-1.graph.jsonl"
    path.write_bytes(b"\x7fELF\x02\x01\x01" + bytes(range(256)) * 4)
    assert "not a SOL primitive graph" in one_error_line(path)


def test_a_graph_of_another_format_version_is_one_error_line(tmp_path, small_graph):
    lines = small_graph[:]
    lines[0] = lines[0].replace('"format":"sol-graph/1"', '"format":"sol-graph/99"')
    line = one_error_line(write_graph(tmp_path, lines))
    assert "graph format sol-graph/99" in line and "this sol reads sol-graph/1" in line


def test_a_corrupt_record_is_one_error_line_naming_it(tmp_path, small_graph):
    lines = small_graph[:]
    i = next(i for i, l in enumerate(lines) if l.startswith('{"node"'))
    lines[i] = lines[i].replace('"ops":[', '"ops":[[999999,0,0],')
    line = one_error_line(write_graph(tmp_path, lines))
    assert re.search(r":%d: corrupt graph: " % (i + 1), line), line


def test_a_call_the_reference_would_reject_is_declined_not_run(tmp_path, small_graph):
    # A graph naming an invalid GEMM (lda below m): no backend runs it, native included, and the
    # replay says why; the rest of the graph runs.
    lines = small_graph[:]
    i = next(i for i, l in enumerate(lines) if '"symbol":"cblas_sgemm"' in l)
    lines[i] = re.sub(r'"lda":\d+', '"lda":1', lines[i])
    status, doc, err = replay(write_graph(tmp_path, lines), "--backend", "reference")
    assert status == 0, err
    for name in ("native", "reference"):
        b = doc["backends"][name]
        assert b["reasons"].get("the reference BLAS rejects its arguments", 0) > 0, b["reasons"]
        assert b["ran"] > 0


def test_an_unavailable_backend_is_a_failed_row_and_the_others_replay(tmp_path, small_graph):
    config = tmp_path / "sol.toml"
    config.write_text('[backends.openblas]\nlibrary = "%s"\n' % (tmp_path / "libopenblas-missing.so.0"))
    r = run([SOL, "replay", str(write_graph(tmp_path, small_graph)), "--backend", "openblas,reference",
             "--format", "json"], env={"SOL_CONFIG": str(config)}, preload=False)
    assert r.returncode == 1, r.stderr
    doc = json.loads(r.stdout)
    assert doc["backends"]["openblas"]["error"].startswith("openblas is unavailable: ")
    assert doc["backends"]["reference"]["error"] is None and doc["backends"]["reference"]["ran"] == doc["nodes"]


def test_the_data_cap_cuts_the_data_and_the_header_says_where(tmp_path):
    r, trace_dir = traced([PYTHON, str(PY_PROGRAMS / "numpy_chain.py")], tmp_path, env={"SOL_TRACE_DATA_MAX": "20000"})
    assert [l for l in sol_lines(r.stderr) if "trace.data_max" in l]
    (path,) = trace_files(trace_dir, ".graph.jsonl")
    with open(path) as f:
        header = json.loads(f.readline())
    assert header["data_cut_at"] and header["data_bytes"] <= 20000
    assert os.path.getsize(path.replace(".graph.jsonl", ".graph.data")) <= 20000 + 16
    status, doc, err = replay(trace_dir)
    assert status == 0, err
    assert "cut the program's data at node %d" % header["data_cut_at"] in err
    native = doc["backends"]["native"]
    assert 0 < native["hashed"] < doc["nodes"]  # only the nodes before the cut have the program's results
    assert native["reproduced"] + native["tolerated"] == native["hashed"]


# ---------------------------------------------------------------------------------- survey fidelity

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
