"""Shared helpers for the integration tests: real programs run with and without libsol.

CTest passes the paths in the environment (names not starting with SOL_, which libsol reads):
TEST_LIBSOL, TEST_SOL, TEST_PROGRAMS (built C programs), TEST_SOURCE_DIR.
"""
import os
import pathlib
import subprocess

import pytest

LIBSOL = os.environ.get("TEST_LIBSOL", "")
SOL = os.environ.get("TEST_SOL", "")
PROGRAMS = pathlib.Path(os.environ.get("TEST_PROGRAMS", "."))
SOURCE = pathlib.Path(os.environ.get("TEST_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[2]))
PY_PROGRAMS = SOURCE / "tests" / "programs"
PYTHON = "/usr/bin/python3"  # Debian's, which has numpy and torch
REFERENCE_BLAS_DIR = "/usr/lib/x86_64-linux-gnu/blas"


def clean_env(extra=None, preload=True):
    """The caller's environment without any SOL_* or LD_PRELOAD, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SOL_") and k != "LD_PRELOAD"}
    if preload:
        env["LD_PRELOAD"] = LIBSOL
    env.update(extra or {})
    return env


def run(cmd, *, preload=True, env=None, cwd=None, timeout=600, stdin=None):
    """Runs cmd; returns the CompletedProcess (text mode)."""
    return subprocess.run(cmd, env=clean_env(env, preload), cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, stdin=stdin)


def sol_lines(stderr):
    return [l for l in stderr.splitlines() if l.startswith("sol: ")]


@pytest.fixture(scope="session", autouse=True)
def _paths_exist():
    assert LIBSOL and os.path.exists(LIBSOL), "TEST_LIBSOL must name the built libsol.so"


def pytest_addoption(parser):
    parser.addoption("--backend", default="native", help="SOL_BACKEND for tests that take one")
    parser.addoption("--sol-config", default=None, help="SOL_CONFIG for tests that take a backend")


@pytest.fixture
def backend(request):
    return request.config.getoption("--backend")


@pytest.fixture
def sol_config(request):
    return request.config.getoption("--sol-config")
