"""Python frames in the trace's stacks: real scripts under CPython 3.11 (Debian's, with PyTorch and
NumPy) and, where installed, 3.12 and 3.13 (a ctypes script: they have no NumPy here)."""
import glob
import json
import os
import re
import shutil
import sys

import pytest

from conftest import PROGRAMS, PY_PROGRAMS, PYTHON, SOL, SOURCE, run
from test_trace import files, strict_trace, traced

sys.path.insert(0, str(SOURCE / "tests" / "report"))
from perfetto_wire import one, proto_fields  # noqa: E402


def marked_lines(script):
    """{name: line} of the lines marked '# LINE name'."""
    lines = {}
    for number, text in enumerate(open(script), 1):
        m = re.search(r"# LINE (\w+)", text)
        if m:
            lines[m.group(1)] = number
    return lines


def sites_of(path):
    with open(path) as f:
        return json.load(f)["sites"]


def frame(function, script, line):
    return "%s (%s:%d)" % (function, script, line)


def sites_with(sites, wanted):
    return [s for s in sites if wanted in s["frames"]]


def before(frames, inner, outer):
    return frames.index(inner) < frames.index(outer)


@pytest.fixture(scope="module")
def torch_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("pytorch")
    script = str(PY_PROGRAMS / "py_frames_torch.py")
    r, trace_dir = traced([PYTHON, script], tmp)
    assert r.returncode == 0, r.stderr
    summaries = [json.load(open(p)) for p in files(trace_dir, ".summary.json")]
    assert len(summaries) == 2  # the script and its forked child
    a, b = summaries
    parent, child = (a, b) if b["process"]["ppid"] == a["process"]["pid"] else (b, a)
    assert child["process"]["ppid"] == parent["process"]["pid"]
    return script, marked_lines(script), parent["sites"], child["sites"], trace_dir


def test_gemm_site_names_the_scripts_functions_and_lines(torch_run):
    script, lines, sites, _, _ = torch_run
    linear = frame("run_the_linear_layer_here", script, lines["linear"])
    step = frame("a_training_step", script, lines["step"])
    gemms = [s for s in sites_with(sites, step) if s["symbol"] == "sgemm_"]
    assert gemms, [s["frames"] for s in sites if s["symbol"] == "sgemm_"]
    f = gemms[0]["frames"]
    # Innermost first: PyTorch's native frames, Linear.forward, then the script outwards.
    layer = next(x for x in f if x.startswith("Linear.forward ("))
    module = next(x for x in f if x.startswith("<module> (%s:" % script))
    assert before(f, layer, linear) and before(f, linear, step) and before(f, step, module)
    assert f.index(layer) > 0 and ".py:" not in f[0]


def test_convolution_site_names_its_line(torch_run):
    script, lines, sites, _, _ = torch_run
    conv = frame("run_the_convolution_here", script, lines["conv"])
    executed = [s for s in sites_with(sites, conv) if s["symbol"] == "dnnl_primitive_execute"]
    assert executed, sorted({s["symbol"] for s in sites_with(sites, conv)})
    assert any(x.startswith("Conv2d.forward (") for x in executed[0]["frames"])


def test_backward_calls_name_the_backward_line(torch_run):
    script, lines, sites, _, _ = torch_run
    backward = frame("a_training_step", script, lines["backward"])
    symbols = {s["symbol"] for s in sites_with(sites, backward)}
    # grad of the linear layer (sgemm_) and of the convolution (oneDNN) are computed under backward().
    assert "sgemm_" in symbols and "dnnl_primitive_execute" in symbols, symbols
    assert any(x.startswith("Tensor.backward (") for x in sites_with(sites, backward)[0]["frames"])


def setup_sites(sites):
    """Sites of oneDNN's set-up calls (every dnnl_ symbol but the execution)."""
    return [s for s in sites if s["symbol"].startswith("dnnl_") and s["symbol"] != "dnnl_primitive_execute"]


def test_setup_calls_carry_their_callers_frame_only(torch_run):
    """By default (trace.setup_depth = 1) a set-up call's stack is the frame that called it: no
    walk and no Python frames, which its computing call's stack has."""
    _, _, sites, _, _ = torch_run
    setup = setup_sites(sites)
    assert len(setup) > 5, sorted({s["symbol"] for s in sites})
    for s in setup:
        assert len(s["frames"]) == 1 and ".py:" not in s["frames"][0], s


def test_setup_depth_gives_setup_calls_full_stacks(torch_run, tmp_path):
    script = str(PY_PROGRAMS / "py_frames_torch.py")
    lines = marked_lines(script)
    r, trace_dir = traced([PYTHON, script], tmp_path, env={"SOL_TRACE_SETUP_DEPTH": "32"})
    assert r.returncode == 0, r.stderr
    sites = [s for p in files(trace_dir, ".summary.json") for s in sites_of(p)]
    conv = frame("run_the_convolution_here", script, lines["conv"])
    # The convolution's set-up calls (its memory objects, its primitive) name its line.
    symbols = {s["symbol"] for s in setup_sites(sites_with(sites, conv))}
    assert "dnnl_primitive_create" in symbols or "dnnl_memory_create" in symbols, symbols
    assert max(len(s["frames"]) for s in setup_sites(sites)) > 10
    # The one frame a set-up call carries by default is the innermost of its full stack.
    one = {(s["symbol"], s["frames"][0]) for s in setup_sites(torch_run[2])}
    full = {(s["symbol"], s["frames"][0]) for s in setup_sites(sites)}
    assert one == full, sorted(one ^ full)[:5]


def test_a_python_thread_shows_its_own_frames(torch_run):
    script, lines, sites, _, _ = torch_run
    linear = frame("run_the_linear_layer_here", script, lines["linear"])
    threaded = [s for s in sites_with(sites, linear) if any(x.startswith("in_a_python_thread (") for x in s["frames"])]
    assert threaded
    f = threaded[0]["frames"]
    assert any(x.startswith("Thread.run (") for x in f) and not any(x.startswith("<module> (%s" % script) for x in f)


def test_openmp_threads_name_the_python_code_that_started_them(torch_run):
    script, lines, sites, _, _ = torch_run
    started = frame("double_conv_in_openmp_threads", script, lines["openmp"])
    gemms = [s for s in sites if s["symbol"] == "dgemm_"]
    workers = [s for s in gemms if "(thread without Python, started from)" in s["frames"]]
    main = [s for s in gemms if "(thread without Python, started from)" not in s["frames"]]
    assert workers, [s["frames"][-6:] for s in gemms]
    f = workers[0]["frames"]
    marker = f.index("(thread without Python, started from)")
    assert started in f[marker:]
    assert not any(".py:" in x for x in f[:marker])  # the worker's own frames are native
    assert main and started in main[0]["frames"]  # the thread that started the region ran its share


def test_a_forked_child_names_its_frames(torch_run):
    script, lines, _, child, _ = torch_run
    assert any(any(x.startswith("in_the_forked_child (%s:" % script) for x in s["frames"]) for s in child)


def test_text_summary_and_flame_graph_input_show_python_frames(torch_run):
    script, lines, _, _, trace_dir = torch_run
    text = "".join(open(p).read() for p in files(trace_dir, ".summary.txt"))
    assert "run_the_linear_layer_here (%s:%d)" % (script, lines["linear"]) in text
    folded = "".join(open(p).read() for p in files(trace_dir, ".folded"))
    # Folded stacks keep the file's name and line, not its directory.
    assert ";run_the_linear_layer_here (py_frames_torch.py:%d);" % lines["linear"] in folded


PYTHON_FRAME = re.compile(r" \(.+:\d+\)$")
INTERPRETER_FRAME = re.compile(r"(^|\()(lib)?python3[.\d]*(\.so[.\d]*)?\+0x")  # CPython's own object


def interpreter_frames_among_python_frames(frames):
    """The frames of CPython's own object between a stack's innermost and outermost Python frames."""
    python = [i for i, f in enumerate(frames) if PYTHON_FRAME.search(f) and "+0x" not in f]
    if not python:
        return []
    return [f for f in frames[python[0]:python[-1]] if INTERPRETER_FRAME.search(f)]


def test_python_frames_read_as_python(torch_run):
    """The interpreter's own frames between two Python frames (its call machinery, named or
    python3+0x...) are folded away, in the summary and in the folded stacks: a traced PyTorch
    script's Python frames are adjacent. PyTorch's own frames stay."""
    _, _, sites, _, trace_dir = torch_run
    stacks = [s["frames"] for s in sites]
    assert sum(len([f for f in x if PYTHON_FRAME.search(f) and "+0x" not in f]) >= 2 for x in stacks) > 5
    for frames in stacks:
        assert interpreter_frames_among_python_frames(frames) == [], frames
    assert any("libtorch" in f for x in stacks for f in x)
    folded = [l.rsplit(" ", 1)[0].split(";")[::-1] for p in files(trace_dir, ".folded") for l in open(p)]
    for frames in folded:
        assert interpreter_frames_among_python_frames(frames) == [], frames


def test_interpreter_frames_can_be_kept(tmp_path):
    """SOL_TRACE_INTERPRETER_FRAMES=1 keeps them (NumPy's import runs Python code from C: CPython's
    frames lie between its Python frames); extension frames stay either way."""
    script = str(PY_PROGRAMS / "py_frames_numpy.py")
    kept = {}
    for flag in ("0", "1"):
        r, trace_dir = traced([PYTHON, script], tmp_path / flag, env={"SOL_TRACE_INTERPRETER_FRAMES": flag})
        assert r.returncode == 0, r.stderr
        (path,) = files(trace_dir, ".summary.json")
        stacks = [s["frames"] for s in sites_of(path)]
        kept[flag] = [f for x in stacks for f in interpreter_frames_among_python_frames(x)]
        assert any("_multiarray_umath" in f for x in stacks for f in x)
    assert kept["0"] == [] and kept["1"], kept


def test_numpy_dgemm_names_its_line(tmp_path):
    script = str(PY_PROGRAMS / "py_frames_numpy.py")
    r, trace_dir = traced([PYTHON, script], tmp_path)
    assert r.returncode == 0, r.stderr
    (path,) = files(trace_dir, ".summary.json")
    want = frame("numpy_matmul_from_here", script, marked_lines(script)["matmul"])
    assert [s["symbol"] for s in sites_with(sites_of(path), want)] == ["cblas_dgemm"]


def interpreters():
    """Debian's 3.11, and 3.12/3.13 where some installation provides them."""
    found = {"3.11": PYTHON}
    for version in ("3.12", "3.13"):
        candidates = [shutil.which("python" + version)] + sorted(
            glob.glob(os.path.expanduser("~/.pyenv/versions/%s*/bin/python%s" % (version, version))))
        for c in candidates:
            if c and os.access(c, os.X_OK) and run([c, "-c", "pass"], preload=False).returncode == 0:
                found[version] = c
                break
    return found


@pytest.mark.parametrize("version", ["3.11", "3.12", "3.13"])
def test_frames_on_each_cpython(version, tmp_path):
    python = interpreters().get(version)
    if not python:
        pytest.skip("no CPython %s on this machine" % version)
    script = str(PY_PROGRAMS / "py_frames_ctypes.py")
    r, trace_dir = traced([python, script], tmp_path)
    assert r.returncode == 0, r.stderr
    (path,) = files(trace_dir, ".summary.json")
    (site,) = [s for s in sites_of(path) if s["symbol"] == "cblas_dgemm"]
    f = site["frames"]
    lines = marked_lines(script)
    inner = frame("dgemm_through_ctypes", script, lines["dgemm"])
    method = frame("Outer.method_that_calls", script, lines["method"])
    module = next(x for x in f if x.startswith("<module> (%s:" % script))
    assert before(f, inner, method) and before(f, method, module), f
    # In place of the interpreter's frame that ran them, between ctypes' native frames and
    # the interpreter's entry (PyEval_EvalCode).
    assert not any(x.startswith("_PyEval_EvalFrameDefault") for x in f), f
    assert before(f, next(x for x in f if "_ctypes" in x), inner)
    assert before(f, module, next(x for x in f if x.startswith("PyEval_EvalCode")))


def test_python_frames_can_be_turned_off(tmp_path):
    script = str(PY_PROGRAMS / "py_frames_ctypes.py")
    r, trace_dir = traced([PYTHON, script], tmp_path, env={"SOL_TRACE_PYTHON": "0"})
    assert r.returncode == 0, r.stderr
    (path,) = files(trace_dir, ".summary.json")
    for s in sites_of(path):
        assert not any(".py:" in x for x in s["frames"]), s["frames"]
        assert any(x.startswith("_PyEval_EvalFrameDefault") for x in s["frames"])


def test_a_c_program_has_no_python_frames(tmp_path):
    r, trace_dir = traced([str(PROGRAMS / "threads")], tmp_path)
    assert r.returncode == 0, r.stderr
    for path in files(trace_dir, ".summary.json"):
        for s in sites_of(path):
            assert not any(".py:" in x or "thread without Python" in x for x in s["frames"]), s["frames"]


def test_trace_events_carry_their_stacks(torch_run):
    """trace.json, object form: each event's "sf" names a node of "stackFrames", a tree by
    "parent" (Trace Event Format); walked from the leaf, a call's stack is its site's frames."""
    trace_dir = torch_run[-1]
    checked = 0
    for path in files(trace_dir, ".trace.json"):
        by_id = {s["id"]: s["frames"] for s in sites_of(path.replace(".trace.json", ".summary.json"))}
        with open(path) as f:
            trace = json.load(f)
        assert set(trace) == {"traceEvents", "stackFrames"}
        frames = trace["stackFrames"]
        for key, node in frames.items():
            assert isinstance(key, str) and isinstance(node["name"], str) and node["name"]
            assert node["category"] in ("python", "native")
            assert "parent" not in node or node["parent"] in frames
        for e in trace["traceEvents"]:
            if e.get("ph") != "X":
                continue
            assert e["sf"] == e["args"]["site"]
            stack, node, seen = [], str(e["sf"]), set()
            while node is not None:
                assert node not in seen  # a tree: no cycle
                seen.add(node)
                stack.append(frames[node]["name"])
                node = frames[node].get("parent")
            assert stack == by_id[e["sf"]]
            checked += 1
    assert checked > 10


def test_perfetto_trace_carries_each_calls_stack(torch_run, tmp_path):
    """`sol report --perfetto`: Perfetto's importer of JSON traces ignores stackFrames, so the calls
    go into its own format too, each slice with its stack (TrackEvent.callstack), outermost first,
    Python frames with file and line; one process track each for the script and its forked child."""
    script, lines, _, _, trace_dir = torch_run
    out = tmp_path / "calls.pftrace"
    r = run([SOL, "report", str(trace_dir), "--perfetto", str(out)], preload=False)
    assert r.returncode == 0, r.stderr
    packets = [proto_fields(p) for f, p in proto_fields(out.read_bytes()) if f == 1]
    assert one(packets[0], 13) == 1  # SEQ_INCREMENTAL_STATE_CLEARED, then one sequence throughout
    assert all(one(p, 10) == 1 for p in packets)
    # The tracks: a process each, its threads under it.
    processes, threads = {}, {}
    for p in packets:
        desc = one(p, 60)
        if desc is None:
            continue
        d = proto_fields(desc)
        if one(d, 3) is not None:
            processes[one(d, 1)] = one(proto_fields(one(d, 3)), 1)
        else:
            t = proto_fields(one(d, 4))
            assert one(d, 5) in processes
            threads[one(d, 1)] = (one(t, 1), one(t, 2))
    json_events = {}
    for path in files(trace_dir, ".trace.json"):
        with open(path) as f:
            trace = json.load(f)
        frames = trace["stackFrames"]
        for e in trace["traceEvents"]:
            if e.get("ph") == "X" and e["args"]["op"] != "dnnl_api":  # set-up calls: only with --setup
                stack, node = [], str(e["sf"]) if "sf" in e else None
                while node is not None:
                    stack.append(frames[node])
                    node = frames[node].get("parent")
                json_events[(e["pid"], e["tid"], round(e["ts"] * 1000), e["name"])] = (e, stack[::-1])
    assert sorted(set(processes.values())) == sorted({k[0] for k in json_events})
    # Every call is a slice, with its arguments and its stack.
    begun, ended, stacked = 0, 0, 0
    python_frames_of = {}  # slice name -> the (function, file, line) of its stacks' Python frames
    for p in packets:
        ev = one(p, 11)
        if ev is None:
            continue
        ev = proto_fields(ev)
        pid, tid = threads[one(ev, 11)]
        if one(ev, 9) == 2:  # TYPE_SLICE_END
            ended += 1
            continue
        assert one(ev, 9) == 1, ev  # TYPE_SLICE_BEGIN
        e, stack = json_events[(pid, tid, one(p, 8), one(ev, 23).decode())]
        args = {one(a, 10).decode(): a for a in map(proto_fields, (v for f, v in ev if f == 4))}
        assert one(args["shape"], 6).decode() == e["args"]["shape"]
        assert one(args["backend"], 6).decode() == e["args"]["backend"]
        got = [proto_fields(v) for f, v in proto_fields(one(ev, 55, b"")) if f == 1]
        assert len(got) == len(stack), (e["name"], len(got), len(stack))
        for g, want in zip(got, stack):
            if want["category"] == "python":
                function, file_line = want["name"][:-1].rsplit(" (", 1)
                file, line = file_line.rsplit(":", 1)
                assert (one(g, 1).decode(), one(g, 2).decode(), one(g, 3)) == (function, file, int(line))
                python_frames_of.setdefault(e["name"], set()).add((function, file, int(line)))
            else:
                assert one(g, 1).decode() == want["name"] and one(g, 2) is None
        stacked += bool(stack)
        begun += 1
    assert begun == ended == len(json_events) and stacked == begun
    # The script's GEMMs name the training step's line, outer frames before inner ones.
    step = ("a_training_step", script, lines["step"])
    assert step in python_frames_of.get("sgemm_", set()), python_frames_of.get("sgemm_")
