"""The reference BLAS test programs built ILP64 under libsol.

xblat1/2/3 for s, d, c and z, compiled with -fdefault-integer-8 from the lapack source package's
BLAS/TESTING (scripts/setup.sh fetches it) and linked to Debian's reference libblas64.so.3, whose
plain names take 64-bit integers. Each runs without and with libsol, as test_blas_programs.py runs
the LP64 ones: the same PASSED lines, no failure, error exits included (the program's own XERBLA
gets INFO as a 64-bit INTEGER).
"""
import os
import pathlib
import re
import shutil

import pytest

from conftest import PROGRAMS, run, sol_lines
from test_blas_programs import FAILURE, passed_lines

NAMES = ["xblat%d%s" % (level, t) for level in (1, 2, 3) for t in "sdcz"]
TESTING = pathlib.Path(os.environ.get("TEST_DEPS", "")) / "lapack" / "BLAS" / "TESTING"


def run_program(name, work, env, preload):
    exe = PROGRAMS / "ilp64" / name
    if not exe.exists():
        pytest.skip("the ILP64 test programs were not built: run scripts/setup.sh, then cmake again")
    work.mkdir()
    level, t = name[5], name[6]
    stdin = None
    summary = None
    if level != "1":
        shutil.copy(TESTING / ("%sblat%s.in" % (t, level)), work)
        stdin = open(work / ("%sblat%s.in" % (t, level)))
        summary = work / ("%sblat%s.out" % (t, level))
    try:
        r = run([str(exe)], env=env, cwd=work, stdin=stdin, preload=preload)
    finally:
        if stdin:
            stdin.close()
    return r, r.stdout + (summary.read_text() if summary and summary.exists() else "")


def check(name, tmp_path, env):
    plain, plain_out = run_program(name, tmp_path / "plain", {}, preload=False)
    assert plain.returncode == 0, plain_out[-2000:]
    sol, sol_out = run_program(name, tmp_path / "sol", {"SOL_LOG": "info", **env}, preload=True)
    assert sol.returncode == 0, sol.stderr[-2000:] + sol_out[-2000:]
    bad = [l for l in sol_out.splitlines() if FAILURE.search(l)]
    assert not bad, "\n".join(bad[:20])
    assert passed_lines(sol_out) == passed_lines(plain_out)
    assert passed_lines(sol_out), "no PASSED lines: the program did not run its tests"
    assert any("the plain BLAS names take 64-bit integers" in l for l in sol_lines(sol.stderr)), sol.stderr[-2000:]
    return sol


@pytest.mark.parametrize("name", NAMES)
def test_program(name, tmp_path, backend):
    check(name, tmp_path, {"SOL_BACKEND": backend, "SOL_TUNE": "1"})


@pytest.mark.parametrize("name", NAMES)
def test_program_with_calls_declined_for_their_dimensions(name, tmp_path):
    """As if the openblas backend's integers held only up to 4 (SOL_TEST_DIM_LIMIT): every call with
    a larger dimension, leading dimension or increment is declined and runs natively, the others on
    the backend, and the program still passes."""
    sol = check(name, tmp_path, {"SOL_BACKEND": "openblas", "SOL_TEST_DIM_LIMIT": "4", "SOL_LOG": "debug"})
    assert any(re.match(r"sol: openblas declines \w+: .*does not fit", l) for l in sol_lines(sol.stderr))
    tally = [l for l in sol_lines(sol.stderr) if re.match(r"sol: \d+ calls: ", l)]
    assert tally and " native" in tally[0] and " openblas" in tally[0], tally
