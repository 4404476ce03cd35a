"""BLAS calls with 64-bit integers, through every name family that has them.

Real libraries only: programs linked to Debian's ILP64 BLAS (libblas64-3, the reference build, and
libopenblas64-0-pthread), which define the plain names (dgemm_, cblas_dgemm) with 64-bit integers;
and programs calling Julia's OpenBLAS names (dgemm_64_, cblas_dgemm64_) and oneMKL's ILP64 ones
(dgemm_64, cblas_dgemm_64) through a library that forwards them to Debian's openblas64, as Julia's
libblastrampoline does. Each run under libsol must print what the run without it printed, on every
backend; a backend runs what it is sent.
"""
import json
import os
import re

import pytest

from conftest import PROGRAMS, SOL, run, sol_lines

PLAIN = ["ilp64_calls_reference", "ilp64_calls_openblas"]
SUFFIXED = ["family_calls_openblas64", "family_calls_mkl64"]
BACKENDS = ["native", "auto", "reference", "openblas", "onednn", "opencl"]


def program(name):
    path = PROGRAMS / name
    if not path.exists():
        pytest.skip("%s was not built (Debian's libblas64-3 and libopenblas64-0-pthread: scripts/setup.sh)" % name)
    return str(path)


def counts(stderr):
    """{backend: calls} from the `sol: N calls: ...` line of SOL_LOG=info."""
    for line in sol_lines(stderr):
        m = re.match(r"sol: \d+ calls: (.*)", line)
        if m:
            return {b: int(n) for n, b in (part.split(" ", 1) for part in m.group(1).split(", "))}
    return {}


def without_and_with(name, env, args=("big",)):
    exe = program(name)
    plain = run([exe, *args], preload=False)
    assert plain.returncode == 0, plain.stderr
    sol = run([exe, *args], env={"SOL_LOG": "info", **env})
    assert sol.returncode == 0, sol.stderr[-3000:]
    assert sol.stdout == plain.stdout, sol.stderr[-3000:]
    return sol


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", PLAIN + SUFFIXED)
def test_every_backend_computes_what_the_library_does(name, backend):
    if backend == "opencl" and name not in ("ilp64_calls_reference", "family_calls_openblas64"):
        pytest.skip("one program per kind of name on opencl: its kernels compile once per process")
    env = {"SOL_BACKEND": backend}
    if backend == "auto":
        env["SOL_TUNE"] = "1"  # measures: native's runs are calls of the program's library at 64 bits
    sol = without_and_with(name, env)
    calls = counts(sol.stderr)
    assert sum(calls.values()) > 10, sol.stderr
    if backend in ("reference", "openblas", "opencl"):
        assert calls.get(backend, 0) > sum(calls.values()) / 2, calls  # not all declined
    if name in PLAIN:
        assert any("the plain BLAS names take 64-bit integers" in l for l in sol_lines(sol.stderr)), sol.stderr


@pytest.mark.parametrize("name", ["ilp64_calls_reference", "family_calls_openblas64"])
def test_a_call_beyond_32_bits_runs_where_its_integers_fit(name):
    """N = 2^32 + 1 (with INCX 0, a quick return): the openblas backend's integers are 32-bit, so
    it declines the call, which runs natively; the reference backend counts in 64 bits."""
    declined = without_and_with(name, {"SOL_BACKEND": "openblas", "SOL_LOG": "debug"})
    scal = "dscal_" if name.startswith("ilp64") else "dscal_64_"
    assert any(re.match(r"sol: openblas declines (%s|cblas_dscal\w*): .*does not fit the backend's 32-bit" % scal, l)
               for l in sol_lines(declined.stderr)), declined.stderr[-3000:]
    # Without the big calls every call fits.
    small = without_and_with(name, {"SOL_BACKEND": "openblas", "SOL_LOG": "debug"}, args=())
    assert "does not fit" not in small.stderr
    wide = without_and_with(name, {"SOL_BACKEND": "reference"})
    assert counts(wide.stderr) == {"reference": sum(counts(wide.stderr).values())}


@pytest.mark.parametrize("name", ["ilp64_calls_openblas", "family_calls_mkl64"])
def test_verify_compares_with_the_library_called_at_its_width(name):
    sol = without_and_with(name, {"SOL_BACKEND": "reference", "SOL_VERIFY": "1"})
    m = [re.match(r"sol: verify: (\d+) checked, (\d+) mismatches", l) for l in sol_lines(sol.stderr)]
    m = [x for x in m if x]
    assert m and int(m[0].group(1)) > 10 and m[0].group(2) == "0", sol.stderr


def test_auto_measures_and_profiles_each_library_at_its_width(tmp_path):
    """auto measures the GEMM classes, native's runs included (calls of the program's library back at
    64 bits), and keeps them in the profile under that library."""
    cache = str(tmp_path)
    without_and_with("ilp64_calls_reference", {"SOL_TUNE": "1", "XDG_CACHE_HOME": cache})
    without_and_with("family_calls_openblas64", {"SOL_TUNE": "1", "XDG_CACHE_HOME": cache})
    shown = run([SOL, "tune", "--show", "--format", "json"], preload=False, env={"XDG_CACHE_HOME": cache})
    assert shown.returncode == 0, shown.stderr
    natives = {row["native"] for row in json.loads(shown.stdout)["rows"]}
    assert any("libblas64.so" in n for n in natives), natives
    assert any("libblas_shim_openblas64.so" in n for n in natives), natives


def test_traces_name_each_familys_symbols(tmp_path):
    sol = without_and_with("family_calls_mkl64", {"SOL_TRACE": "1", "SOL_TRACE_DIR": str(tmp_path)})
    summaries = list(tmp_path.glob("run-*/sol-*.summary.json"))
    assert len(summaries) == 1, sol.stderr
    symbols = {op["symbol"] for op in json.load(open(summaries[0]))["ops"]}
    assert {"dgemm_64", "cblas_dgemm_64", "daxpy_64", "cblas_idamax_64"} <= symbols, symbols


def test_libraries_of_both_widths_leave_the_plain_names_untouched():
    """An LP64 and an ILP64 library both define the plain names: a call cannot say which width it
    has, so SOL passes it through untouched, with one line, whatever the backend asked for."""
    sol = without_and_with("mixed_widths", {"SOL_BACKEND": "reference"}, args=())
    lines = [l for l in sol_lines(sol.stderr) if "define the plain BLAS names" in l]
    assert len(lines) == 1 and "libblas.so.3" in lines[0] and "libblas64.so.3" in lines[0], sol.stderr
    assert counts(sol.stderr) == {}, sol.stderr  # no call was taken
