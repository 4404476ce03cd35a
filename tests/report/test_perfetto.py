"""sol report --perfetto: the calls of a run's trace.json files in Perfetto's own format, from
hand-written fixtures (the real-run check, with stacks, is in tests/integration/test_python_frames.py)."""
import json
import struct

from conftest import DATA, sol
from perfetto_wire import one, proto_fields


def slices(path):
    """[(pid, tid, name, begin_ns, end_ns, {arg: value})] of a Perfetto trace's slices."""
    packets = [proto_fields(p) for f, p in proto_fields(path.read_bytes()) if f == 1]
    threads, begins, out = {}, {}, []
    for p in packets:
        if one(p, 60) is not None:  # TrackDescriptor
            d = proto_fields(one(p, 60))
            if one(d, 4) is not None:
                t = proto_fields(one(d, 4))
                threads[one(d, 1)] = (one(t, 1), one(t, 2))
        ev = one(p, 11)
        if ev is None:
            continue
        ev = proto_fields(ev)
        track = one(ev, 11)
        if one(ev, 9) == 1:
            args = {}
            for a in (proto_fields(v) for f, v in ev if f == 4):
                args[one(a, 10).decode()] = (one(a, 6).decode() if one(a, 6) is not None
                                             else struct.unpack("<d", one(a, 5))[0] if one(a, 5) is not None
                                             else one(a, 4))
            begins.setdefault(track, []).append((one(ev, 23).decode(), one(p, 8), args, one(ev, 55)))
        elif one(ev, 9) == 2:
            name, begin, args, stack = begins[track].pop()
            out.append((*threads[track], name, begin, one(p, 8), args, stack))
    assert not any(begins.values())
    return out


def test_a_killed_process_converts_without_stacks(tmp_path):
    """A process killed while tracing leaves its trace.json in the array form, unterminated, its
    last event cut short, and no stackFrames: its whole calls become slices with their arguments
    and no stack; the cut one is dropped."""
    whole = (DATA / "mixed" / "sol-103.trace.json").read_text().rstrip()
    assert whole.endswith("]")
    events = [e for e in json.loads(whole) if e.get("ph") == "X"]
    run = tmp_path / "run"
    run.mkdir()
    (run / "sol-103.trace.json").write_text(whole[:-1] + ',{"name":"dgemm_","cat":"blas","ph":"X","ts":9')
    out = tmp_path / "run.pftrace"
    sol("report", run, "--perfetto", out, check=0)
    got = slices(out)
    assert len(got) == len(events) > 0
    for (pid, tid, name, begin, end, args, stack), e in zip(sorted(got, key=lambda s: s[3]),
                                                            sorted(events, key=lambda e: e["ts"])):
        assert (pid, tid, name) == (e["pid"], e["tid"], e["name"])
        assert (begin, end) == (round(e["ts"] * 1000), round((e["ts"] + e["dur"]) * 1000))
        assert args["shape"] == e["args"]["shape"] and args["flops"] == e["args"]["flops"]
        assert stack is None


def test_no_trace_json_is_an_error(tmp_path):
    """A summary whose trace.json is gone: one warning naming it, then the error."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "sol-4300.summary.json").write_bytes((DATA / "survey" / "sol-4300.summary.json").read_bytes())
    out = tmp_path / "x.pftrace"
    p = sol("report", run, "--perfetto", out, check=2)
    assert "no process with a trace.json" in p.stderr and "sol-4300.trace.json" in p.stderr
    assert not out.exists()


def test_an_unwritable_output_is_an_error(tmp_path):
    p = sol("report", DATA / "mixed", "--perfetto", tmp_path / "missing-dir" / "x.pftrace", check=2)
    assert "cannot write the Perfetto trace" in p.stderr
