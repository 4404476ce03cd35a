"""NumPy and SciPy as pip installs them, under libsol.

The wheels bring their own OpenBLAS (numpy.libs/libscipy_openblas64_*.so, scipy.libs/
libscipy_openblas*.so) and call it through prefixed names: NumPy through scipy_cblas_sgemm64_ and
its kin (64-bit integers), SciPy through scipy_dgemm_ (32-bit), from extension modules that Python
loads privately (RTLD_LOCAL). scripts/setup.sh makes the venv ($SOL_TEST_DEPS/venv).

pip_wheels.py computes on small integers, so every backend's results are the wheels' own, bit for
bit. SciPy's LAPACK (lu_factor, solve) runs inside the wheel's OpenBLAS, which calls its own
kernels directly: those results are checked, and no call of theirs is expected.
"""
import glob
import json
import os
import pathlib
import re
import subprocess

import pytest

from conftest import LIBSOL, PY_PROGRAMS, SOL, SOURCE, run, sol_lines
from test_symbols import blas_spec_names, dynamic_symbols

VENV = pathlib.Path(os.environ.get("TEST_DEPS", "")) / "venv"
SCRIPT = str(PY_PROGRAMS / "pip_wheels.py")
BACKENDS = ["native", "auto", "reference", "openblas", "onednn", "opencl"]


@pytest.fixture(scope="module")
def python():
    exe = VENV / "bin" / "python"
    if not exe.exists():
        pytest.skip("no venv with pip's NumPy and SciPy at %s: run scripts/setup.sh" % VENV)
    return str(exe)


@pytest.fixture(scope="module")
def site_packages(python):
    return pathlib.Path(glob.glob(str(VENV / "lib" / "python3*" / "site-packages"))[0])


@pytest.fixture(scope="module")
def plain_run(python):
    r = run([python, SCRIPT], preload=False)
    assert r.returncode == 0, r.stderr
    assert len(r.stdout.splitlines()) > 40
    return r.stdout


def counts(stderr):
    for line in sol_lines(stderr):
        m = re.match(r"sol: \d+ calls: (.*)", line)
        if m:
            return {b: int(n) for n, b in (part.split(" ", 1) for part in m.group(1).split(", "))}
    return {}


def test_every_blas_name_the_wheels_import_is_intercepted(site_packages):
    families = blas_spec_names()
    blas_names = families["scipy"] | families["scipy64"]
    exported = dynamic_symbols(LIBSOL)
    numpy_ext = glob.glob(str(site_packages / "numpy" / "_core" / "_multiarray_umath*.so"))[0]
    scipy_ext = glob.glob(str(site_packages / "scipy" / "linalg" / "_fblas*.so"))[0]
    numpy_blas = dynamic_symbols(numpy_ext, defined=False) & blas_names
    scipy_blas = dynamic_symbols(scipy_ext, defined=False) & blas_names
    assert {"scipy_cblas_sgemm64_", "scipy_cblas_dgemm64_", "scipy_cblas_zdotc_sub64_"} <= numpy_blas
    assert {"scipy_dgemm_", "scipy_sgemv_", "scipy_zaxpy_"} <= scipy_blas
    assert (numpy_blas | scipy_blas) - exported == set()
    # And the wheels' libraries define what libsol forwards to: every name of each family (but
    # the two cabs1 functions, which OpenBLAS has no CBLAS form of).
    for pattern, family in (("numpy.libs/libscipy_openblas64_*.so", "scipy64"),
                            ("scipy.libs/libscipy_openblas-*.so", "scipy")):
        defined = dynamic_symbols(glob.glob(str(site_packages / pattern))[0])
        missing = {n for n in families[family] - defined if "cabs1" not in n}
        assert missing == set(), (family, sorted(missing)[:10])


@pytest.mark.parametrize("backend", BACKENDS)
def test_results_are_the_wheels_own_on_every_backend(python, plain_run, backend):
    env = {"SOL_BACKEND": backend, "SOL_LOG": "info"}
    if backend == "auto":
        env["SOL_TUNE"] = "1"
    r = run([python, SCRIPT], env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout == plain_run, r.stderr[-3000:]
    calls = counts(r.stderr)
    assert sum(calls.values()) >= 30, r.stderr  # NumPy's and SciPy's BLAS calls, all seen
    if backend in ("reference", "openblas", "opencl"):
        assert calls == {backend: sum(calls.values())}, calls
    if backend == "onednn":
        assert calls.get("onednn", 0) >= 3, calls  # the f32 GEMMs; the rest is not its
    if backend == "native":
        assert calls == {"native": sum(calls.values())}, calls


def test_verify_reports_no_mismatch(python, plain_run):
    r = run([python, SCRIPT], env={"SOL_BACKEND": "reference", "SOL_VERIFY": "1"})
    assert r.returncode == 0 and r.stdout == plain_run, r.stderr[-3000:]
    verdict = [l for l in sol_lines(r.stderr) if l.startswith("sol: verify:")]
    m = re.match(r"sol: verify: (\d+) checked, 0 mismatches", verdict[0]) if verdict else None
    assert m and int(m.group(1)) >= 30, r.stderr


def test_a_traced_run_names_the_python_function_behind_a_matmul(python, tmp_path):
    r = run([python, SCRIPT], env={"SOL_TRACE": "1", "SOL_TRACE_DIR": str(tmp_path)})
    assert r.returncode == 0, r.stderr[-3000:]
    summary = json.load(open(glob.glob(str(tmp_path / "run-*" / "sol-*.summary.json"))[0]))
    symbols = {op["symbol"] for op in summary["ops"]}
    assert {"scipy_cblas_sgemm64_", "scipy_cblas_zgemm64_", "scipy_dgemm_", "scipy_zaxpy_"} <= symbols
    line = next(n for n, text in enumerate(open(SCRIPT), 1) if "# LINE matmul" in text)
    frame = "pip_matmul_from_here (%s:%d)" % (SCRIPT, line)
    gemm_sites = [s for s in summary["sites"] if frame in s["frames"]]
    assert gemm_sites, [s["frames"] for s in summary["sites"]][:3]


def test_sol_backends_lists_the_wheels_libraries(site_packages):
    libs = [glob.glob(str(site_packages / p))[0]
            for p in ("numpy.libs/libscipy_openblas64_*.so", "scipy.libs/libscipy_openblas-*.so")]
    r = subprocess.run([SOL, "backends", "--load", libs[0], "--load", libs[1]], capture_output=True, text=True,
                       env={k: v for k, v in os.environ.items() if not k.startswith("SOL_")}, timeout=300)
    assert r.returncode == 0, r.stderr
    listed = {l.strip().split(": ")[0]: l for l in r.stdout.splitlines() if l.startswith("  /")}
    assert re.search(r"scipy64 \d+ \(64-bit\); OpenBLAS code", listed[libs[0]])
    assert re.search(r"scipy \d+ \(32-bit\); OpenBLAS code", listed[libs[1]])
