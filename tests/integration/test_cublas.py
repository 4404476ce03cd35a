"""The cuBLAS frontend without a GPU: its spec against the CUDA headers and libraries, a program
linked to cuBLAS run with and without libsol, and its trace; and, marked gpu, the GPU check
script (skipped where there is no CUDA device)."""
import json
import os
import pathlib
import re
import subprocess
import tomllib

import pytest

from conftest import LIBSOL, PROGRAMS, SOL, SOURCE, run

CUDA = pathlib.Path(os.environ.get("CUDA_HOME", "/usr/local/cuda"))
HEADERS = [CUDA / "include" / "cublas_api.h", CUDA / "include" / "cublasLt.h"]
LIBRARIES = [CUDA / "lib64" / "libcublas.so.13", CUDA / "lib64" / "libcublasLt.so.13"]
needs_toolkit = pytest.mark.skipif(not all(p.exists() for p in HEADERS + LIBRARIES),
                                   reason="no CUDA 13 toolkit at %s" % CUDA)


def spec():
    with open(SOURCE / "interpose" / "spec" / "cublas.toml", "rb") as f:
        return tomllib.load(f)["fn"]


def normalise(decl):
    """A C declaration in one spelling: comments gone, one space between tokens, "T* p"."""
    decl = re.sub(r"/\*.*?\*/|//[^\n]*", " ", decl, flags=re.S)
    decl = " ".join(decl.split())
    decl = re.sub(r"\s*\*\s*", "* ", decl)
    decl = re.sub(r"\s*,\s*", ", ", decl)
    decl = re.sub(r"\(\s*", "(", decl)
    return re.sub(r"\s*\)", ")", decl)


def header_prototypes():
    """name -> normalised declaration, for every CUBLASWINAPI function of the headers."""
    protos = {}
    for h in HEADERS:
        text = re.sub(r"/\*.*?\*/|//[^\n]*", " ", h.read_text(), flags=re.S)
        for m in re.finditer(r"(\w+\s*\**)\s*CUBLASWINAPI\s+(\w+)\s*\(([^;{]*?)\)\s*;", text, re.S):
            protos[m.group(2)] = normalise("%s %s(%s)" % (m.group(1), m.group(2), m.group(3)))
    return protos


@needs_toolkit
def test_every_spec_prototype_is_the_headers():
    protos = header_prototypes()
    assert len(protos) > 500
    for fn in spec():
        name = re.search(r"(cublas\w+)\s*\(", fn["sig"]).group(1)
        assert name in protos, "%s is not declared in the CUDA headers" % name
        assert normalise(fn["sig"]) == protos[name], name


@needs_toolkit
def test_the_spec_covers_the_gemm_family():
    """Every GEMM / GEMV entry point the headers declare in the families PyTorch reaches, the
    64-bit-index variants included, and the calls they depend on."""
    protos = header_prototypes()
    names = {re.search(r"(cublas\w+)\s*\(", fn["sig"]).group(1) for fn in spec()}
    family = re.compile(r"cublas[SDCZ]gemm(_v2|StridedBatched|Batched)(_64)?$|cublas[SDCZ]gemv_v2(_64)?$|"
                        r"cublasGemm(Ex|StridedBatchedEx|BatchedEx)(_64)?$")
    wanted = {n for n in protos if family.match(n)}
    assert len(wanted) == 38
    wanted |= {"cublasCreate_v2", "cublasDestroy_v2", "cublasSetStream_v2", "cublasGetStream_v2",
               "cublasSetWorkspace_v2", "cublasSetMathMode", "cublasLtCreate", "cublasLtDestroy", "cublasLtMatmul",
               "cublasLtMatmulDescCreate", "cublasLtMatmulDescSetAttribute", "cublasLtMatmulDescDestroy",
               "cublasLtMatrixLayoutCreate", "cublasLtMatrixLayoutSetAttribute", "cublasLtMatrixLayoutDestroy"}
    assert wanted - names == set()


@needs_toolkit
def test_every_spec_entry_is_defined_by_the_libraries():
    defined = set()
    for lib in LIBRARIES:
        out = subprocess.run(["nm", "-D", "--defined-only", str(lib)], capture_output=True, text=True, check=True)
        defined |= {line.split()[-1].split("@")[0] for line in out.stdout.splitlines() if line.strip()}
    names = {re.search(r"(cublas\w+)\s*\(", fn["sig"]).group(1) for fn in spec()}
    assert names - defined == set()


def cublas_program():
    path = PROGRAMS / "cublas_calls"
    if not path.exists():
        pytest.skip("cublas_calls not built (no CUDA toolkit)")
    return str(path)


def test_calls_behave_the_same_under_libsol(tmp_path):
    prog = cublas_program()
    plain = run([prog], preload=False)
    assert plain.returncode == 0, plain.stderr
    if "device present" in plain.stdout:
        pytest.skip("a CUDA device is present: the failing-handle calls are not made")
    assert "cublasCreate_v2 0" not in plain.stdout  # no device: creation fails
    for env in ({}, {"SOL_TRACE": "1", "SOL_TRACE_DIR": str(tmp_path)}):
        r = run([prog], env=env)
        assert r.returncode == 0, r.stderr
        assert r.stdout == plain.stdout


def test_trace_describes_cublas_calls(tmp_path):
    prog = cublas_program()
    r = run([prog], env={"SOL_TRACE": "1", "SOL_TRACE_DIR": str(tmp_path)})
    assert r.returncode == 0, r.stderr
    if "device present" in r.stdout:
        pytest.skip("a CUDA device is present: the failing-handle calls are not made")
    (summary,) = tmp_path.glob("run-*/sol-*.summary.json")
    ops = {o["symbol"]: o for o in json.loads(summary.read_text())["ops"]}
    assert ops["cublasCreate_v2"]["op"] == "cublas_api" and ops["cublasCreate_v2"]["api"] == "cublas"
    sgemm = ops["cublasSgemm_v2"]
    assert (sgemm["op"], sgemm["dtype"], sgemm["shape"]) == ("gemm", "f32", "m=64 n=32 k=128 transa=T transb=N")
    assert sgemm["flops"] == 2 * 64 * 32 * 128
    assert "device_calls" not in sgemm  # no CUDA runtime in the process: traced without device time
    ex = ops["cublasGemmStridedBatchedEx"]
    assert (ex["dtype"], ex["shape"]) == ("f16", "m=16 n=8 k=4 transa=N transb=N batch=3 compute=32F")
    assert ex["flops"] == 2 * 16 * 8 * 4 * 3
    # cublasLtMatmul described from the layouts and the descriptor the program set up before
    lt = ops["cublasLtMatmul"]
    assert lt["api"] == "cublaslt"
    assert (lt["op"], lt["dtype"], lt["shape"]) == ("gemm", "f32", "m=64 n=32 k=128 transa=T transb=N batch=4 epilogue=BIAS")
    assert lt["flops"] == 2 * 64 * 32 * 128 * 4
    assert ops["cublasLtMatrixLayoutSetAttribute"]["calls"] == 6
    trace = next(tmp_path.glob("run-*/sol-*.trace.json")).read_text()
    event = re.search(r'"name":"cublasLtMatmul".*?"params":"([^"]*)"', trace).group(1)
    # alpha is read from host memory (the descriptor's pointer mode is host), strides from the layouts
    assert event.startswith("lda=128 ldb=128 ldc=64 alpha=2 beta=0 stridea=8192 strideb=4096 stridec=2048 stream=0x0")


def test_cublas_sgemm_matches_blas_sgemm_in_sol_diff(tmp_path):
    """A cuBLAS sgemm and a BLAS sgemm of one problem are one op for sol diff --across-apis."""
    prog = cublas_program()
    gpu = tmp_path / "gpu"
    r = run([prog], env={"SOL_TRACE": "1", "SOL_TRACE_DIR": str(gpu)})
    if "device present" in r.stdout:
        pytest.skip("a CUDA device is present: the failing-handle calls are not made")
    # The same problem through the Fortran BLAS: C (64x32) = A^T (A 128x64) B (128x32)
    cpu = tmp_path / "cpu"
    code = ("import ctypes, numpy as np\n"
            "ctypes.CDLL('libblas.so.3', mode=ctypes.RTLD_GLOBAL)\n"
            "blas = ctypes.CDLL(None)  # the process's sgemm_: libsol's, as a linked program's would be\n"
            "a = np.ones((128, 64), np.float32, order='F'); b = np.ones((128, 32), np.float32, order='F')\n"
            "c = np.zeros((64, 32), np.float32, order='F')\n"
            "i = lambda v: ctypes.byref(ctypes.c_int(v)); f = lambda v: ctypes.byref(ctypes.c_float(v))\n"
            "blas.sgemm_(b'T', b'N', i(64), i(32), i(128), f(2), a.ctypes, i(128), b.ctypes, i(128), f(0),"
            " c.ctypes, i(64), ctypes.c_size_t(1), ctypes.c_size_t(1))\n")
    r = run(["/usr/bin/python3", "-c", code], env={"SOL_TRACE": "1", "SOL_TRACE_DIR": str(cpu)})
    assert r.returncode == 0, r.stderr
    d = subprocess.run([SOL, "diff", "--across-apis", "--format", "json", str(cpu), str(gpu)], capture_output=True,
                       text=True)
    assert d.returncode == 0, d.stderr
    common = json.loads(d.stdout)["ops"]["common"]
    rows = [o for o in common if o["op"] == "gemm" and o["shape"] == "m=64 n=32 k=128 transa=T transb=N"]
    assert len(rows) == 1
    assert set(rows[0]["symbol"].split("+")) == {"sgemm_", "cublasSgemm_v2"}


def traced_with_fake_runtime(tmp_path, **fake_env):
    """cublas_calls traced with tests/programs/fake_cudart.c as the process's CUDA runtime: its
    summary.json ops by symbol, summary.txt, trace.json's events and the fake runtime's stderr line."""
    prog = cublas_program()
    fake = PROGRAMS / "libfake_cudart.so"
    env = {"SOL_TRACE": "1", "SOL_TRACE_DIR": str(tmp_path), "LD_PRELOAD": "%s:%s" % (LIBSOL, fake), **fake_env}
    r = run([prog], env=env)
    assert r.returncode == 0, r.stderr
    if "device present" in r.stdout:
        pytest.skip("a CUDA device is present: the failing-handle calls are not made")
    (summary,) = tmp_path.glob("run-*/sol-*.summary.json")
    base = str(summary)[:-len(".summary.json")]
    ops = {o["symbol"]: o for o in json.loads(summary.read_text())["ops"]}
    with open(base + ".trace.json") as f:
        events = [json.loads(l[1:]) for l in f if l.startswith(",{")]
    with open(base + ".summary.txt") as f:
        text = f.read()
    [counts] = [l for l in r.stderr.splitlines() if l.startswith("fake_cudart: ")]
    return ops, text, events, counts


GEMMS = ("cublasSgemm_v2", "cublasGemmStridedBatchedEx", "cublasLtMatmul")


@pytest.mark.parametrize("never_ready", [False, True])
def test_device_time_from_the_programs_cuda_runtime(tmp_path, never_ready):
    """Device time (interpose/cuda/device_time.cpp) through a stand-in CUDA runtime whose events hold
    the host clock: every GEMM timed, in the summaries and on a device track of trace.json placed
    where the call ran. Events are read at later calls without waiting; with events that never say
    they are ready, the process's end waits for each."""
    ops, text, events, counts = traced_with_fake_runtime(
        tmp_path, **({"FAKE_CUDART_NEVER_READY": "1"} if never_ready else {}))
    for name in GEMMS:
        assert ops[name]["device_calls"] == ops[name]["calls"] == 1, ops[name]
        assert ops[name]["device_ns"] > 0
    assert not any("device_calls" in o for o in ops.values() if o["op"] == "cublas_api")
    # One anchor waited for once; otherwise nothing is waited for but what is pending at exit.
    assert counts.endswith(" %d synchronized" % (1 + (len(GEMMS) if never_ready else 0))), counts
    # summary.txt: the "Device time" table, by device time, one row per timed op.
    table = text.split("\nDevice time: ", 1)[1].split("\n\n", 1)[0].splitlines()
    assert table[0].startswith("%d calls timed on the device" % len(GEMMS)), table
    assert sorted(re.search(r" (cublas\w+) +gemm ", l).group(1) for l in table[2:]) == sorted(GEMMS), table
    # trace.json: each GEMM's device event on the default stream's track, linked by seq.
    tracks = {e["tid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "thread_name"}
    device = [e for e in events if e.get("cat") == "device"]
    calls = {e["args"]["seq"]: e for e in events if e.get("ph") == "X" and e.get("cat") != "device"}
    assert sorted(e["name"] for e in device) == sorted(GEMMS)
    for e in device:
        assert e["tid"] == 1 << 30 and tracks[e["tid"]] == "cuda device 0 stream 0x0"
        assert e["args"]["op"] == "gemm"
        call = calls[e["args"]["seq"]]
        assert call["name"] == e["name"]
        # The fake device ran the call while the host did (its events bracket the call): the anchor
        # placed it there, to within 20 us.
        assert e["ts"] <= call["ts"] + 20 and e["ts"] + e["dur"] >= call["ts"] + call["dur"] - 20, (e, call)


def test_no_device_time_inside_cuda_graph_capture(tmp_path):
    """Calls on a stream being captured into a CUDA graph are traced without device time: no event
    is recorded on the stream, none created."""
    ops, text, events, counts = traced_with_fake_runtime(tmp_path, FAKE_CUDART_CAPTURING="1")
    for name in GEMMS:
        assert ops[name]["calls"] == 1 and "device_calls" not in ops[name]
    assert "Device time" not in text
    assert not any(e.get("cat") == "device" for e in events)
    assert counts == "fake_cudart: 0 events created, 0 synchronized"


@pytest.mark.gpu
def test_gpu_check_script(tmp_path):
    """scripts/gpu/cublas_trace.sh: skips cleanly without a device, passes with one."""
    build = pathlib.Path(LIBSOL).parent
    env = {k: v for k, v in os.environ.items() if not k.startswith("SOL_") and k != "LD_PRELOAD"}
    env.update({"SOL_BUILD": str(build), "OUT": str(tmp_path)})
    r = subprocess.run([str(SOURCE / "scripts" / "gpu" / "cublas_trace.sh")], env=env, capture_output=True, text=True,
                       timeout=300)
    if r.stdout.startswith("SKIP"):
        pytest.skip(r.stdout.strip())
    assert r.returncode == 0 and "FAIL" not in r.stdout, r.stdout + r.stderr
