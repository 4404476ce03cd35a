"""Backends on real programs: where calls run (read back from traces), NumPy and PyTorch results
within floating-point tolerance of native, programs with no BLAS library at all, CBLAS error
messages, routing rules,
strict mode, verify mode with a wrong result planted in a backend, and `sol backends`."""
import glob
import json
import math
import os
import re
import textwrap

import pytest

from conftest import PROGRAMS, PY_PROGRAMS, PYTHON, REFERENCE_BLAS_DIR, SOL, run, sol_lines

BACKENDS = ["reference", "openblas", "onednn", "opencl"]


def backend_calls(trace_dir):
    """{(symbol, backend): calls} over every summary in a trace directory."""
    out = {}
    for p in glob.glob(os.path.join(trace_dir, "**", "sol-*.summary.json"), recursive=True):
        for o in json.load(open(p))["ops"]:
            key = (o["symbol"], o["backend"])
            out[key] = out.get(key, 0) + o["calls"]
    return out


def numbers(text):
    """Every number on every line (floats, and float.hex() values), for tolerant comparison."""
    vals = []
    for tok in re.split(r"[\s,()\[\]]+", text):
        try:
            vals.append(float.fromhex(tok) if tok.startswith(("0x", "-0x")) else float(tok))
        except ValueError:
            pass
    return vals


def close(a, b, rtol):
    return len(a) == len(b) and all(math.isclose(x, y, rel_tol=rtol, abs_tol=rtol) for x, y in zip(a, b))


@pytest.fixture(scope="module")
def available():
    out = run([SOL, "backends"], preload=False).stdout
    return {name for name in BACKENDS if re.search(r"^%s\s+available" % name, out, re.M)}


def need(backend, available):
    if backend not in available:
        pytest.skip("%s is not available here (see `sol backends`)" % backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("program", ["numpy_ops", "torch_mlp", "torch_cnn", "torch_lstm"])
def test_framework_results_within_tolerance(program, backend, available, tmp_path):
    need(backend, available)
    cmd = [PYTHON, str(PY_PROGRAMS / (program + ".py"))]
    native = run(cmd, preload=False, cwd=PY_PROGRAMS)
    r = run(cmd, cwd=PY_PROGRAMS, env={"SOL_BACKEND": backend, "SOL_TRACE": "1", "SOL_TRACE_DIR": str(tmp_path)})
    assert r.returncode == 0, r.stderr[-3000:]
    # float32 training for a few steps: summation order changes the last bits, which then grow
    assert close(numbers(r.stdout), numbers(native.stdout), 2e-3), (r.stdout, native.stdout)
    served = {k: v for k, v in backend_calls(str(tmp_path)).items() if k[1] == backend}
    if backend == "onednn":  # it takes single-precision GEMM only
        assert any("gemm" in sym for sym, _ in served) or program == "torch_lstm" and not served
    else:
        assert served, "no call ran on %s: %s" % (backend, backend_calls(str(tmp_path)))


@pytest.mark.parametrize("gemm", ["sgemm", "matmul"])
def test_onednn_gemm_in_forked_workers(gemm, available, tmp_path):
    """A parent's threaded oneDNN GEMMs, then forked workers' (GNU OpenMP's threads do not survive
    fork: without care the workers hang, which the program's watchdog reports)."""
    need("onednn", available)
    config = tmp_path / "sol.toml"
    config.write_text('[backends.onednn]\ngemm = "%s"\n' % gemm)
    cmd = [PYTHON, str(PY_PROGRAMS / "numpy_fork_float32.py")]
    native = run(cmd, preload=False, cwd=PY_PROGRAMS)
    traces = tmp_path / "trace"
    r = run(cmd, cwd=PY_PROGRAMS, timeout=300, env={"SOL_BACKEND": "onednn", "SOL_CONFIG": str(config),
                                                    "SOL_TRACE": "1", "SOL_TRACE_DIR": str(traces)})
    assert r.returncode == 0, r.stderr[-3000:]
    assert close(numbers(r.stdout), numbers(native.stdout), 2e-3), (r.stdout, native.stdout)
    served = [p for p in glob.glob(str(traces / "**" / "sol-*.summary.json"), recursive=True)
              if any(o["symbol"] == "cblas_sgemm" and o["backend"] == "onednn" for o in json.load(open(p))["ops"])]
    assert len(served) >= 2, "cblas_sgemm ran on onednn in %d processes" % len(served)  # parent, workers


@pytest.mark.parametrize("backend", ["auto", "reference", "openblas"])
def test_program_without_any_blas_library(backend):
    r = run([str(PROGRAMS / "no_native")], preload=False, env={"SOL_BACKEND": backend})
    assert r.returncode == 0, r.stderr
    assert r.stdout == "sgemm 23 34 31 46\ncblas_dgemm 19 22 43 50\n"


def test_invalid_call_without_any_blas_library_behaves_like_the_reference():
    # The reference XERBLA prints this and STOPs (exit status 0); no other library provides one.
    r = run([str(PROGRAMS / "no_native"), "invalid"], preload=False, env={"SOL_BACKEND": "reference"})
    assert (r.returncode, r.stdout) == (0, " ** On entry to SGEMM parameter number  3 had an illegal value\n")


CBLAS_ERROR_CASES = 11  # tests/programs/cblas_errors.c


@pytest.mark.parametrize("backend", ["auto", "reference", "openblas"])
def test_cblas_errors_print_what_the_reference_prints(backend, available):
    """Invalid enums, layouts and dimensions: libsol reports them itself (the call goes to a
    backend) through the program's cblas_xerbla, with the value the program passed."""
    if backend != "auto":
        need(backend, available)
    env = {"LD_LIBRARY_PATH": REFERENCE_BLAS_DIR}
    for case in range(CBLAS_ERROR_CASES):
        cmd = [str(PROGRAMS / "cblas_errors"), str(case)]
        plain = run(cmd, preload=False, env=env)
        assert plain.returncode == 255 and "incorrect" in plain.stderr, (case, plain.stderr)
        r = run(cmd, env=dict(env, SOL_BACKEND=backend))
        assert (r.returncode, r.stdout, r.stderr) == (plain.returncode, plain.stdout, plain.stderr), case


def test_auto_with_reference_blas_runs_large_calls_on_openblas(tmp_path, available):
    need("openblas", available)
    script = ("import numpy as np\n"
              "a = np.ones((300, 300)); print(float((a @ a).sum()))\n"
              "b = np.ones((2, 2)); print(float((b @ b).sum()))\n")
    r = run([PYTHON, "-c", script], env={"LD_LIBRARY_PATH": REFERENCE_BLAS_DIR, "SOL_TRACE": "1",
                                         "SOL_TRACE_DIR": str(tmp_path)})
    assert r.returncode == 0 and r.stdout == "27000000.0\n8.0\n", r.stderr
    calls = backend_calls(str(tmp_path))
    assert calls.get(("cblas_dgemm", "openblas")) == 1  # 54 MFLOP: worth a fast library
    assert calls.get(("cblas_dgemm", "native")) == 1    # 16 flops: stays with the reference


def test_auto_with_an_optimized_native_library_stays_native(tmp_path):
    r = run([PYTHON, "-c", "import numpy as np; a = np.ones((300, 300)); print((a @ a).sum())"],
            env={"SOL_TRACE": "1", "SOL_TRACE_DIR": str(tmp_path)})
    assert r.returncode == 0
    assert set(b for _, b in backend_calls(str(tmp_path))) == {"native"}


def test_route_rules(tmp_path, available):
    need("openblas", available)
    (tmp_path / "sol.toml").write_text(textwrap.dedent("""\
        backend = "native"
        [[route]]
        op = "gemm"
        dtype = "f64"
        backend = "reference"
        max_flops = 1e6
        [[route]]
        op = "blas3"
        backend = "openblas"
        """))
    script = ("import numpy as np\n"
              "np.ones((10, 10)) @ np.ones((10, 10))\n"           # f64 gemm, 2000 flops: reference
              "np.ones((200, 200)) @ np.ones((200, 200))\n"       # f64 gemm, 16 MFLOP: blas3 rule
              "np.ones((10, 10), np.float32) @ np.ones((10, 10), np.float32)\n"  # f32: blas3 rule
              "np.ones(10) @ np.ones(10)\n")                      # dot: native
    r = run([PYTHON, "-c", script], cwd=tmp_path, env={"HOME": str(tmp_path), "SOL_TRACE": "1",
                                                      "SOL_TRACE_DIR": str(tmp_path / "t")})
    assert r.returncode == 0 and r.stderr == "" or "sol: trace" in r.stderr, r.stderr
    calls = backend_calls(str(tmp_path / "t"))
    assert calls[("cblas_dgemm", "reference")] == 1
    assert calls[("cblas_dgemm", "openblas")] == 1
    assert calls[("cblas_sgemm", "openblas")] == 1
    assert calls[("cblas_ddot", "native")] == 1


def test_bad_route_rules_are_reported(tmp_path):
    (tmp_path / "sol.toml").write_text('[[route]]\nop = "gemv"\nbackend = "openbals"\n'
                                       '[[route]]\nop = "gemmm"\nbackend = "reference"\n'
                                       '[[route]]\nbackend = "reference"\nmin_flop = 3\n')
    r = run([str(PROGRAMS / "sdot")], cwd=tmp_path, env={"HOME": str(tmp_path)})
    assert r.returncode == 0 and r.stdout == "sdot=32\n"
    lines = sol_lines(r.stderr)
    assert len(lines) == 3, r.stderr
    assert "route.backend = 'openbals' is not a backend (did you mean 'openblas'?)" in lines[0]
    assert "route.op = 'gemmm' is not an operation or family (did you mean 'gemm'?)" in lines[1]
    assert "unknown key 'route.min_flop' (did you mean 'min_flops'?)" in lines[2]


def test_a_routine_a_backend_lacks_falls_through(tmp_path, available):
    need("onednn", available)
    # onednn takes only f32 GEMM: dgemm_ falls through to native, sgemm_ stays on onednn
    r = run([str(PROGRAMS / "threads")], env={"SOL_BACKEND": "onednn", "SOL_TRACE": "1", "SOL_TRACE_DIR": str(tmp_path)})
    assert r.returncode == 0 and "wrong=0" in r.stdout, r.stdout + r.stderr
    calls = backend_calls(str(tmp_path))
    assert calls[("sgemm_", "onednn")] == 480 and calls[("dgemm_", "native")] == 480


def test_strict_mode_makes_a_fallback_fatal(available):
    need("onednn", available)
    r = run([str(PROGRAMS / "threads")], env={"SOL_BACKEND": "onednn", "SOL_STRICT": "1"})
    assert r.returncode == 70, (r.returncode, r.stderr)
    assert any("SOL_STRICT=1 and dgemm_ was declined by onednn" in l for l in sol_lines(r.stderr)), r.stderr


def test_verify_reports_a_planted_wrong_result(tmp_path):
    (tmp_path / "sol.toml").write_text('backend = "openblas"\n[backends.openblas]\nlibrary = "%s"\n'
                                       % (PROGRAMS / "libwrong_blas.so"))
    # Native is the reference BLAS, so the openblas backend opens the configured (wrong) library.
    # A library is taken only from a file named explicitly, not from ./sol.toml.
    r = run([str(PROGRAMS / "threads")], cwd=tmp_path,
            env={"HOME": str(tmp_path), "SOL_CONFIG": str(tmp_path / "sol.toml"), "SOL_VERIFY": "1",
                 "SOL_TRACE_DIR": str(tmp_path / "t"),
                 "LD_LIBRARY_PATH": REFERENCE_BLAS_DIR})
    verify = [l for l in sol_lines(r.stderr) if l.startswith("sol: verify: ")]
    assert verify == ["sol: verify: 480 checked, 480 mismatches"], r.stderr
    (jsonl,) = glob.glob(str(tmp_path / "t" / "sol-*.verify.jsonl"))
    rows = [json.loads(l) for l in open(jsonl)]
    assert len(rows) == 480
    assert all(row["symbol"] == "sgemm_" and row["backend"] == "openblas" and row["against"] == "native"
               and row["operand"] == "c" and row["max_abs_err"] >= 0.99 for row in rows)


@pytest.mark.parametrize("backend", ["reference", "openblas"])
def test_verify_passes_correct_backends(backend, available, tmp_path):
    need(backend, available)
    r = run([PYTHON, str(PY_PROGRAMS / "numpy_ops.py")], cwd=PY_PROGRAMS,
            env={"SOL_BACKEND": backend, "SOL_VERIFY": "1", "SOL_TRACE_DIR": str(tmp_path)})
    assert r.returncode == 0, r.stderr
    (line,) = [l for l in sol_lines(r.stderr) if l.startswith("sol: verify: ")]
    checked, mismatches = map(int, re.findall(r"\d+", line))
    assert checked >= 30 and mismatches == 0, line  # every BLAS call of numpy_ops.py, a few dozen


def test_sol_backends_lists_every_backend():
    r = run([SOL, "backends"], preload=False)
    assert r.returncode == 0, r.stderr
    for name in ["native"] + BACKENDS:
        assert re.search(r"^%s\s" % name, r.stdout, re.M), name
    assert re.search(r"^reference\s+available.*\n\s+takes all 148 BLAS routines", r.stdout, re.M)
    assert re.search(r"^onednn\s+.*\n\s+takes 1 of 148 BLAS routines: gemm \(f32\)", r.stdout, re.M) or \
        "onednn     unavailable" in r.stdout
