"""The per-call log (SOL_TRACE_LOG): one stable CSV line per computing call, to stderr or a file,
with or without the trace files."""
import csv
import glob
import io
import os

from conftest import PROGRAMS, run, sol_lines

COLUMNS = "seq,time_ms,tid,api,symbol,op,dtype,backend,duration_ms,shape".split(",")


def gemms(calls, *extra, **env):
    return run([str(PROGRAMS / "device_gemms"), "64", "32", "16", str(calls), *extra], env=env)


def rows(text):
    """The log's call lines as dicts; checks the header and the column count."""
    lines = [l for l in text.splitlines() if l.startswith("sol,")]
    headers = [l for l in lines if l.startswith("sol,header,")]
    assert headers and all(h == "sol,header," + ",".join(COLUMNS) for h in headers), lines
    out = []
    for rec in csv.reader(io.StringIO("\n".join(l for l in lines if l.startswith("sol,call,")))):
        assert len(rec) == 2 + len(COLUMNS), rec
        out.append(dict(zip(COLUMNS, rec[2:])))
    return out


def test_one_line_per_call_on_stderr_and_results_unchanged():
    r = gemms(3, SOL_TRACE_LOG="stderr")
    assert r.returncode == 0, r.stderr
    native = run([str(PROGRAMS / "device_gemms"), "64", "32", "16", "3"], preload=False)
    assert r.stdout == native.stdout
    got = rows(r.stderr)
    assert [g["seq"] for g in got] == ["1", "2", "3"]
    for g in got:
        assert (g["api"], g["symbol"], g["op"], g["dtype"], g["backend"]) == ("blas", "sgemm_", "gemm", "f32", "native")
        assert g["shape"] == "m=64 n=32 k=16 transa=N transb=N"
        assert float(g["duration_ms"]) >= 0 and int(g["tid"]) > 0
    # Times from one monotonic clock: in order whatever the load, never compared with a bound.
    assert float(got[0]["time_ms"]) <= float(got[1]["time_ms"]) <= float(got[2]["time_ms"])
    # Nothing else: no trace directory was asked for, none is written.
    assert not [l for l in sol_lines(r.stderr)], r.stderr


def test_the_backend_that_ran_each_call(tmp_path):
    r = gemms(2, SOL_TRACE_LOG="stderr", SOL_BACKEND="reference")
    assert [g["backend"] for g in rows(r.stderr)] == ["reference", "reference"]


def test_a_file_shared_by_a_forked_child_and_with_the_trace(tmp_path):
    log = tmp_path / "calls.csv"
    trace = tmp_path / "trace"
    r = gemms(4, "fork", SOL_TRACE_LOG=str(log), SOL_TRACE="1", SOL_TRACE_DIR=str(trace))
    assert r.returncode == 0, r.stderr
    text = log.read_text()
    assert text.count("sol,header,") == 1  # written while the file was empty
    got = rows(text)
    # The parent's two calls and the child's three (its first call happened before the fork).
    assert len(got) == 5 and len({g["tid"] for g in got}) == 2, text
    assert os.stat(log).st_mode & 0o077 == 0
    assert glob.glob(str(trace / "**" / "*.summary.json"), recursive=True), "the trace files are written as well"


def test_pid_in_the_file_name(tmp_path):
    r = gemms(2, SOL_TRACE_LOG=str(tmp_path / "calls-%p.csv"))
    assert r.returncode == 0, r.stderr
    [path] = glob.glob(str(tmp_path / "calls-*.csv"))
    assert "%p" not in path and len(rows(open(path).read())) == 2


def test_a_log_that_cannot_be_written_gets_one_line_and_the_program_runs(tmp_path):
    os.symlink("/etc/passwd", tmp_path / "link.csv")
    for target in (tmp_path / "link.csv", tmp_path):
        r = gemms(2, SOL_TRACE_LOG=str(target))
        assert r.returncode == 0 and "process sum" in r.stdout, r.stderr
        lines = sol_lines(r.stderr)
        assert len(lines) == 1 and "per-call log" in lines[0] and str(target) in lines[0], r.stderr


def calls_line(stderr):
    lines = [l for l in sol_lines(stderr) if " calls: " in l]
    assert len(lines) == 1, stderr
    return lines[0]


def test_info_ends_a_process_with_its_calls_per_backend():
    """Without tracing, SOL_LOG=info: one line per process, every call counted, by backend."""
    r = gemms(7, SOL_LOG="info", SOL_BACKEND="reference")
    assert r.returncode == 0, r.stderr
    assert calls_line(r.stderr) == "sol: 7 calls: 7 reference"
    # Native: calls an optimized library keeps are counted too (the entry points' shortcut to
    # native is off at info).
    r = gemms(5, SOL_LOG="info", SOL_BACKEND="native")
    assert calls_line(r.stderr) == "sol: 5 calls: 5 native"
    r = gemms(4, SOL_LOG="info", SOL_BACKEND="auto")
    assert calls_line(r.stderr) == "sol: 4 calls: 4 native"
    # Not at the default level, and not with tracing (whose summaries count calls).
    assert not [l for l in sol_lines(gemms(3).stderr) if " calls: " in l]
