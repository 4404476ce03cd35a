"""Shared helpers: where the sol binary and the fixtures are, and how to run it.

CTest passes REPORT_TEST_SOL (the built sol) and REPORT_TEST_DATA (tests/report/data); the names
avoid the SOL_ prefix, which libsol reserves for its own settings.
"""
import csv
import io
import json
import os
import subprocess
from pathlib import Path

import pytest

SOL = os.environ.get("REPORT_TEST_SOL", "")
DATA = Path(os.environ.get("REPORT_TEST_DATA", Path(__file__).parent / "data"))


def sol(*args, check=None):
    """Runs `sol ARGS...`; returns the CompletedProcess (text). check=N asserts the exit status."""
    if not SOL or not os.access(SOL, os.X_OK):
        pytest.fail(f"REPORT_TEST_SOL={SOL!r} is not an executable sol binary")
    p = subprocess.run([SOL, *map(str, args)], capture_output=True, text=True, timeout=60)
    if check is not None:
        assert p.returncode == check, f"exit {p.returncode}, stderr:\n{p.stderr}\nstdout:\n{p.stdout}"
    return p


def sol_json(*args):
    p = sol(*args, "--format", "json", check=0)
    return json.loads(p.stdout)


def sol_csv(*args):
    p = sol(*args, "--format", "csv", check=0)
    return list(csv.DictReader(io.StringIO(p.stdout)))


def header_of_csv(*args):
    p = sol(*args, "--format", "csv", check=0)
    return next(csv.reader(io.StringIO(p.stdout)))


def assert_error(p, status, *words):
    """One `sol: ` line on stderr naming what is wrong; nothing on stdout."""
    assert p.returncode == status, f"exit {p.returncode}, stderr:\n{p.stderr}"
    errors = [l for l in p.stderr.splitlines() if l.startswith("sol: ") and not l.startswith("sol: warning: ")]
    assert len(errors) == 1, p.stderr
    for w in words:
        assert w in errors[0], f"{w!r} not in {errors[0]!r}"
    assert p.stdout == ""
