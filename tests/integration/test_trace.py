"""Trace mode on real programs: what is recorded, the files, and survival of forks, threads,
_exit and signals. Counts are cross-checked with an independent counter (tests/programs/count_calls.c,
a preload library sharing no code with SOL) and with oneDNN's own verbose output."""
import glob
import json
import os
import re
import signal
import subprocess

import pytest

from conftest import PROGRAMS, PY_PROGRAMS, PYTHON, SOL, run, sol_lines

COUNTER = str(PROGRAMS / "libcount_calls.so")


def traced(cmd, tmp_path, env=None, **kw):
    trace_dir = tmp_path / "trace"
    r = run(cmd, env=dict({"SOL_TRACE": "1", "SOL_TRACE_DIR": str(trace_dir)}, **(env or {})), **kw)
    return r, trace_dir


def independent_counts(cmd, tmp_path, cwd=None):
    out = tmp_path / "counts.txt"
    r = run(cmd, preload=False, env={"LD_PRELOAD": COUNTER, "COUNT_CALLS_OUT": str(out)}, cwd=cwd)
    assert r.returncode == 0, r.stderr
    return {line.split()[0]: int(line.split()[1]) for line in out.read_text().splitlines()}


def load_trace(path):
    """Events of a trace.json: the object form's traceEvents after a normal exit, else the array
    form, completed first when cut short (the process died), as viewers do."""
    text = open(path).read()
    try:
        trace = json.loads(text)
    except json.JSONDecodeError:
        body = text.rstrip(" \n\0")
        trace = json.loads(body.rstrip(",") + "]")
    return trace["traceEvents"] if isinstance(trace, dict) else trace


def strict_trace(path):
    """A trace.json written by a process that ended normally: strict JSON, the object form."""
    with open(path) as f:
        trace = json.load(f)
    assert isinstance(trace, dict) and isinstance(trace["stackFrames"], dict)
    return trace["traceEvents"]


def files(trace_dir, suffix):
    return sorted(glob.glob(str(trace_dir / "**" / ("sol-*" + suffix)), recursive=True))


def events(trace_dir):
    (path,) = files(trace_dir, ".trace.json")
    evs = [e for e in load_trace(path) if e.get("ph") == "X"]
    return evs


def summary(trace_dir):
    (path,) = files(trace_dir, ".summary.json")
    with open(path) as f:
        return json.load(f)


@pytest.fixture(scope="module")
def cnn(tmp_path_factory):
    """One traced run of the PyTorch CNN, shared by the tests that read it."""
    tmp = tmp_path_factory.mktemp("cnn")
    cmd = [PYTHON, str(PY_PROGRAMS / "torch_cnn.py")]
    r, trace_dir = traced(cmd, tmp, cwd=PY_PROGRAMS)
    assert r.returncode == 0, r.stderr
    plain = run(cmd, preload=False, cwd=PY_PROGRAMS)
    assert r.stdout == plain.stdout  # tracing does not change results
    return {"dir": trace_dir, "stderr": r.stderr, "counts": independent_counts(cmd, tmp, cwd=PY_PROGRAMS),
            "verbose": run(cmd, preload=False, env={"ONEDNN_VERBOSE": "1"}, cwd=PY_PROGRAMS).stdout}


def test_cnn_counts_match_an_independent_count(cnn):
    evs = events(cnn["dir"])
    by_name = {}
    for e in evs:
        by_name[e["name"]] = by_name.get(e["name"], 0) + 1
    assert by_name.get("sgemm_", 0) == cnn["counts"]["sgemm_"] > 0
    assert by_name.get("dnnl_primitive_execute", 0) == cnn["counts"]["dnnl_primitive_execute"] > 0
    assert cnn["counts"]["dnnl_primitive_execute"] == cnn["verbose"].count("onednn_verbose,exec")
    # summary and trace agree
    s = summary(cnn["dir"])
    assert sum(o["calls"] for o in s["ops"]) == len(evs) == s["process"]["calls"]


def test_cnn_linear_layers_have_the_right_gemm_shapes(cnn):
    # torch_cnn.py: Linear(64, 32) and Linear(32, 10), batch 16. PyTorch computes y = x W^T + b as a
    # column-major sgemm_ of y^T: m = out features, n = batch, k = in features.
    shapes = {e["args"]["shape"] for e in events(cnn["dir"]) if e["name"] == "sgemm_"}
    for out_f, in_f in ((32, 64), (10, 32)):
        assert "m=%d n=16 k=%d transa=T transb=N" % (out_f, in_f) in shapes, shapes
    for e in events(cnn["dir"]):
        if e["name"] == "sgemm_":
            a = e["args"]
            m, n, k = (int(re.search(r"\b%s=(\d+)" % x, a["shape"]).group(1)) for x in "mnk")
            assert a["flops"] == 2 * m * n * k
            assert a["op"] == "gemm" and a["dtype"] == "f32" and a["backend"] == "native"
            assert re.search(r"lda=\d+ ldb=\d+ ldc=\d+ alpha=1 beta=[01]", a["params"]), a["params"]


def test_cnn_convolution_problems_match_onednn_verbose(cnn):
    """Each convolution problem oneDNN reports executing appears in the trace with its sizes."""
    verbose_convs = set()
    for line in cnn["verbose"].splitlines():
        f = line.split(",")
        if line.startswith("onednn_verbose,exec") and f[3] == "convolution":
            verbose_convs.add((f[5], f[-2]))  # propagation, problem (mb16_ic3oc8_ih24oh24kh3sh1dh0ph1_...)
    assert verbose_convs
    traced_convs = {(e["args"]["shape"].split()[0], e["args"]["shape"].split()[1])
                    for e in events(cnn["dir"]) if e["args"]["op"] == "convolution"}
    for prop, problem in verbose_convs:
        assert ("prop=" + prop, problem) in traced_convs, (prop, problem, traced_convs)


def test_cnn_stacks_name_pytorch_functions(cnn):
    s = summary(cnn["dir"])
    frames = [f for site in s["sites"] for f in site["frames"]]
    assert any("at::native::" in f for f in frames)
    assert any("libtorch_cpu.so" in f for f in frames)
    sgemm_sites = [site for site in s["sites"] if site["symbol"] == "sgemm_"]
    assert sgemm_sites and all(site["frames"] for site in sgemm_sites)
    assert sum(site["calls"] for site in s["sites"]) == s["process"]["calls"]


def test_cnn_all_outputs_written(cnn):
    d = cnn["dir"]
    for suffix in (".trace.json", ".summary.json", ".summary.txt", ".folded", ".graph.dot"):
        assert len(files(d, suffix)) == 1, suffix
    trace = strict_trace(files(d, ".trace.json")[0])  # strict JSON after a normal exit
    assert trace[0]["ph"] == "M" and "torch_cnn.py" in trace[0]["args"]["name"]
    folded = open(files(d, ".folded")[0]).read().splitlines()
    assert any(l.rsplit(" ", 1)[0].endswith(";sgemm_") for l in folded)  # frames may hold spaces
    assert sum(int(l.rsplit(" ", 1)[1]) for l in folded) == summary(d)["process"]["traced_ns"]
    dot = open(files(d, ".graph.dot")[0]).read()
    assert dot.startswith("digraph") and "->" in dot and "convolution" in dot
    # the short table at exit: a header line, the five longest op signatures, the set-up calls' count
    table = [l for l in sol_lines(cnn["stderr"])]
    assert table[0].startswith("sol: trace: ") and "calls" in table[1] and len(table) == 2 + 5 + 1
    assert table[-1].startswith("sol: and ") and "set-up calls" in table[-1]


def test_numpy_cblas_calls(tmp_path):
    cmd = [PYTHON, "-c", "import numpy as np\n"
           "a = np.ones((200, 120), np.float32); b = np.ones((120, 80), np.float32)\n"
           "for _ in range(3): c = a @ b\n"
           "z = np.ones((30, 20), complex) @ np.ones((20, 10), complex)\n"
           "print(float(c.sum()), z.sum())"]
    r, d = traced(cmd, tmp_path)
    assert r.returncode == 0 and r.stdout == run(cmd, preload=False).stdout
    counts = independent_counts(cmd, tmp_path)
    evs = events(d)
    sg = [e for e in evs if e["name"] == "cblas_sgemm"]
    assert len(sg) == counts["cblas_sgemm"] == 3
    assert {e["args"]["shape"] for e in sg} == {"m=200 n=80 k=120 transa=N transb=N layout=row"}
    assert all(e["cat"] == "cblas" and e["args"]["flops"] == 2 * 200 * 80 * 120 for e in sg)
    zg = [e for e in evs if e["name"] == "cblas_zgemm"]
    assert len(zg) == counts["cblas_zgemm"] == 1 and zg[0]["args"]["dtype"] == "c128"
    assert zg[0]["args"]["flops"] == 8 * 30 * 10 * 20


def test_forked_children_write_their_own_files(tmp_path):
    cmd = [PYTHON, str(PY_PROGRAMS / "torch_dataloader.py")]
    r, d = traced(cmd, tmp_path, cwd=PY_PROGRAMS)
    assert r.returncode == 0, r.stderr
    assert r.stdout == run(cmd, preload=False, cwd=PY_PROGRAMS).stdout
    summaries = [json.load(open(p)) for p in files(d, ".summary.json")]
    pids = {s["process"]["pid"] for s in summaries}
    assert len(pids) >= 3, "parent and two DataLoader workers"
    for p in files(d, ".trace.json"):
        evs = strict_trace(p)  # every file is complete, strict JSON
        pid = int(re.search(r"sol-(\d+)\.trace\.json", p).group(1))
        assert all(e["pid"] == pid for e in evs)
    for s in summaries:
        assert s["process"]["calls"] == sum(o["calls"] for o in s["ops"]) > 0


def test_multiprocessing_children(tmp_path):
    """Pool workers end by SIGTERM (Pool.__exit__ terminates them): each leaves a loadable
    trace.json, which sol report reads in place of the summary it could not write."""
    cmd = [PYTHON, str(PY_PROGRAMS / "numpy_multiprocessing.py")]
    r, d = traced(cmd, tmp_path, cwd=PY_PROGRAMS)
    assert r.returncode == 0 and r.stdout == run(cmd, preload=False, cwd=PY_PROGRAMS).stdout
    traces = files(d, ".trace.json")
    assert len(traces) >= 2  # the parent and at least one worker
    calls = 0
    for p in traces:
        pid = int(re.search(r"sol-(\d+)\.trace\.json", p).group(1))
        trace = load_trace(p)  # loadable, even for a worker killed before it flushed a buffer
        assert trace[0]["ph"] == "M" and trace[0]["pid"] == pid
        evs = [e for e in trace if e.get("ph") == "X"]
        assert all(e["pid"] == pid for e in evs)
        calls += len(evs)
    summaries = [json.load(open(p))["process"] for p in files(d, ".summary.json")]
    pids = {s["pid"] for s in summaries}
    # the parent (whose parent is not one of the traced processes) ended normally and summarised
    (parent,) = [s for s in summaries if s["ppid"] not in pids and "numpy_multiprocessing.py" in " ".join(s["argv"])]
    assert parent["exit"] == "exit"
    rep = json.loads(run([SOL, "report", str(d), "--format", "json"], preload=False).stdout)
    assert rep["input"]["processes"] == len(traces) and rep["input"]["calls"] == calls


def test_eight_threads(tmp_path):
    r, d = traced([str(PROGRAMS / "threads")], tmp_path)
    assert r.returncode == 0 and "wrong=0" in r.stdout
    evs = events(d)
    assert len(evs) == 8 * 60 * 2
    assert len({e["tid"] for e in evs}) == 8
    assert sorted(e["args"]["seq"] for e in evs) == list(range(1, len(evs) + 1))


def test_many_buffers_from_threads_and_a_fork(tmp_path):
    """Far more events than the threads' buffers hold (hundreds of full buffers, written by the
    trace's writer thread or, when it is behind, by the threads themselves), from four threads,
    with a fork while they run: every call is in its process's file exactly once."""
    cmd = [str(PROGRAMS / "trace_volume"), "4", "20000"]
    r, d = traced(cmd, tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout == run(cmd, preload=False).stdout
    by_pid = {}
    for p in files(d, ".trace.json"):
        assert os.path.getsize(p) > 64 << 10
        evs = [e for e in strict_trace(p) if e.get("ph") == "X"]
        by_pid[int(re.search(r"sol-(\d+)\.trace\.json", p).group(1))] = evs
    assert len(by_pid) == 2
    parent, child = sorted(by_pid.values(), key=len, reverse=True)
    for evs in (parent, child):
        assert sorted(e["args"]["seq"] for e in evs) == list(range(1, len(evs) + 1))
    assert len([e for e in parent if e["name"] == "sdot_"]) == 4 * 20000
    assert len([e for e in parent if e["name"] == "ddot_"]) == 2 * 20000
    assert len({e["tid"] for e in parent}) == 5
    assert [e["name"] for e in child] == ["ddot_"] * 20000


@pytest.mark.parametrize("how", ["os._exit", "SIGKILL"])
def test_abnormal_exits(how, tmp_path):
    script = ("import os, signal, numpy as np\n"
              "a = np.ones((50, 50))\n"
              "for i in range(40): a = a @ np.eye(50)\n"
              "print('done', flush=True)\n"
              + ("os._exit(3)\n" if how == "os._exit" else "os.kill(os.getpid(), signal.SIGKILL)\n"))
    r, d = traced([PYTHON, "-c", script], tmp_path)
    assert "done" in r.stdout
    assert r.returncode == (3 if how == "os._exit" else -signal.SIGKILL)
    evs = events(d)
    dgemm = len([e for e in evs if e["name"] == "cblas_dgemm"])
    if how == "os._exit":
        assert dgemm == 40  # every call: the _exit hook flushed the buffers and closed the file
        strict_trace(files(d, ".trace.json")[0])
        assert summary(d)["process"]["exit"] == "_exit"
    else:
        # No chance to write the summary or flush the buffers: the file is a loadable prefix (at
        # least the process's metadata), and sol report reads it.
        assert files(d, ".summary.json") == [] and dgemm <= 40
        rep = run([SOL, "report", str(d), "--format", "json"], preload=False)
        assert rep.returncode == 0, rep.stderr
        rows = json.loads(rep.stdout)["rows"]
        assert sum(row["calls"] for row in rows if row["symbol"] == "cblas_dgemm") == dgemm


def test_full_buffers_reach_the_file_while_the_process_runs(tmp_path):
    """Blocks handed to the writer thread are in the file within a fraction of a second even when
    too few arrive to wake it at once, also after the writer went to sleep for want of blocks; a
    process killed later loses only its thread's own last buffer (under 64 KiB of events). A queued
    block wakes the writer at once (no timer): the half second the script then sleeps is hundreds
    of times what writing takes, and a loaded machine delays it by a scheduler's slice or two."""
    script = ("import os, signal, time, numpy as np\n"
              "x = np.ones(8)\n"
              "for i in range(900): x.dot(x)\n"
              "time.sleep(0.5)\n"
              "for i in range(900): x.dot(x)\n"
              "time.sleep(0.6)\n"
              "os.kill(os.getpid(), signal.SIGKILL)\n")
    r, d = traced([PYTHON, "-c", script], tmp_path)
    assert r.returncode == -signal.SIGKILL
    (path,) = files(d, ".trace.json")
    dots = [e for e in load_trace(path) if e.get("name") == "cblas_ddot"]
    per_buffer = (64 << 10) // (os.path.getsize(path) // max(len(dots), 1)) + 1
    assert 1800 - per_buffer <= len(dots) < 1800 and per_buffer < 450


def test_unwritable_trace_dir_warns_once_and_runs_on(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    r = run([str(PROGRAMS / "threads")], env={"SOL_TRACE": "1", "SOL_TRACE_DIR": str(blocker / "sub")})
    assert r.returncode == 0 and "wrong=0" in r.stdout
    lines = sol_lines(r.stderr)
    assert len(lines) == 1 and "cannot write trace files" in lines[0] and str(blocker) in lines[0]


def test_programs_without_calls_leave_no_files(tmp_path):
    r, d = traced(["bash", "-c", "echo hi"], tmp_path)
    assert r.stdout == "hi\n" and r.stderr == ""
    assert not d.exists() or not os.listdir(d)


def test_rank_aware_names(tmp_path):
    r, d = traced([str(PROGRAMS / "sdot")], tmp_path, env={"RANK": "3"})
    assert r.returncode == 0
    (p,) = files(d, ".summary.json")
    assert re.search(r"sol-r3-\d+\.summary\.json$", p)
    assert json.load(open(p))["process"]["rank"] == 3


def test_stacks_off_and_depth(tmp_path):
    r, d = traced([str(PROGRAMS / "threads")], tmp_path, env={"SOL_TRACE_STACKS": "0"})
    assert r.returncode == 0
    s = summary(d)
    assert s["process"]["stacks"] is False and all(site["frames"] == [] for site in s["sites"])
    r, d2 = traced([PYTHON, "-c", "import numpy as np; np.ones((9, 9)) @ np.ones((9, 9))"], tmp_path / "d",
                   env={"SOL_TRACE_DEPTH": "3"})
    # The depth bounds the native frames; the Python frames come on top, after a "..." when the
    # native stack was cut before the interpreter.
    for site in summary(d2)["sites"]:
        python = [f for f in site["frames"] if re.search(r" \([^()]*:\d+\)$", f) and "+0x" not in f]
        native = [f for f in site["frames"] if f not in python and f != "..."]
        assert len(native) <= 3 and python, site["frames"]


def test_report_and_diff_on_real_traces(tmp_path):
    a, da = traced([PYTHON, str(PY_PROGRAMS / "torch_mlp.py")], tmp_path / "a", cwd=PY_PROGRAMS)
    b, db = traced([PYTHON, str(PY_PROGRAMS / "torch_cnn.py")], tmp_path / "b", cwd=PY_PROGRAMS)
    rep = run([SOL, "report", str(da), "--by", "site", "--format", "json"], preload=False)
    assert rep.returncode == 0, rep.stderr
    rows = json.loads(rep.stdout)["rows"]
    assert any("at::native::" in f for row in rows for f in row["frames"])
    svg = tmp_path / "flame.svg"
    assert run([SOL, "report", str(db), "--flamegraph", str(svg)], preload=False).returncode == 0
    assert svg.read_text().lstrip().startswith(("<?xml", "<svg"))
    diff = run([SOL, "diff", str(da), str(db), "--format", "json"], preload=False)
    assert diff.returncode == 0, diff.stderr
    ops = json.loads(diff.stdout)["ops"]
    assert any(o["op"] == "convolution" for o in ops["only_b"])
    assert any(o["symbol"] == "dgemm_" for o in ops["only_a"])


def test_diff_of_one_program_on_two_backends_matches_every_op(tmp_path):
    """The same program traced on native and on reference: every op in both, the backend shown
    as what changed, and every call site in both."""
    cmd = [str(PROGRAMS / "device_gemms"), "64", "32", "16", "3"]
    _, da = traced(cmd, tmp_path / "a", env={"SOL_BACKEND": "native"})
    _, db = traced(cmd, tmp_path / "b", env={"SOL_BACKEND": "reference"})
    diff = run([SOL, "diff", str(da), str(db), "--format", "json"], preload=False)
    assert diff.returncode == 0, diff.stderr
    doc = json.loads(diff.stdout)
    for kind in ("ops", "sites"):
        assert doc[kind]["only_a"] == [] and doc[kind]["only_b"] == [], doc[kind]
    [gemm] = doc["ops"]["common"]
    assert (gemm["symbol"], gemm["backend_a"], gemm["backend_b"], gemm["calls_a"], gemm["calls_b"]) == \
        ("sgemm_", "native", "reference", 3, 3)
    text = run([SOL, "diff", str(da), str(db)], preload=False).stdout
    assert "native -> reference" in text and "Op signatures only in A: none" in text


def test_runs_apart_forks_together(tmp_path):
    """Two launches write into two run directories; a launch's forked child into its parent's.
    sol report on the trace directory reads the latest run and says so."""
    d = tmp_path / "trace"
    env = {"SOL_TRACE": "1", "SOL_TRACE_DIR": str(d)}
    cmd = [str(PROGRAMS / "device_gemms"), "64", "32", "16", "3"]
    first = run(cmd + ["fork"], env=env)
    assert first.returncode == 0, first.stderr
    [run1] = [p for p in d.iterdir()]
    assert run1.name.startswith("run-") and len(list(run1.glob("sol-*.summary.json"))) == 2
    second = run(cmd, env=env)
    assert second.returncode == 0, second.stderr
    runs = sorted(p.name for p in d.iterdir())
    assert len(runs) == 2 and all(r.startswith("run-") for r in runs)
    [run2] = [p for p in d.iterdir() if p != run1]
    rep = run([SOL, "report", str(d), "--format", "json"], preload=False)
    assert rep.returncode == 0, rep.stderr
    doc = json.loads(rep.stdout)
    assert doc["input"]["path"] == str(run2) and doc["input"]["processes"] == 1
    assert "holds 2 runs" in rep.stderr and run2.name in rep.stderr
    older = json.loads(run([SOL, "report", str(run1), "--format", "json"], preload=False).stdout)
    assert older["input"]["processes"] == 2
    # A run named by the user groups separate launches.
    for _ in range(2):
        assert run(cmd, env=dict(env, SOL_TRACE_RUN="job-7")).returncode == 0
    assert len(list((d / "run-job-7").glob("sol-*.summary.json"))) == 2


def test_filters_choose_what_is_traced(tmp_path):
    """trace.include / trace.exclude: by op, family or symbol, with wildcards. The CNN's oneDNN
    set-up calls (family dnnl) are most of its calls; excluded, only computing calls remain."""
    def ops(env, name):
        r, d = traced([PYTHON, str(PY_PROGRAMS / "torch_cnn.py")], tmp_path / name, env=env, cwd=PY_PROGRAMS)
        assert r.returncode == 0, r.stderr
        return [(o["op"], o["symbol"]) for s in files(d, ".summary.json") for o in json.load(open(s))["ops"]]

    everything = ops({}, "all")
    assert any(op == "dnnl_api" for op, _ in everything)
    computing = ops({"SOL_TRACE_EXCLUDE": "dnnl"}, "computing")
    assert computing and not any(op == "dnnl_api" for op, _ in computing)
    assert {op for op, _ in computing} == {op for op, _ in everything if op != "dnnl_api"}
    only = ops({"SOL_TRACE_INCLUDE": "convolution, *gemm*"}, "only")
    assert only and {op for op, _ in only} <= {"convolution", "gemm"}
    assert "convolution" in {op for op, _ in only}


def test_a_delay_leaves_the_start_out(tmp_path):
    # The program calls for two seconds of its own clock and the delay is one of them: however
    # slowly it runs, calls fall on both sides of the delay's end.
    r, d = traced([str(PROGRAMS / "repeated_gemm"), "64", "2"], tmp_path, env={"SOL_TRACE_DELAY": "1"})
    assert r.returncode == 0, r.stderr
    made = int(r.stdout.split("after ")[1].split()[0])
    traced_calls = summary(d)["process"]["calls"]
    assert 0 < traced_calls < made, (traced_calls, made)
    assert min(e["ts"] for e in events(d)) >= 1e6  # microseconds from the process's start


def test_a_signal_turns_tracing_off_and_on(tmp_path):
    """SOL_TRACE_TOGGLE=sigusr2: a second between two signals leaves a gap in the trace, with calls
    traced before and after it. The first signal goes once the program is calling (its first
    call's line on stderr), however long it took to start."""
    import signal
    import subprocess
    import time
    from conftest import clean_env
    d = tmp_path / "trace"
    env = clean_env({"SOL_TRACE": "1", "SOL_TRACE_DIR": str(d), "SOL_TRACE_TOGGLE": "sigusr2", "SOL_LOG": "debug"})
    p = subprocess.Popen([str(PROGRAMS / "repeated_gemm"), "64", "4"], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    for line in p.stderr:
        if line.startswith("sol: native sgemm_"):
            break
    time.sleep(0.3)
    p.send_signal(signal.SIGUSR2)  # off
    time.sleep(1.0)
    p.send_signal(signal.SIGUSR2)  # on again
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    ts = sorted(e["ts"] for e in events(d))
    gaps = [b - a for a, b in zip(ts, ts[1:])]
    # The second between the signals, less what it takes a signal to arrive: far beyond any gap
    # between two calls of the program.
    assert max(gaps) >= 0.8e6, max(gaps)
    assert int(out.split("after ")[1].split()[0]) > len(ts)  # calls made while tracing was off
