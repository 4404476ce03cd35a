"""oneDNN primitives as DNN nodes on real PyTorch: a CNN trained on SOL's backends against the same
run natively, [[route]] rules by kind and family, verify mode on convolutions (and a planted wrong
kernel caught), and backends that do not take DNN nodes passing them to oneDNN."""
import glob
import json
import math
import os
import re

import pytest

from conftest import PY_PROGRAMS, PYTHON, SOL, run, sol_lines

CNN = [PYTHON, str(PY_PROGRAMS / "torch_dnn_cnn.py")]


@pytest.fixture(scope="module")
def available():
    """The backends that are available here and take DNN convolutions (`sol backends`)."""
    out = run([SOL, "backends"], preload=False).stdout
    found = set()
    for b in ("reference", "opencl"):
        m = re.search(r"^%s\s+available.*\n.*\n\s+and DNN nodes \(f32\): (.*)$" % b, out, re.M)
        if m and "convolution" in m.group(1).split():
            found.add(b)
    return found


@pytest.fixture(scope="module")
def native():
    r = run(CNN, preload=False, cwd=PY_PROGRAMS)
    assert r.returncode == 0, r.stderr
    return values(r.stdout)


def values(stdout):
    """{line label: [numbers]} of the program's output."""
    out = {}
    for line in stdout.splitlines():
        label, *nums = line.split()
        if label == "step":
            label, nums = "step%s" % nums[0], nums[2:]
        out[label] = [float(v) for v in nums]
    return out


def assert_close(got, want, rtol):
    assert got.keys() == want.keys()
    for k in want:
        assert len(got[k]) == len(want[k]), k
        for g, w in zip(got[k], want[k]):
            assert math.isclose(g, w, rel_tol=rtol, abs_tol=rtol), "%s: %r vs native %r" % (k, g, w)


def ops_by_backend(trace_dir):
    """{(op, backend): calls} of dnnl_primitive_execute over a trace directory."""
    out = {}
    for p in glob.glob(os.path.join(trace_dir, "**", "sol-*.summary.json"), recursive=True):
        for o in json.load(open(p))["ops"]:
            if o["symbol"] == "dnnl_primitive_execute":
                key = (o["op"], o["backend"])
                out[key] = out.get(key, 0) + o["calls"]
    return out


@pytest.mark.parametrize("backend", ["reference", "opencl"])
def test_cnn_trains_on_backend(backend, available, native, tmp_path):
    if backend not in available:
        pytest.skip("%s is not available here or takes no DNN convolution (see `sol backends`)" % backend)
    r = run(CNN, cwd=PY_PROGRAMS, env={"SOL_BACKEND": backend, "SOL_TRACE": "1", "SOL_TRACE_DIR": str(tmp_path),
                                       "SOL_TRACE_STACKS": "0", "SOL_LOG": "warn"})
    assert r.returncode == 0, r.stderr
    # Losses and parameters after three steps of SGD, and the mkldnn inference results.
    assert_close(values(r.stdout), native, 1e-3)
    ops = ops_by_backend(str(tmp_path))
    convs = {b: n for (op, b), n in ops.items() if op == "convolution"}
    assert convs.get(backend, 0) >= 35, ops
    assert set(convs) == {backend}, "every convolution runs on %s: %s" % (backend, ops)
    # The other kinds PyTorch reaches run there too.
    for kind in ("pooling", "batch_normalization", "eltwise", "sum", "reorder"):
        assert ops.get((kind, backend), 0) > 0, (kind, ops)


def test_route_by_kind_and_family(native, tmp_path):
    cfg = tmp_path / "sol.toml"
    cfg.write_text('backend = "native"\n\n[[route]]\nop = "convolution"\nbackend = "reference"\n')
    env = {"SOL_CONFIG": str(cfg), "SOL_TRACE": "1", "SOL_TRACE_DIR": str(tmp_path / "kind"), "SOL_TRACE_STACKS": "0"}
    r = run(CNN, cwd=PY_PROGRAMS, env=env)
    assert r.returncode == 0, r.stderr
    assert_close(values(r.stdout), native, 1e-3)
    ops = ops_by_backend(str(tmp_path / "kind"))
    assert {b for (op, b) in ops if op == "convolution"} == {"reference"}, ops
    assert {b for (op, b) in ops if op != "convolution"} == {"native"}, ops

    cfg.write_text('backend = "native"\n\n[[route]]\nop = "dnn"\nbackend = "reference"\n')
    env["SOL_TRACE_DIR"] = str(tmp_path / "family")
    r = run(CNN, cwd=PY_PROGRAMS, env=env)
    assert r.returncode == 0, r.stderr
    ops = ops_by_backend(str(tmp_path / "family"))
    assert {b for (op, b) in ops} == {"reference"}, ops


@pytest.mark.parametrize("backend", ["openblas", "onednn"])
def test_backends_without_dnn_nodes_leave_them_to_onednn(backend, native, tmp_path):
    r = run(CNN, cwd=PY_PROGRAMS, env={"SOL_BACKEND": backend, "SOL_LOG": "debug", "SOL_TRACE": "1",
                                       "SOL_TRACE_DIR": str(tmp_path), "SOL_TRACE_STACKS": "0"})
    assert r.returncode == 0, r.stderr
    assert_close(values(r.stdout), native, 1e-3)
    ops = ops_by_backend(str(tmp_path))
    assert {b for (op, b) in ops} == {"native"}, ops
    if backend == "openblas":
        assert any("openblas declines convolution" in l for l in sol_lines(r.stderr)), r.stderr[-2000:]


def verify_run(tmp_path, extra):
    cfg = tmp_path / "sol.toml"
    cfg.write_text('backend = "native"\n\n[[route]]\nop = "convolution"\nbackend = "opencl"\n')
    env = {"SOL_CONFIG": str(cfg), "SOL_VERIFY": "1", "SOL_TRACE_DIR": str(tmp_path)}
    env.update(extra)
    r = run(CNN, cwd=PY_PROGRAMS, env=env)
    assert r.returncode == 0, r.stderr
    m = re.search(r"^sol: verify: (\d+) checked, (\d+) mismatches$", r.stderr, re.M)
    assert m, r.stderr[-2000:]
    return int(m.group(1)), int(m.group(2)), r


def test_verify_convolutions_on_opencl(available, tmp_path):
    if "opencl" not in available:
        pytest.skip("opencl is not available here (see `sol backends`)")
    checked, mismatches, r = verify_run(tmp_path, {})
    assert checked >= 35, r.stderr[-2000:]
    assert mismatches == 0, open(glob.glob(str(tmp_path / "*.verify.jsonl"))[0]).read()[:2000]


def test_verify_catches_a_wrong_convolution(available, tmp_path):
    if "opencl" not in available:
        pytest.skip("opencl is not available here (see `sol backends`)")
    checked, mismatches, r = verify_run(tmp_path, {"SOL_TEST_WRONG_KERNEL": "convolution"})
    assert mismatches > 0, r.stderr[-2000:]
    lines = [json.loads(l) for f in glob.glob(str(tmp_path / "*.verify.jsonl")) for l in open(f)]
    assert lines and all(l["op"] == "convolution" and l["backend"] == "opencl" for l in lines), lines[:3]
    assert all(l["against"] == "native" and l["max_abs_err"] > 0 for l in lines)


def test_sol_backends_lists_dnn_kinds():
    out = run([SOL, "backends"], preload=False).stdout
    ref = re.search(r"^reference\s+available.*\n.*\n\s+and DNN nodes \(f32\): (.*)$", out, re.M)
    assert ref, out
    for kind in ("convolution", "deconvolution", "inner_product", "matmul", "eltwise", "pooling",
                 "batch_normalization", "softmax", "logsoftmax", "binary", "sum", "concat", "reorder"):
        assert kind in ref.group(1).split(), (kind, ref.group(1))
    assert re.search(r"^openblas\s+available.*\n.*\n\s+and no DNN node$", out, re.M), out
    assert re.search(r"^onednn\s+available.*\n.*\n\s+and DNN nodes it is given run on the program's own oneDNN$",
                     out, re.M), out
