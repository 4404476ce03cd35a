"""What device backends move: the one `sol: transfers:` line at exit and summary.json's
process.transfers, checked against the bytes a GEMM's operands must move (eager execution: every
node its own flush)."""
import glob
import json
import os
import re

import pytest

from conftest import PROGRAMS, SOL, run, sol_lines

TRANSFERS = re.compile(r"^sol: transfers: (\d+) nodes, (\d+) flushes, (\d+) bytes to the device, (\d+) bytes back$")
M, N, K = 64, 32, 16
A, B, C = 4 * M * K, 4 * K * N, 4 * M * N  # float operands, leading dimensions = rows


def expected(calls):
    """(nodes, flushes, to the device, back) for `calls` GEMMs, the first with beta = 0."""
    return calls, calls, A + B + (calls - 1) * (A + B + C), calls * C


def transfers(stderr):
    return [tuple(int(g) for g in m.groups()) for m in map(TRANSFERS.match, stderr.splitlines()) if m]


def gemms(calls, *extra, **env):
    return run([str(PROGRAMS / "device_gemms"), str(M), str(N), str(K), str(calls), *extra],
               env={"SOL_BACKEND": "opencl", "SOL_LOG": "info", **env})


def test_one_line_with_what_moved():
    r = gemms(3)
    assert r.returncode == 0, r.stderr
    assert transfers(r.stderr) == [expected(3)], r.stderr
    # The same results as the program's own library.
    native = run([str(PROGRAMS / "device_gemms"), str(M), str(N), str(K), "3"], preload=False)
    assert r.stdout == native.stdout


@pytest.mark.parametrize("env", [{"SOL_BACKEND": "native"}, {"SOL_BACKEND": "openblas"}, {"SOL_LOG": "warn"}])
def test_no_line_without_device_work_or_below_info(env):
    r = gemms(2, **env)
    assert r.returncode == 0, r.stderr
    assert not [l for l in sol_lines(r.stderr) if "transfers" in l], r.stderr


def test_a_forked_child_reports_its_own_work():
    """The parent: its first call and one more. The child inherits the counts of the first call
    but reports only its own work, and OpenCL does not survive fork: its calls run elsewhere, it
    moved nothing, and it has no line."""
    r = gemms(4, "fork")
    assert r.returncode == 0, r.stderr
    assert transfers(r.stderr) == [(2, 2, A + B + (A + B + C), 2 * C)], r.stderr
    assert "child sum" in r.stdout and "process sum" in r.stdout


def test_summary_json_carries_the_same_figures(tmp_path):
    r = gemms(3, SOL_TRACE="1", SOL_TRACE_DIR=str(tmp_path))
    assert r.returncode == 0, r.stderr
    [path] = glob.glob(os.path.join(str(tmp_path), "**", "*.summary.json"), recursive=True)
    t = json.load(open(path))["process"]["transfers"]
    nodes, flushes, up, down = expected(3)
    assert t == {"nodes": nodes, "flushes": flushes, "flushes_by_cause": {"eager": flushes},
                 "bytes_to_device": up, "bytes_to_host": down}
    assert transfers(r.stderr) == [expected(3)]


def test_sol_report_shows_them(tmp_path):
    r = gemms(3, SOL_TRACE="1", SOL_TRACE_DIR=str(tmp_path))
    assert r.returncode == 0, r.stderr
    text = run([SOL, "report", str(tmp_path)], preload=False)
    assert text.returncode == 0, text.stderr
    assert "device: 3 nodes, 3 flushes (eager 3), 34.0 KiB to the device, 24.0 KiB back" in text.stdout, text.stdout
    doc = json.loads(run([SOL, "report", str(tmp_path), "--format", "json"], preload=False).stdout)
    nodes, flushes, up, down = expected(3)
    assert doc["input"]["transfers"] == {"nodes": nodes, "flushes": flushes, "flushes_by_cause": {"eager": flushes},
                                         "bytes_to_device": up, "bytes_to_host": down}
