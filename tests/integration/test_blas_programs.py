"""The reference BLAS test programs (Debian libblas-test) under libsol.

Each program runs twice, without and with libsol, in a scratch directory holding its input; the
run under libsol must report exactly the same PASSED lines and no failure. Error exits are part of
every level 2 and 3 program: they check that an invalid argument reaches the program's own
XERBLA / cblas_xerbla with the right routine name and parameter number.

The CBLAS programs need libblas.so.3 to be the reference build (LD_LIBRARY_PATH); the Fortran
programs also run against whatever libblas.so.3 the system selects (OpenBLAS once installed).
"""
import re
import shutil

import pytest

from conftest import REFERENCE_BLAS_DIR, run

FORTRAN = ["xblat1s", "xblat1d", "xblat1c", "xblat1z", "xblat2s", "xblat2d", "xblat2c", "xblat2z",
           "xblat3s", "xblat3d", "xblat3c", "xblat3z"]
CBLAS = ["xscblat1", "xdcblat1", "xccblat1", "xzcblat1", "xscblat2", "xdcblat2", "xccblat2", "xzcblat2",
         "xscblat3", "xdcblat3", "xccblat3", "xzcblat3"]
FAILURE = re.compile(r"FAIL|FATAL|SUSPECT|\*\*\*\*|NOT PASS|ILLEGAL", re.IGNORECASE)


def program_input(name):
    """(stdin file, summary file written by the program or None)."""
    if name.startswith("xblat"):
        letter, level = name[-1], name[-2]
        if level == "1":
            return None, None
        return "%sblat%s.in" % (letter, level), "%sblat%s.out" % (letter, level)
    letter, level = name[1], name[-1]
    return (None if level == "1" else "%sin%s" % (letter, level)), None


def run_program(name, tmp_path, *, preload, backend, reference_lib, sol_config=None):
    stdin_name, summary = program_input(name)
    work = tmp_path / ("sol" if preload else "plain")
    work.mkdir()
    if stdin_name:
        shutil.copy("%s/%s" % (REFERENCE_BLAS_DIR, stdin_name), work / stdin_name)
    env = {"SOL_BACKEND": backend, "SOL_TUNE": "1"} if preload else {}
    if preload and sol_config:
        env["SOL_CONFIG"] = sol_config
    if reference_lib:
        env["LD_LIBRARY_PATH"] = REFERENCE_BLAS_DIR
    with open(work / stdin_name) if stdin_name else open("/dev/null") as stdin:
        r = run(["%s/%s" % (REFERENCE_BLAS_DIR, name)], env=env, cwd=work, stdin=stdin, preload=preload)
    out = r.stdout + (open(work / summary).read() if summary and (work / summary).exists() else "")
    return r, out


def passed_lines(output):
    return sorted(l.strip() for l in output.splitlines() if re.search(r"PASS", l))


def check(name, tmp_path, backend, reference_lib, sol_config=None):
    plain, plain_out = run_program(name, tmp_path, preload=False, backend=backend, reference_lib=reference_lib)
    assert plain.returncode == 0, "the program fails even without libsol:\n" + plain_out[-2000:]
    sol, sol_out = run_program(name, tmp_path, preload=True, backend=backend, reference_lib=reference_lib,
                               sol_config=sol_config)
    assert sol.returncode == 0, sol.stderr[-2000:] + sol_out[-2000:]
    bad = [l for l in sol_out.splitlines() if FAILURE.search(l)]
    assert not bad, "\n".join(bad[:20])
    assert passed_lines(sol_out) == passed_lines(plain_out)
    assert passed_lines(sol_out), "no PASSED lines: the program did not run its tests"


@pytest.mark.parametrize("name", FORTRAN + CBLAS)
def test_reference_library(name, tmp_path, backend, sol_config):
    check(name, tmp_path, backend, reference_lib=True, sol_config=sol_config)


@pytest.mark.parametrize("name", FORTRAN)
def test_system_library(name, tmp_path, backend, sol_config):
    check(name, tmp_path, backend, reference_lib=False, sol_config=sol_config)
