"""Lazy execution on a device backend (opencl on pocl): results stay on the device until the host
looks, inputs stay there while the host leaves them alone, and nothing a program can do to its
memory sees a difference from eager execution or from a run without libsol.

Every case compares bytes, not tolerances: lazy and eager run the same kernels on the same device,
and the C program's inputs are small integers (exact on every backend)."""
import json
import pathlib
import re

import pytest

from conftest import LIBSOL, PROGRAMS, PY_PROGRAMS, PYTHON, SOL, run, sol_lines

TRANSFERS = re.compile(r"^sol: transfers: (\d+) nodes, (\d+) flushes, (\d+) bytes to the device, (\d+) bytes back$")
CASES = ["chain", "inputs", "shared", "syscalls", "allocator", "signals", "threads", "fork", "mapped", "interrupts",
         "exit"]
N = 256  # 256 KiB matrices: above the serving threshold


def transfers(stderr):
    found = [tuple(int(g) for g in m.groups()) for m in map(TRANSFERS.match, stderr.splitlines()) if m]
    assert len(found) <= 1, stderr
    return found[0] if found else None


def torture(case, lazy, **env):
    return run([str(PROGRAMS / "lazy_torture"), str(N), case],
               env={"SOL_BACKEND": "opencl", "SOL_LAZY": lazy, "SOL_LOG": "info", **env})


@pytest.fixture(scope="module")
def native():
    r = run([str(PROGRAMS / "lazy_torture"), str(N)], preload=False)
    assert r.returncode == 0, r.stderr
    return {line.split()[0]: line for line in r.stdout.splitlines()}


@pytest.mark.parametrize("case", CASES)
def test_every_way_to_touch_pending_results(case, native):
    """Each case: the program's output equals the native run's, eager and lazy, and the lazy run
    needed fewer flushes than nodes where the case lets anything wait."""
    eager = torture(case, "0")
    lazy = torture(case, "1")
    for r in (eager, lazy):
        assert r.returncode == 0, r.stderr
        assert r.stdout.splitlines()[-1] == native[case], (case, r.stdout, r.stderr)
        assert not [l for l in sol_lines(r.stderr) if "failed" in l or "error" in l], r.stderr
    e, l = transfers(eager.stderr), transfers(lazy.stderr)
    assert e[0] == e[1], eager.stderr  # eager: one flush per node
    assert l[0] == e[0], (eager.stderr, lazy.stderr)  # the same nodes ran on the device
    if case in ("chain", "inputs", "signals", "exit", "allocator", "interrupts"):
        assert l[1] < l[0], lazy.stderr
        assert l[2] < e[2], (eager.stderr, lazy.stderr)  # and moved less


def test_a_chain_moves_each_input_once_and_the_result_once():
    lazy = transfers(torture("chain", "1").stderr)
    matrix = 4 * N * N
    # A, P up once; C (beta = 1 in the last call) was produced on the device and never goes up.
    assert lazy[2] == 2 * matrix, lazy
    # Back: the results the host reads (C, E), and D, which the chain's end left on the device
    # dirty and exit wrote back (nothing is lost).
    assert lazy[3] == 3 * matrix, lazy


def test_lazy_without_a_device_backend_is_a_no_op(native):
    """SOL_LAZY=1 with a CPU backend: nothing served, guarded or deferred, no transfers line."""
    r = run([str(PROGRAMS / "lazy_torture"), str(N)], env={"SOL_BACKEND": "openblas", "SOL_LAZY": "1", "SOL_LOG": "debug"})
    assert r.returncode == 0, r.stderr
    assert {line.split()[0]: line for line in r.stdout.splitlines()} == native
    assert transfers(r.stderr) is None
    assert "lazy: on" not in r.stderr, r.stderr


@pytest.mark.skipif(any(pathlib.Path(p).exists() for p in ("/proc/driver/nvidia/gpus", "/dev/nvidiactl", "/dev/dxg")),
                    reason="an NVIDIA GPU may be here")
def test_lazy_on_cuda_without_a_gpu_is_a_no_op(native):
    """SOL_BACKEND=cuda where CUDA could find no device (no NVIDIA driver): the calls run
    elsewhere, and the lazy executor does not start (no allocation served, nothing guarded)."""
    r = run([str(PROGRAMS / "lazy_torture"), str(N)], env={"SOL_BACKEND": "cuda", "SOL_LOG": "debug"})
    assert r.returncode == 0, r.stderr
    assert {line.split()[0]: line for line in r.stdout.splitlines()} == native
    assert transfers(r.stderr) is None
    assert "lazy: on" not in r.stderr, r.stderr


NUMPY = r"""
import hashlib, sys
import numpy as np
n, steps = int(sys.argv[1]), int(sys.argv[2])
rng = np.random.default_rng(0)
A, B, C, D = (rng.standard_normal((n, n)).astype(np.float32) / np.sqrt(n) for _ in range(4))
chain = A @ B @ C @ D
x = rng.standard_normal((n, 32)).astype(np.float32)
for _ in range(steps):
    x = np.tanh(A @ x)
print(hashlib.sha1(chain.tobytes()).hexdigest(), hashlib.sha1(x.tobytes()).hexdigest())
"""


def test_numpy_chain_and_iteration_identical_and_a_moves_once(tmp_path):
    script = tmp_path / "lazy_numpy.py"
    script.write_text(NUMPY)
    n, steps = 512, 12
    out = {}
    for lazy in ("0", "1"):
        r = run([PYTHON, str(script), str(n), str(steps)], env={"SOL_BACKEND": "opencl", "SOL_LAZY": lazy, "SOL_LOG": "info"})
        assert r.returncode == 0, r.stderr
        out[lazy] = (r.stdout, transfers(r.stderr))
    assert out["0"][0] == out["1"][0]
    eager, lazy = out["0"][1], out["1"][1]
    matrix, panel = 4 * n * n, 4 * n * 32
    assert eager[0] == lazy[0] >= 3 + steps
    # Lazily each of A..D goes up once (A for the chain and every step of the iteration), and
    # the iteration's x once per step (numpy makes a new array each time: the host wrote it).
    assert lazy[2] <= 4 * matrix + (steps + 1) * panel, lazy
    assert eager[2] >= (3 * 2 + steps) * matrix, eager


def test_torch_mlp_loss_identical_lazy_and_eager():
    outs = []
    for lazy in ("0", "1"):
        r = run([PYTHON, str(PY_PROGRAMS / "lazy_mlp.py")], env={"SOL_BACKEND": "opencl", "SOL_LAZY": lazy, "SOL_LOG": "info"})
        assert r.returncode == 0, r.stderr
        outs.append((r.stdout, transfers(r.stderr)))
    assert outs[0][0] == outs[1][0], outs
    assert "loss" in outs[0][0]
    assert outs[1][1][0] == outs[0][1][0]  # the same nodes on the device


def test_the_trace_shows_each_flush_with_its_cause_and_bytes(tmp_path):
    r = run([str(PROGRAMS / "lazy_torture"), str(N), "chain", "syscalls"],
            env={"SOL_BACKEND": "opencl", "SOL_TRACE": "1", "SOL_TRACE_DIR": str(tmp_path), "SOL_LOG": "info"})
    assert r.returncode == 0, r.stderr
    nodes, flushes, _, back = transfers(r.stderr)
    (trace,) = tmp_path.glob("run-*/sol-*.trace.json")
    data = json.loads(trace.read_text())
    events = data["traceEvents"] if isinstance(data, dict) else data
    spans = [e for e in events if e.get("ph") == "X" and e["name"].startswith("flush (")]
    # Every flush of the process, on the "lazy flushes" track, its cause named, its bytes counted.
    assert len(spans) == flushes, (spans, r.stderr)
    assert {e["args"]["cause"] for e in spans} == {"host_read", "syscall"}, spans
    assert sum(e["args"]["bytes_back"] for e in spans) == back
    assert sum(e["args"]["nodes"] for e in spans) == nodes
    names = [e for e in events if e.get("ph") == "M" and e["name"] == "thread_name"]
    assert any(e["args"]["name"] == "lazy flushes" and e["tid"] == spans[0]["tid"] for e in names)
    # sol report sums them by cause.
    report = run([SOL, "report", str(tmp_path)], preload=False)
    assert re.search(r"device: %d nodes, %d flushes \(host_read 1, syscall %d\)" % (nodes, flushes, flushes - 1),
                     report.stdout), report.stdout


def test_a_node_that_cannot_wait_says_why_in_the_trace(tmp_path):
    """8 KiB results: below SOL_LAZY_MIN_BYTES, so each comes back at once, and its call says so."""
    r = run([str(PROGRAMS / "device_gemms"), "64", "32", "16", "2"],
            env={"SOL_BACKEND": "opencl", "SOL_TRACE": "1", "SOL_TRACE_DIR": str(tmp_path)})
    assert r.returncode == 0, r.stderr
    (trace,) = tmp_path.glob("run-*/sol-*.trace.json")
    data = json.loads(trace.read_text())
    calls = [e for e in data["traceEvents"] if e.get("ph") == "X" and e.get("name") == "sgemm_"]
    assert len(calls) == 2 and all(e["args"].get("lazy") == "eager: too small to guard" for e in calls), calls
    # A result that could wait has no such note.
    r = run([str(PROGRAMS / "lazy_torture"), str(N), "chain"],
            env={"SOL_BACKEND": "opencl", "SOL_TRACE": "1", "SOL_TRACE_DIR": str(tmp_path / "big")})
    (trace,) = (tmp_path / "big").glob("run-*/sol-*.trace.json")
    calls = [e for e in json.loads(trace.read_text())["traceEvents"] if e.get("name") == "sgemm_"]
    assert len(calls) == 4 and not any("lazy" in e["args"] for e in calls), calls


@pytest.mark.parametrize("program", ["torch_dnn_cnn.py", "torch_cnn.py", "dnnl_cnn", "torch_dnn_inplace.py"])
def test_dnn_programs_identical_lazy_and_eager(program):
    """DNN nodes on opencl are deferred like BLAS nodes: a CNN's activations and weights stay on
    the device between nodes (SOL_LAZY_MIN_BYTES=4096 guards its small tensors too). Every loss
    and checksum the program prints is the same either way; the PyTorch ones, whose host leaves
    results alone for a while, flush less often than they run nodes, and move fewer bytes to the
    device. In-place nodes (torch_dnn_inplace.py) run eagerly on a current host, the others stay
    lazy."""
    cmd = [PYTHON, str(PY_PROGRAMS / program)] if program.endswith(".py") else [str(PROGRAMS / program)]
    outs = []
    for lazy in ("0", "1"):
        r = run(cmd, env={"SOL_BACKEND": "opencl", "SOL_LAZY": lazy, "SOL_LOG": "info", "SOL_LAZY_MIN_BYTES": "4096"})
        assert r.returncode == 0, r.stderr
        outs.append((r.stdout, transfers(r.stderr)))
    (eager_out, eager), (lazy_out, lazy) = outs
    assert eager_out == lazy_out and eager_out
    assert eager[0] == lazy[0] > 0 and eager[1] == eager[0]  # same nodes; eagerly, one flush each
    assert lazy[2] < eager[2], (eager, lazy)  # inputs kept on the device move once
    if program.startswith("torch"):
        assert lazy[1] < lazy[0], (eager, lazy)
    if program.endswith("cnn.py"):
        assert lazy[3] < eager[3], (eager, lazy)  # intermediate results never come back


@pytest.mark.parametrize("limits", [{"SOL_LAZY_MAX_NODES": "1"}, {"SOL_LAZY_MAX_BYTES": "0"},
                                    {"SOL_LAZY_DEVICE_MEMORY": str(4 * N * N + 1)}])
def test_limits_flush_and_evict_without_losing_anything(limits, native):
    """One pending node at most, no result bytes held, or room for one matrix on the device: the
    chain flushes at every node, or evicts (writing back what is dirty), and prints the same."""
    r = torture("chain", "1", **limits)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[-1] == native["chain"]
    nodes, flushes, up, back = transfers(r.stderr)
    eager = transfers(torture("chain", "0").stderr)
    if "SOL_LAZY_DEVICE_MEMORY" in limits:
        assert up > transfers(torture("chain", "1").stderr)[2], r.stderr  # evicted inputs go up again
    else:
        assert flushes >= nodes - 1, r.stderr  # a limit reached at every node
    assert up <= eager[2] and nodes == eager[0]


def test_the_trace_shows_when_each_deferred_node_ran(tmp_path):
    """Each deferred call carries its node number; a "node ran" instant with that number marks when
    the device had done its work: after the call was made, in call order (an in-order queue)."""
    r = run([str(PROGRAMS / "lazy_torture"), str(N), "chain"],
            env={"SOL_BACKEND": "opencl", "SOL_TRACE": "1", "SOL_TRACE_DIR": str(tmp_path)})
    assert r.returncode == 0, r.stderr
    (trace,) = tmp_path.glob("run-*/sol-*.trace.json")
    events = json.loads(trace.read_text())["traceEvents"]
    calls = sorted((e for e in events if e.get("name") == "sgemm_"), key=lambda e: e["ts"])
    ran = {e["args"]["node"]: e["ts"] for e in events if e.get("name") == "node ran"}
    nodes = [c["args"].get("lazy_node") for c in calls]
    assert len(calls) == 4 and all(nodes) and nodes == sorted(nodes), calls
    assert set(ran) == set(nodes), (ran, nodes)
    for c in calls:
        assert ran[c["args"]["lazy_node"]] >= c["ts"], (c, ran)
    times = [ran[n] for n in nodes]
    assert times == sorted(times), times


REFERENCE_LAPACK = pathlib.Path("/usr/lib/x86_64-linux-gnu/lapack")


@pytest.mark.parametrize("routine", ["potrf", "getrf"])
def test_a_block_host_and_device_take_turns_on_runs_eagerly(tmp_path, routine):
    """The reference LAPACK's blocked factorizations (bench/lapack.c, n = 1024): each BLAS call a
    different block of one matrix, the host's own pivoting and scaling between them, so each
    device copy is dropped before a later node finds it. After a few such copies the matrix's
    calls run eagerly and say why; the factors are the eager run's, bit for bit, and so are the
    bytes moved, within the few copies kept before the decision."""
    bench = pathlib.Path(LIBSOL).parent / "bench" / "bench_lapack"
    if not bench.exists() or not (REFERENCE_LAPACK / "liblapack.so.3").exists():
        pytest.skip("bench_lapack or the reference LAPACK (liblapack3) is missing")
    env = {"SOL_BACKEND": "opencl", "SOL_LOG": "info", "LD_LIBRARY_PATH": str(REFERENCE_LAPACK)}
    eager = run([str(bench), routine, "1024"], env={**env, "SOL_LAZY": "0"})
    lazy = run([str(bench), routine, "1024"],
               env={**env, "SOL_TRACE": "1", "SOL_TRACE_STACKS": "0", "SOL_TRACE_DIR": str(tmp_path)})
    for r in (eager, lazy):
        assert r.returncode == 0, r.stderr
    checksum = [re.search(r" checksum=(\S+)", r.stdout).group(1) for r in (eager, lazy)]
    assert checksum[0] == checksum[1], (eager.stdout, lazy.stdout)
    (trace,) = tmp_path.glob("run-*/sol-*.trace.json")
    calls = [e for e in json.loads(trace.read_text())["traceEvents"]
             if e.get("ph") == "X" and e.get("name", "").startswith("d") and e.get("cat") != "device"]
    turns = [e for e in calls if e["args"].get("lazy") == "eager: host and device take turns on its block"]
    deferred = [e for e in calls if "lazy_node" in e["args"]]
    assert len(turns) > 100, (len(calls), len(turns))
    # Deferred only before the decision: the first of the calls that run eagerly for it comes
    # after every deferred one.
    assert len(deferred) < 64 and all(d["ts"] < turns[0]["ts"] for d in deferred), (len(deferred), len(turns))
    e, l = transfers(eager.stderr), transfers(lazy.stderr)
    assert l[0] == e[0], (eager.stderr, lazy.stderr)
    assert l[2] <= e[2] * 1.02 and l[3] <= e[3] * 1.02, (eager.stderr, lazy.stderr)
