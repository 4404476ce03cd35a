"""The cuDNN frontend without a GPU: cuDNN 9 finalizes operation graphs on the host, so a program
that builds them through the backend API under libsol shows the DNN node SOL recovers for each
(SOL_LOG=debug), in the oneDNN frontend's notation. With a GPU (pytest -m gpu, CTest label gpu),
scripts/gpu/cudnn_trace.sh runs pip PyTorch on it."""
import glob
import json
import os
import subprocess

import pytest

from conftest import LIBSOL, PROGRAMS, SOURCE, run, sol_lines

PROGRAM = PROGRAMS / "cudnn_graph"

# What each graph of tests/programs/cudnn_graph.c computes: x 8x4x16x16 NCHW, w 6x2x3x3 (two
# groups), stride (2, 1), padding (1, 2), dilation (1, 2) (zero-based in the text), y 8x6x8x16
# NHWC (acdb); grouped weights become g, O/g, I/g, kh, kw (abcde).
PROBLEM = "g2mb8_ic4oc6_ih16oh8kh3sh2dh0ph1_iw16ow16kw3sw1dw1pw2"
EXPECTED = [
    "convolution prop=forward_training %s src=f32:abcd wei=f32:abcde dst=f32:acdb" % PROBLEM,
    "convolution prop=backward_data %s wei=f32:abcde diff_dst=f32:acdb diff_src=f32:abcd" % PROBLEM,
    "convolution prop=backward_weights %s src=f32:abcd diff_dst=f32:acdb diff_wei=f32:abcde" % PROBLEM,
    # bias add and ReLU on the convolution's virtual outputs: post-ops, as oneDNN fuses them
    "convolution prop=forward_training %s post_ops=binary_add+eltwise_relu src=f32:abcd wei=f32:abcde "
    "dst=f32:acdb po_src=f32:abcd" % PROBLEM,
]


@pytest.fixture(scope="module")
def program():
    if not PROGRAM.exists():
        pytest.skip("cudnn_graph not built (no cuDNN 9 in the CUDA toolkit)")
    return str(PROGRAM)


def test_graphs_are_described_as_dnn_nodes(program):
    r = run([program], env={"SOL_LOG": "debug", "SOL_TRACE": "0"})
    assert r.returncode == 0, r.stderr
    assert "ok" in r.stdout
    graphs = [l.split(": ", 3)[3] for l in sol_lines(r.stderr) if l.startswith("sol: cudnn: operation graph ")]
    assert graphs == EXPECTED


def test_the_program_runs_the_same_without_libsol(program):
    a = run([program], preload=False)
    b = run([program])
    assert a.returncode == b.returncode == 0
    assert a.stdout == b.stdout


def test_cudnn_calls_are_traced(program, tmp_path):
    r = run([program], env={"SOL_TRACE": "1", "SOL_TRACE_DIR": str(tmp_path)})
    assert r.returncode == 0, r.stderr
    [summary] = glob.glob(str(tmp_path / "run-*" / "*.summary.json"))
    with open(summary) as f:
        ops = json.load(f)["ops"]
    calls = {o["symbol"]: o["calls"] for o in ops if o["api"] == "cudnn"}
    # 4 tensors + 1 convolution descriptor + 3 operations + 3 graphs; the fused graph's 4 tensors,
    # 2 pointwise descriptors, 3 operations, 1 graph; a plan and a variant pack.
    assert calls["cudnnBackendCreateDescriptor"] == 22
    assert calls["cudnnBackendFinalize"] == 20
    assert calls["cudnnBackendExecute"] == 1
    assert calls["cudnnBackendDestroyDescriptor"] == 2
    [execute] = [o for o in ops if o["symbol"] == "cudnnBackendExecute"]
    assert execute["op"] == "cudnn_execute"  # a plan SOL never saw finalized: undescribed
    assert "device_ns" not in execute  # no CUDA runtime in the process: nothing timed


@pytest.mark.gpu
def test_gpu_check_script(tmp_path):
    """scripts/gpu/cudnn_trace.sh: skips cleanly without a CUDA device, passes with one."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SOL_") and k != "LD_PRELOAD"}
    env.update({"SOL_BUILD": os.path.dirname(LIBSOL), "OUT": str(tmp_path)})
    r = subprocess.run(["bash", str(SOURCE / "scripts" / "gpu" / "cudnn_trace.sh")], env=env, capture_output=True,
                       text=True, timeout=300)
    if r.stdout.startswith("SKIP"):
        pytest.skip(r.stdout.strip())
    assert r.returncode == 0 and "FAIL" not in r.stdout, r.stdout + r.stderr
