"""Every view of a traced PyTorch run agrees: the exit table on stderr, sol report, sol diff, the
flame graph and the Perfetto trace leave out the same set-up calls (ir/setup.hpp), with
the same flag to show them; site rows name their op; the exit table's columns stay aligned; a call
that did one-time work says so, and sol diff sets it apart; and every command that writes a file
says which."""
import json
import os
import re

import pytest

from conftest import PY_PROGRAMS, PYTHON, SOL, run, run_on_terminal
from test_trace import files, load_trace, traced

SETUP_OPS = {"dnnl_api", "cublas_api", "cudnn_api"}
SETUP_LINE = re.compile(r"^sol: and (\d+) set-up calls \((\d+) signatures\) not shown: sol report --setup lists them$",
                        re.M)


@pytest.fixture(scope="module")
def cnn(tmp_path_factory):
    """torch_dnn_cnn.py traced: (the run, its trace directory, its summary)."""
    tmp = tmp_path_factory.mktemp("cnn")
    r, trace_dir = traced([PYTHON, str(PY_PROGRAMS / "torch_dnn_cnn.py")], tmp)
    assert r.returncode == 0, r.stderr
    (path,) = files(trace_dir, ".summary.json")
    with open(path) as f:
        return r, trace_dir, json.load(f)


def sol(*args, **kw):
    r = run([SOL, *map(str, args)], preload=False, **kw)
    assert r.returncode == 0, r.stderr
    return r


def exit_table(stderr):
    """The exit table's header and rows (without the "sol: " prefix)."""
    lines = stderr.splitlines()
    at = next(i for i, l in enumerate(lines) if l.startswith("sol: trace: "))
    table = []
    for l in lines[at + 1:]:
        if not l.startswith("sol: ") or l.startswith("sol: and "):
            break
        table.append(l[len("sol: "):])
    return table[0], table[1:]


def test_report_diff_and_exit_table_agree_on_setup_calls(cnn, tmp_path):
    r, trace_dir, summary = cnn
    setup = sum(o["calls"] for o in summary["ops"] if o["op"] in SETUP_OPS)
    assert setup > 100  # oneDNN's descriptors and memory objects: most of a CNN's calls
    assert int(SETUP_LINE.search(r.stderr).group(1)) == setup, r.stderr
    header, rows = exit_table(r.stderr)
    op_at = header.index(" op ") + 1
    assert rows and not any(row[op_at:].split()[0] in SETUP_OPS for row in rows), rows

    report = sol("report", trace_dir, "--format", "json")
    assert "%d set-up calls are not shown (--setup shows them)" % setup in report.stderr
    assert not any(row["op"] in SETUP_OPS for row in json.loads(report.stdout)["rows"])
    shown = json.loads(sol("report", trace_dir, "--format", "json", "--setup").stdout)["rows"]
    assert sum(row["calls"] for row in shown if row["op"] in SETUP_OPS) == setup

    diff = sol("diff", trace_dir, trace_dir, "--format", "json")
    assert "set-up calls are not shown (A: %d, B: %d; --setup shows them)" % (setup, setup) in diff.stderr
    assert not any(row["op"] in SETUP_OPS for row in json.loads(diff.stdout)["ops"]["common"])
    both = json.loads(sol("diff", trace_dir, trace_dir, "--format", "json", "--setup").stdout)["ops"]["common"]
    assert sum(row["calls_a"] for row in both if row["op"] in SETUP_OPS) == setup

    setup_symbols = {o["symbol"] for o in summary["ops"] if o["op"] in SETUP_OPS}
    svg = tmp_path / "flame.svg"
    sol("report", trace_dir, "--flamegraph", svg)
    assert not any(">%s " % s in svg.read_text() for s in setup_symbols)
    sol("report", trace_dir, "--flamegraph", svg, "--setup")
    assert any(">%s " % s in svg.read_text() or ">%s<" % s in svg.read_text() for s in setup_symbols)
    pftrace = tmp_path / "calls.pftrace"
    sol("report", trace_dir, "--perfetto", pftrace)
    assert b"dnnl_api" not in pftrace.read_bytes()
    sol("report", trace_dir, "--perfetto", pftrace, "--setup")
    assert b"dnnl_api" in pftrace.read_bytes()


def test_site_rows_name_their_op(cnn):
    _, trace_dir, _ = cnn
    rows = json.loads(sol("report", trace_dir, "--by", "site", "--format", "json").stdout)["rows"]
    assert rows and all(row["op"] and row["dtype"] and row["signatures"] >= 1 for row in rows), rows
    convolution = [row for row in rows if row["op"] == "convolution"]
    assert convolution and all(re.search(r"mb\d+_?ic\d+", row["shape"]) for row in convolution), convolution
    text = sol("report", trace_dir, "--by", "site").stdout.splitlines()
    at = next(i for i, l in enumerate(text) if re.search(r"  convolution prop=\S+ \S*mb\d+", l))
    assert text[at + 1].lstrip().startswith("dnnl_primitive_execute < "), text[at:at + 2]


def test_exit_table_columns_stay_aligned(tmp_path):
    """Batch normalizations only: a 22-character symbol and a 19-character op (a fixed 14-character
    column pushed the shapes out of line), in columns as wide as what they hold. At a terminal a long
    shape wraps under its column; into a pipe it stays one line."""
    env = {"SOL_TRACE": "1", "SOL_TRACE_INCLUDE": "batch_normalization"}
    cmd = [PYTHON, str(PY_PROGRAMS / "torch_dnn_cnn.py")]
    piped = run(cmd, env=dict(env, SOL_TRACE_DIR=str(tmp_path / "piped")))
    status, on_terminal, _ = run_on_terminal(cmd, 120, stream="stderr", env=dict(env, SOL_TRACE_DIR=str(tmp_path / "tty")))
    assert piped.returncode == 0 and status == 0, piped.stderr + on_terminal
    for stderr, columns in ((piped.stderr, None), (on_terminal, 120)):
        header, rows = exit_table(stderr)
        symbol_at, op_at, shape_at = header.index("symbol"), header.index(" op ") + 1, header.index("shape")
        assert rows, stderr
        for row in rows:
            if columns:
                assert len("sol: " + row) <= columns, row
            if not row.lstrip()[0].isdigit():  # a long shape's next line, under the shape column
                assert columns and row[:shape_at].strip() == "" and row[shape_at] != " ", (header, row)
                continue
            assert row[symbol_at:].startswith("dnnl_primitive_execute "), (header, row)
            assert row[op_at:].startswith("batch_normalization "), (header, row)
            assert row[shape_at - 1] == " " and row[shape_at:].startswith("prop="), (header, row)
    assert len(exit_table(on_terminal)[1]) > len(exit_table(piped.stderr)[1])  # its shapes wrapped


def test_every_command_that_writes_a_file_names_it(cnn, tmp_path):
    r, trace_dir, summary = cnn
    # The traced process: its files' directory, absolute, and the command that reads them.
    m = re.search(r"^sol: trace: .*; files: (/\S+)/sol-(\S+)\.\* \(sol report (\S+)\)$", r.stderr, re.M)
    assert m and m.group(1) == m.group(3), r.stderr
    assert os.path.samefile(m.group(1), os.path.dirname(files(trace_dir, ".summary.json")[0]))
    assert os.path.isfile(os.path.join(m.group(1), "sol-%s.summary.json" % m.group(2)))
    # sol report's flame graph and Perfetto trace.
    os.chdir(tmp_path)
    for flag, name in (("--flamegraph", "flame.svg"), ("--perfetto", "calls.pftrace")):
        out = sol("report", trace_dir, flag, name)
        assert "sol: wrote %s: " % (tmp_path / name) in out.stderr, out.stderr
        assert (tmp_path / name).stat().st_size > 0
    # sol tune: the profile its measuring run wrote.
    cache = tmp_path / "cache"
    out = sol("tune", "--quick", "--time-limit", "5", env={"XDG_CACHE_HOME": str(cache), "SOL_TUNE": "1"})
    profile = re.search(r"^sol: wrote (\S+): this machine's profile", out.stderr, re.M)
    assert profile and os.path.isfile(profile.group(1)) and profile.group(1).startswith(str(cache)), out.stderr


def test_one_time_work_is_noted_on_the_call_that_did_it(tmp_path):
    """Under SOL_BACKEND=reference the process's first call starts the backend: that call, and no
    other, carries "one_time": "backend start" in trace.json and its signature in summary.json;
    under native nothing starts. sol diff of the two marks that work on B's side."""
    script = tmp_path / "mm.py"
    script.write_text("import numpy as np\n"
                      "a = np.ones((64, 64), np.float32)\n"
                      "for _ in range(4): a = a @ a / 64\n"
                      "print(float(a.sum()))\n")
    dirs = {}
    for backend in ("native", "reference"):
        r, dirs[backend] = traced([PYTHON, str(script)], tmp_path / backend, env={"SOL_BACKEND": backend})
        assert r.returncode == 0, r.stderr
    for backend, d in dirs.items():
        (path,) = files(d, ".summary.json")
        ops = json.load(open(path))["ops"]
        noted = [o for o in ops if "one_time" in o]
        events = [e for e in load_trace(files(d, ".trace.json")[0]) if e.get("ph") == "X" and "one_time" in e["args"]]
        if backend == "native":
            assert noted == [] and events == [], (noted, events)
            continue
        assert [(o["one_time"], o["one_time_calls"]) for o in noted] == [("backend start", 1)], ops
        assert noted[0]["one_time_ns"] <= noted[0]["total_ns"]
        assert [(e["args"]["one_time"], e["args"]["seq"]) for e in events] == [("backend start", 1)], events
    diff = json.loads(sol("diff", dirs["native"], dirs["reference"], "--format", "json").stdout)
    marked = [r for r in diff["ops"]["common"] if r["one_time_b"]]
    assert [(r["symbol"], r["one_time_b"], r["one_time_calls_b"]) for r in marked] == [
        (noted[0]["symbol"], "backend start", 1)], diff["ops"]["common"]
    text = sol("diff", dirs["native"], dirs["reference"]).stdout
    assert re.search(r" B \S+ \S+ backend start ", text) and "one-time work: calls that also" in text, text


def test_measuring_is_recorded_apart_from_the_call(tmp_path):
    """Under auto with an empty profile, the first call of each shape class races the candidates
    inside the call. Its trace.json event spans the race and says how much of it was measuring
    ("measuring_ns"); summary.json counts the call's own time in the op and process totals and the
    measuring apart, with the same figures; sol report shows it on a line of its own, and counts it
    in with --with-measuring. Sums of the recorder's own figures: no verdict depends on load."""
    script = tmp_path / "mm.py"
    script.write_text("import numpy as np\n"
                      "a = np.ones((128, 128), np.float32)\n"
                      "b = np.ones((96, 96), np.float64)\n"
                      "for _ in range(3): a = a @ a / 128; b = b @ b / 96\n"
                      "print(float(a.sum()), float(b.sum()))\n")
    env = {"SOL_BACKEND": "auto", "SOL_TUNE": "1", "XDG_CACHE_HOME": str(tmp_path / "cache"), "SOL_TEST_CALM": "1",
           "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    r, d = traced([PYTHON, str(script)], tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    events = [e for e in load_trace(files(d, ".trace.json")[0]) if e.get("ph") == "X" and e.get("cat") != "device"]
    measured = [e for e in events if "measuring_ns" in e["args"]]
    assert measured, "no call measured: %s" % r.stderr
    for e in measured:
        assert "auto's measuring" in e["args"]["one_time"], e
        assert 0 < e["args"]["measuring_ns"] <= e["dur"] * 1000 + 1000, e
    measuring = sum(e["args"]["measuring_ns"] for e in measured)
    own = sum(e["dur"] * 1000 for e in events) - measuring

    (path,) = files(d, ".summary.json")
    summary = json.load(open(path))
    process = summary["process"]
    assert process["measuring_ns"] == measuring == sum(o.get("measuring_ns", 0) for o in summary["ops"])
    assert sum(o["total_ns"] for o in summary["ops"]) == process["traced_ns"]
    assert abs(process["traced_ns"] - own) <= 1000 * len(events), (process, own)  # trace.json's µs, rounded
    assert re.search(r"^sol: and [0-9.]+ [mun]?s of auto's measuring in %d calls?, apart from their times above$" % len(measured),
                     r.stderr, re.M), r.stderr

    apart = json.loads(sol("report", d, "--format", "json", "--setup").stdout)
    assert (apart["input"]["measuring_ns"], apart["input"]["measuring_calls"]) == (measuring, len(measured))
    assert sum(row["total_ns"] for row in apart["rows"]) == apart["input"]["traced_ns"] == process["traced_ns"]
    counted = json.loads(sol("report", d, "--format", "json", "--setup", "--with-measuring").stdout)
    assert counted["input"]["traced_ns"] == process["traced_ns"] + measuring
    assert sum(row["total_ns"] for row in counted["rows"]) == process["traced_ns"] + measuring
    text = sol("report", d).stdout
    assert re.search(r"^  auto's measuring: [0-9.]+ [mun]?s in %d calls?, left out of the op times \(--with-measuring counts it in\)$"
                     % len(measured), text, re.M), text
    diff = sol("diff", d, d).stdout
    assert re.search(r"^  A: auto's measuring: .*\n  B: auto's measuring: ", diff, re.M), diff
