"""sol report over data/survey: two ranks (r0-4242, r1-4243), a process without rank (4300, no
.folded), and one killed process (r1-4250) with only an unterminated, space-padded trace.json."""
import json
import shutil

import pytest
from conftest import DATA, header_of_csv, sol, sol_csv, sol_json

SURVEY = DATA / "survey"
SGEMM = ("blas", "sgemm_", "gemm", "f32", "m=128 n=32 k=512 transa=T transb=N", "native")
DGEMV = ("blas", "dgemv_", "gemv", "f64", "m=1000 n=1000 transa=N lda=1000 incx=1 incy=1", "native")
KEY = ("api", "symbol", "op", "dtype", "shape", "backend")
TRACED_NS = 2525000 + 1600000 + 30000 + 185750  # the three summaries' ops + the killed one's events


def ops_by_key(rows):
    return {tuple(r[k] for k in KEY): r for r in rows}


def test_merged_totals():
    doc = sol_json("report", SURVEY)
    assert doc["format"] == "sol-report/1" and doc["by"] == "op"
    inp = doc["input"]
    assert inp["processes"] == 4
    assert inp["ranks"] == 2
    assert inp["calls"] == 35 + 34 + 2 + 3
    assert inp["traced_ns"] == TRACED_NS
    # First start (r0-4242 at +0 s) to last end (r1-4243: +0.5 s + 1.8 s).
    assert inp["wall_ns"] == 2300000000
    sources = {p["tag"]: p["source"] for p in inp["process_list"]}
    assert sources == {"r0-4242": "summary", "r1-4243": "summary", "4300": "summary", "r1-4250": "trace"}


def test_op_rows_merge_across_processes_and_ranks():
    doc = sol_json("report", SURVEY)
    ops = ops_by_key(doc["rows"])
    assert len(ops) == 5 and doc["rows_total"] == 5
    s = ops[SGEMM]
    # r0: 20 calls, r1: 30 calls, the killed r1-4250: 2 events (40.000 us + 45.500 us).
    assert s["calls"] == 52
    assert s["total_ns"] == 825000 + 1200000 + 40000 + 45500
    assert s["min_ns"] == 35000 and s["max_ns"] == 60000
    assert s["flops"] == 83886080 + 125829120 + 2 * 4194304
    assert s["bytes"] == 6881280 + 10321920 + 2 * 344064
    assert s["mean_ns"] == round(s["total_ns"] / 52)
    assert s["percent"] == pytest.approx(100 * s["total_ns"] / TRACED_NS, abs=1e-3)
    assert s["gflops"] == pytest.approx(s["flops"] / s["total_ns"], abs=1e-3)
    assert s["gbs"] == pytest.approx(s["bytes"] / s["total_ns"], abs=1e-3)
    # The same signature on another backend is another row.
    assert ops[SGEMM[:5] + ("openblas",)]["calls"] == 2
    d = ops[DGEMV]
    assert (d["calls"], d["total_ns"], d["min_ns"], d["max_ns"]) == (5, 400000 + 100250, 90000, 110000)
    # The finished process's trace.json is ignored: its summary wins.
    assert not any(r["symbol"] == "saxpy_" for r in doc["rows"])


def test_rows_sorted_by_time_and_percent_adds_up():
    rows = sol_json("report", SURVEY)["rows"]
    totals = [r["total_ns"] for r in rows]
    assert totals == sorted(totals, reverse=True)
    assert sum(totals) == TRACED_NS
    assert sum(r["percent"] for r in rows) == pytest.approx(100, abs=0.01)


def test_by_site_merges_equal_frames_and_keeps_frameless_sites():
    doc = sol_json("report", SURVEY, "--by", "site")
    rows = doc["rows"]
    assert sum(r["total_ns"] for r in rows) == TRACED_NS
    top = rows[0]
    # Site 7 of r0-4242 and site 2 of r1-4243 have the same frames.
    assert top["symbol"] == "sgemm_" and top["calls"] == 50 and top["total_ns"] == 2025000
    assert top["processes"] == 2
    assert top["frames"][0].startswith("at::native::cpublas::gemm(")
    frameless = {r["symbol"]: r for r in rows if r["frames"] == []}
    assert frameless["sgemm_"]["calls"] == 2 and frameless["sgemm_"]["total_ns"] == 85500
    assert frameless["dgemv_"]["calls"] == 1 and frameless["dgemv_"]["total_ns"] == 100250
    assert len(rows) == 7


def test_by_api():
    doc = sol_json("report", SURVEY, "--by", "api")
    rows = {(r["api"], r["symbol"]): r for r in doc["rows"]}
    assert rows[("blas", "sgemm_")]["signatures"] == 2
    assert rows[("blas", "sgemm_")]["calls"] == 54
    assert rows[("blas", "sgemm_")]["total_ns"] == 2110500 + 30000
    apis = {r["api"]: r for r in doc["apis"]}
    assert apis["blas"]["calls"] == 54 + 5 and apis["blas"]["signatures"] == 3
    assert apis["cblas"]["total_ns"] == 200000
    assert apis["dnnl"]["calls"] == 5
    assert sum(a["total_ns"] for a in apis.values()) == TRACED_NS


def test_text_output():
    p = sol("report", SURVEY, check=0)
    lines = p.stdout.splitlines()
    head = lines[0]
    assert "4 processes (2 ranks)" in head and "74 calls" in head
    assert "4.34 ms traced" in head and "2.300 s wall" in head
    assert "1 without a summary" in head
    table = [l for l in lines[2:] if l.strip()]
    assert table[0].split()[:4] == ["calls", "total", "%", "mean"]
    first = table[1].split()
    assert first[0] == "52" and "sgemm_" in first and "native" in first
    assert len(table) == 1 + 5
    # The killed process needs no warning; a finished one's last event is not cut.
    assert p.stderr == ""


def test_top_limits_rows():
    p = sol("report", SURVEY, "--top", "2", check=0)
    body = [l for l in p.stdout.splitlines()[3:] if l.strip()]
    assert len(body) == 3 and "3 more rows" in body[-1]
    doc = sol_json("report", SURVEY, "--top=2")
    assert len(doc["rows"]) == 2 and doc["rows_total"] == 5
    assert len(sol_csv("report", SURVEY, "--top", "3")) == 3


def test_csv_columns_and_values():
    assert header_of_csv("report", SURVEY) == [
        "api", "symbol", "op", "dtype", "shape", "backend", "calls", "total_ns", "percent", "mean_ns",
        "min_ns", "max_ns", "flops", "bytes", "gflops", "gbs"]
    rows = sol_csv("report", SURVEY)
    assert len(rows) == 5
    ops = ops_by_key(rows)
    assert int(ops[SGEMM]["calls"]) == 52 and int(ops[SGEMM]["total_ns"]) == 2110500
    assert header_of_csv("report", SURVEY, "--by", "site") == [
        "symbol", "op", "dtype", "shape", "signatures", "other_calls", "frames", "calls", "total_ns", "percent",
        "mean_ns", "processes"]
    sites = sol_csv("report", SURVEY, "--by", "site")
    assert sites[0]["frames"].split(";")[2] == "/usr/bin/python3.11+0x5f00"  # commas inside, quoted
    assert header_of_csv("report", SURVEY, "--by", "api") == [
        "api", "symbol", "signatures", "calls", "total_ns", "percent", "mean_ns", "flops", "bytes", "gflops", "gbs"]


def test_single_summary_file():
    doc = sol_json("report", SURVEY / "sol-r1-4243.summary.json")
    assert doc["input"]["processes"] == 1 and doc["input"]["ranks"] == 1
    assert doc["input"]["calls"] == 34 and doc["input"]["traced_ns"] == 1600000
    assert ops_by_key(doc["rows"])[SGEMM]["calls"] == 30


def test_killed_trace_padded_with_nul_bytes(tmp_path):
    # A recorder that extends its mapping with ftruncate leaves zeros rather than spaces.
    text = (SURVEY / "sol-r1-4250.trace.json").read_bytes().rstrip(b" ")
    (tmp_path / "sol-r1-4250.trace.json").write_bytes(text + b"\0" * 4096)
    doc = sol_json("report", tmp_path)
    assert doc["input"]["calls"] == 3 and doc["input"]["traced_ns"] == 185750
    p = doc["input"]["process_list"][0]
    assert (p["pid"], p["rank"], p["argv"]) == (4250, 1, ["python3", "train.py", "--epochs", "1"])
    assert p["wall_ns"] == 400250  # the last event ends at 300 us + 100.25 us


def test_corrupt_files_in_a_directory_are_warnings(tmp_path):
    p = sol("report", DATA / "mixed", "--format", "json", check=0)
    doc = json.loads(p.stdout)
    # sol-100: good; sol-101: truncated; sol-102: another format; sol-103: corrupt summary with a
    # complete trace.json to fall back to.
    assert doc["input"]["processes"] == 2
    assert doc["input"]["calls"] == 3 + 1
    assert doc["input"]["traced_ns"] == 3000 + 1500
    warnings = [l for l in p.stderr.splitlines() if l.startswith("sol: warning: ")]
    assert len(warnings) == 3, p.stderr
    assert any("sol-101.summary.json" in w and "not valid JSON" in w for w in warnings)
    assert any("sol-102.summary.json" in w and "not a SOL summary" in w for w in warnings)
    assert any("sol-103.summary.json" in w and "sol-103.trace.json instead" in w for w in warnings)
    assert len(doc["input"]["warnings"]) == 3


def test_unrelated_files_are_ignored(tmp_path):
    for f in ("sol-r0-4242.summary.json", "sol-r0-4242.summary.txt", "sol-r0-4242.graph.dot", "README"):
        shutil.copy(SURVEY / f, tmp_path / f)
    (tmp_path / "sol-r0-4242.verify.jsonl").write_text("{}\n")
    doc = sol_json("report", tmp_path)
    assert doc["input"]["processes"] == 1 and doc["input"]["calls"] == 35


def test_single_trace_file():
    doc = sol_json("report", SURVEY / "sol-r1-4250.trace.json")
    assert doc["input"]["calls"] == 3
    assert ops_by_key(doc["rows"])[SGEMM]["total_ns"] == 85500


def test_malformed_events_are_skipped_with_a_warning(tmp_path):
    lines = (SURVEY / "sol-r1-4250.trace.json").read_text().rstrip(" ").splitlines(keepends=True)
    # A call whose duration is not a number and one of another kind ("i": instant) between them.
    bad = ',{"name":"sgemm_","cat":"blas","ph":"X","ts":1.0,"dur":"long","args":{}}\n'
    instant = ',{"name":"mark","ph":"i","ts":2.0,"pid":4250,"tid":4250}\n'
    (tmp_path / "sol-r1-4250.trace.json").write_text("".join(lines[:2] + [bad, instant] + lines[2:]))
    p = sol("report", tmp_path, "--format", "json", check=0)
    assert json.loads(p.stdout)["input"]["calls"] == 3
    assert "1 malformed events skipped" in p.stderr


def test_a_library_frame_keeps_its_whole_name(tmp_path):
    """A frame without a function is its library's file and offset: the text report shortens the
    path, never the name (NumPy's extension modules have long ones)."""
    lib = "/usr/lib/python3/dist-packages/numpy/core/_multiarray_umath.cpython-311-x86_64-linux-gnu.so+0x29a94c"
    fn = "at::native::(anonymous namespace)::addmm_impl_cpu_(at::Tensor&, at::Tensor const&) (/usr/lib/libtorch_cpu.so+0x10)"
    doc = json.loads((SURVEY / "sol-4300.summary.json").read_text())
    doc["sites"][0]["frames"] = [lib, fn]
    (tmp_path / "sol-4300.summary.json").write_text(json.dumps(doc))
    out = sol("report", tmp_path, "--by", "site", check=0).stdout
    assert "_multiarray_umath.cpython-311-x86_64-linux-gnu.so+0x29a94c" in out, out
    assert "/usr/lib/python3" not in out
    # A long function name keeps its tail: the function itself.
    assert "..addmm_impl_cpu_" in out or "addmm_impl_cpu_" in out, out


def test_setup_calls_are_hidden_unless_asked(tmp_path):
    doc = json.loads((SURVEY / "sol-4300.summary.json").read_text())
    doc["ops"].append({"api": "dnnl", "symbol": "dnnl_memory_desc_init_by_tag", "op": "dnnl_api", "dtype": "none",
                       "shape": "", "backend": "native", "calls": 40, "total_ns": 4000, "min_ns": 50, "max_ns": 200,
                       "flops": 0, "bytes": 0})
    doc["sites"].append({"id": 2, "symbol": "dnnl_memory_desc_init_by_tag", "calls": 40, "total_ns": 4000,
                         "frames": ["setup (/usr/local/bin/bench+0x2000)"]})
    (tmp_path / "sol-4300.summary.json").write_text(json.dumps(doc))
    for by in ("op", "site", "api"):
        p = sol("report", tmp_path, "--by", by, "--format", "json", check=0)
        rows = json.loads(p.stdout)["rows"]
        assert all(r["symbol"] != "dnnl_memory_desc_init_by_tag" for r in rows), (by, rows)
        assert "40 set-up calls are not shown" in p.stderr
        shown = sol_json("report", tmp_path, "--by", by, "--setup")["rows"]
        assert any(r["symbol"] == "dnnl_memory_desc_init_by_tag" for r in shown), by
    # The flame graph follows the same rule, with the same flag.
    svg = tmp_path / "flame.svg"
    sol("report", tmp_path, "--flamegraph", svg, check=0)
    assert "dnnl_memory_desc_init_by_tag" not in svg.read_text()
    sol("report", tmp_path, "--flamegraph", svg, "--setup", check=0)
    assert "dnnl_memory_desc_init_by_tag" in svg.read_text()


def test_every_apis_setup_calls_follow_one_rule(tmp_path):
    """cuBLAS's and cuDNN's handle and descriptor calls are set-up calls as oneDNN's are
    (ir/setup.hpp): hidden alike, counted in one note."""
    doc = json.loads((SURVEY / "sol-4300.summary.json").read_text())
    for symbol, op in (("cublasCreate_v2", "cublas_api"), ("cudnnCreate", "cudnn_api"), ("dnnl_engine_create", "dnnl_api")):
        doc["ops"].append({"api": "x", "symbol": symbol, "op": op, "dtype": "none", "shape": "", "backend": "native",
                           "calls": 2, "total_ns": 100, "min_ns": 50, "max_ns": 50, "flops": 0, "bytes": 0})
    (tmp_path / "sol-4300.summary.json").write_text(json.dumps(doc))
    p = sol("report", tmp_path, "--format", "json", check=0)
    assert [r["op"] for r in json.loads(p.stdout)["rows"] if r["op"].endswith("_api")] == []
    assert "6 set-up calls are not shown (--setup shows them)" in p.stderr


def test_site_rows_name_their_op(tmp_path):
    """Each site row says what its calls computed: the op signature of most of them, and how many
    others there were; the text puts the site itself under it."""
    one = DATA / "one-time" / "sol-2000.summary.json"
    rows = {r["symbol"]: r for r in sol_json("report", one, "--by", "site")["rows"]}
    sdot = rows["cblas_sdot"]
    assert (sdot["op"], sdot["dtype"], sdot["shape"], sdot["signatures"]) == ("dot", "f32", "n=2", 1)
    lines = sol("report", one, "--by", "site", check=0).stdout.splitlines()
    at = next(i for i, l in enumerate(lines) if l.endswith("  dot n=2"))
    assert lines[at + 1].strip() == "cblas_sdot < dot_loop < main"
    assert lines[at + 1].index("cblas_sdot") == lines[at].index("dot n=2")
    assert not any(l.endswith("]") for l in lines)  # no numbered labels
    # A site whose calls had several shapes names the most called one and counts the rest.
    doc = json.loads(one.read_text())
    doc["sites"][0]["ops"] = [{"op": "dot", "dtype": "f32", "shape": "n=2", "calls": 5},
                              {"op": "dot", "dtype": "f32", "shape": "n=8", "calls": 15}]
    (tmp_path / "sol-2000.summary.json").write_text(json.dumps(doc))
    out = sol("report", tmp_path, "--by", "site", check=0).stdout
    assert "  dot n=8 (+1 other)\n" in out, out
    doc["sites"][0]["other_calls"] = 3  # calls of signatures beyond the first four
    (tmp_path / "sol-2000.summary.json").write_text(json.dumps(doc))
    out = sol("report", tmp_path, "--by", "site", check=0).stdout
    assert "  dot n=8 (+2 or more others)\n" in out, out


def test_sites_that_read_the_same_are_told_apart_where_their_stacks_part(tmp_path):
    """Two sites whose labels (innermost frames, locations, the program's line) are equal get the
    frame where their stacks part, with its index, instead of a number."""
    doc = json.loads((SURVEY / "sol-4300.summary.json").read_text())
    site = doc["sites"][0]
    inner = ["f (app+0x10)", "g (app+0x20)", "h (app+0x30)", "i (app+0x40)"]
    a, b = dict(site, id=7, frames=inner + ["x (app+0x50)"]), dict(site, id=8, frames=inner + ["y (app+0x60)"])
    doc["sites"] = [a, b]
    (tmp_path / "sol-4300.summary.json").write_text(json.dumps(doc))
    out = sol("report", tmp_path, "--by", "site", check=0).stdout
    assert "[frame 4: x (app+0x50)]" in out and "[frame 4: y (app+0x60)]" in out, out


def test_files_written_are_named(tmp_path):
    for flag, name, what in (("--flamegraph", "flame.svg", "flame graph"), ("--perfetto", "calls.pftrace", "Perfetto")):
        p = sol("report", SURVEY, flag, tmp_path / name, check=0)
        line = next(l for l in p.stderr.splitlines() if l.startswith("sol: wrote "))
        assert line.startswith("sol: wrote %s: " % (tmp_path / name)) and what in line, p.stderr
