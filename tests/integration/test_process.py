"""Threads, forks, programs without BLAS, and a symbol with no native definition anywhere."""
import os

from conftest import PROGRAMS, PYTHON, run, sol_lines


def test_sgemm_dgemm_from_eight_threads():
    r = run([str(PROGRAMS / "threads")], env={"SOL_LOG": "debug"})
    assert r.returncode == 0, r.stdout + r.stderr
    assert "wrong=0" in r.stdout
    assert "native sgemm_:" in r.stderr and "native dgemm_:" in r.stderr


def test_programs_without_blas_are_unaffected():
    for cmd in (["bash", "-c", "echo hello; exit 3"], [PYTHON, "-c", "print(sum(range(10)))"],
                ["gcc", "--version"]):
        plain = run(cmd, preload=False)
        under = run(cmd)
        assert (under.returncode, under.stdout, under.stderr) == (plain.returncode, plain.stdout, plain.stderr)


def test_disable_makes_libsol_inert():
    r = run([str(PROGRAMS / "sdot")], env={"SOL_DISABLE": "1", "SOL_LOG": "debug", "SOL_BACKEND": "bogus"})
    assert r.returncode == 0
    assert r.stdout == "sdot=32\n"
    assert sol_lines(r.stderr) == []  # not even the bad backend name or the debug level is read
