"""Shared helpers for the integration tests: real programs run with and without libsol.

CTest passes the paths in the environment (names not starting with SOL_, which libsol reads):
TEST_LIBSOL, TEST_SOL, TEST_PROGRAMS (built C programs), TEST_SOURCE_DIR.
"""
import atexit
import os
import pathlib
import shutil
import subprocess
import tempfile

import pytest

LIBSOL = os.environ.get("TEST_LIBSOL", "")
SOL = os.environ.get("TEST_SOL", "")
PROGRAMS = pathlib.Path(os.environ.get("TEST_PROGRAMS", "."))
SOURCE = pathlib.Path(os.environ.get("TEST_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[2]))
PY_PROGRAMS = SOURCE / "tests" / "programs"
PYTHON = "/usr/bin/python3"  # Debian's, which has numpy and torch
REFERENCE_BLAS_DIR = "/usr/lib/x86_64-linux-gnu/blas"
# auto's per-machine profile goes to $XDG_CACHE_HOME/sol: the tests' own, shared by this session's
# programs (as a user's runs share one) and never the user's. Compiled OpenCL programs stay where
# they were: SOL's in ~/.cache/sol/opencl (which does not follow XDG_CACHE_HOME), pocl's kernel
# cache at POCL_CACHE_DIR, pinned here to the user's (pocl follows XDG_CACHE_HOME, and compiling
# CLBlast's kernels afresh costs a minute per process).
CACHE_HOME = tempfile.mkdtemp(prefix="sol-test-cache-")
atexit.register(shutil.rmtree, CACHE_HOME, True)
POCL_CACHE_DIR = os.environ.get("POCL_CACHE_DIR") or os.path.join(
    os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "pocl", "kcache")
os.makedirs(POCL_CACHE_DIR, exist_ok=True)  # pocl takes it only if it exists


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a GPU; skipped cleanly without one")


def clean_env(extra=None, preload=True):
    """The caller's environment without any SOL_* or LD_PRELOAD, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SOL_") and k != "LD_PRELOAD"}
    env["XDG_CACHE_HOME"] = CACHE_HOME
    env["POCL_CACHE_DIR"] = POCL_CACHE_DIR
    # auto measures and may then route a call to a faster backend, whose results differ in the last
    # bits from the program's own library: tests that compare with runs without libsol ask for
    # measurement by name (test_auto.py, the BLAS programs under auto), the rest keep auto's
    # built-in order.
    env["SOL_TUNE"] = "0"
    # A fatal signal prints every Python thread's stack: a rare crash leaves its evidence in the
    # failure message (test_dnn's OpenCL CNN died once of SIGSEGV, with no output, on 2026-11-29).
    env["PYTHONFAULTHANDLER"] = "1"
    if preload:
        env["LD_PRELOAD"] = LIBSOL
    env.update(extra or {})
    return env


def run(cmd, *, preload=True, env=None, cwd=None, timeout=600, stdin=None):
    """Runs cmd; returns the CompletedProcess (text mode)."""
    return subprocess.run(cmd, env=clean_env(env, preload), cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, stdin=stdin)


def run_until(cmd, flag, starts, *, env=None, timeout=300):
    """Runs cmd (a program that waits for `flag` to exist: device_gemms's until=), creating `flag`
    once a line of its stderr starts with one of `starts`, however long that takes. A
    CompletedProcess, as run() returns."""
    p = subprocess.Popen(cmd, env=clean_env(env), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    err = []
    for line in p.stderr:
        err.append(line)
        if line.startswith(tuple(starts)):
            open(flag, "w").close()
    out = p.stdout.read()
    p.wait(timeout=timeout)
    return subprocess.CompletedProcess(cmd, p.returncode, out, "".join(err))


def run_on_terminal(cmd, columns, *, stream="stdout", preload=True, env=None, timeout=600):
    """Runs cmd with its `stream` on a pseudo-terminal `columns` wide (the other on a pipe), as a
    person at a terminal sees it: (exit status, the terminal's text, the pipe's text)."""
    import fcntl
    import pty
    import struct
    import termios
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    tty = {stream: slave, ("stderr" if stream == "stdout" else "stdout"): subprocess.PIPE}
    p = subprocess.Popen(cmd, env=clean_env(env, preload), **tty)
    os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the terminal's last reader is gone
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    other = (p.stderr if stream == "stdout" else p.stdout).read()
    p.wait(timeout=timeout)
    return p.returncode, b"".join(chunks).decode().replace("\r\n", "\n"), other.decode()


def sol_lines(stderr):
    return [l for l in stderr.splitlines() if l.startswith("sol: ")]


@pytest.fixture(scope="session", autouse=True)
def _paths_exist():
    assert LIBSOL and os.path.exists(LIBSOL), "TEST_LIBSOL must name the built libsol.so"


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA device (the GPU check scripts); skipped cleanly without one")


def pytest_addoption(parser):
    parser.addoption("--backend", default="native", help="SOL_BACKEND for tests that take one")
    parser.addoption("--sol-config", default=None, help="SOL_CONFIG for tests that take a backend")


@pytest.fixture
def backend(request):
    return request.config.getoption("--backend")


@pytest.fixture
def sol_config(request):
    return request.config.getoption("--sol-config")
