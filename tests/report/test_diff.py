"""sol diff over data/diff: A and B share sgemm_ (+50 us) and dgemm_ (+3 calls, -10 us); ddot_
moved from native to openblas (the same op, another backend: -12 us); saxpy_ only in A, sscal_
only in B. The dgemm_ call site moved (app+0x20 -> app+0x24)."""
import json

from conftest import DATA, header_of_csv, sol, sol_csv, sol_json

A = DATA / "diff" / "sol-a.summary.json"
B = DATA / "diff" / "sol-b.summary.json"


def test_json_sections():
    doc = sol_json("diff", A, B)
    assert doc["format"] == "sol-diff/2" and doc["across_apis"] is False
    assert doc["a"]["calls"] == 116 and doc["b"]["calls"] == 120
    t = doc["totals"]
    assert (t["calls_delta"], t["total_ns_a"], t["total_ns_b"], t["total_ns_delta"]) == (4, 171000, 201000, 30000)
    assert t["total_ns_rel"] == round(30000 / 171000, 3)

    ops = doc["ops"]
    assert ops["counts"] == {"only_a": 1, "only_b": 1, "common": 3}
    assert [(r["symbol"], r["backend_a"], r["backend_b"]) for r in ops["only_a"]] == [("saxpy_", "native", "")]
    assert [(r["symbol"], r["backend_a"], r["backend_b"]) for r in ops["only_b"]] == [("sscal_", "", "native")]
    only_a = ops["only_a"][0]
    assert (only_a["calls_a"], only_a["calls_b"], only_a["total_ns_delta"], only_a["total_ns_rel"]) == (1, 0, -1000, -1)
    only_b = ops["only_b"][0]
    assert (only_b["calls_a"], only_b["calls_b"], only_b["total_ns_delta"], only_b["total_ns_rel"]) == (0, 2, 3000, None)
    # Common ones, by |time delta|: ddot_ is one op that changed backend, with its time delta.
    sg, dd, dg = ops["common"]
    assert (sg["symbol"], sg["calls_delta"], sg["total_ns_delta"], sg["total_ns_rel"]) == ("sgemm_", 0, 50000, 0.5)
    assert (dd["symbol"], dd["backend_a"], dd["backend_b"], dd["calls_delta"], dd["total_ns_delta"]) == \
        ("ddot_", "native", "openblas", 0, -12000)
    assert (dg["symbol"], dg["calls_a"], dg["calls_b"], dg["calls_delta"], dg["calls_rel"]) == ("dgemm_", 5, 8, 3, 0.6)
    assert (dg["total_ns_a"], dg["total_ns_b"], dg["total_ns_delta"], dg["total_ns_rel"]) == (50000, 40000, -10000, -0.2)


def test_sites_by_frames_not_ids():
    sites = sol_json("diff", A, B)["sites"]
    assert sites["counts"] == {"only_a": 2, "only_b": 2, "common": 2}
    assert [r["frames"][0] for r in sites["only_a"]] == ["g_gemm (app+0x20)", "axpy_once (app+0x40)"]
    assert [r["frames"][0] for r in sites["only_b"]] == ["g_gemm (app+0x24)", "scale (app+0x50)"]
    common = {r["symbol"]: r for r in sites["common"]}
    # ddot_ changed backend, but its call site is the same.
    assert common["ddot_"]["total_ns_delta"] == -12000 and common["ddot_"]["calls_delta"] == 0
    assert [r["symbol"] for r in sites["common"]] == ["sgemm_", "ddot_"]


def test_identical_inputs_have_no_difference():
    doc = sol_json("diff", A, A)
    for kind in ("ops", "sites"):
        assert doc[kind]["only_a"] == [] and doc[kind]["only_b"] == []
        assert all(r["calls_delta"] == 0 and r["total_ns_delta"] == 0 for r in doc[kind]["common"])


def test_text():
    p = sol("diff", A, B, check=0)
    out = p.stdout
    assert "calls 116 -> 120 (+4, +3.4%)" in out
    sections = out.split("\n\n")
    only_a = next(s for s in sections if s.startswith("Op signatures only in A: 1"))
    assert "saxpy_" in only_a and "sscal_" not in only_a
    both = next(s for s in sections if s.startswith("Op signatures in both: 3"))
    rows = both.splitlines()[2:]
    assert rows[0].split()[:3] == ["10", "10", "0"] and "+50.0 us" in rows[0] and "+50.0%" in rows[0]
    assert "ddot_" in rows[1] and "native -> openblas" in rows[1] and "-12.0 us" in rows[1]
    assert rows[2].split()[:3] == ["5", "8", "+3"] and "-10.0 us" in rows[2] and "-20.0%" in rows[2]
    # Two sites whose short names are equal are told apart by their locations.
    sites_a = next(s for s in sections if s.startswith("Call sites only in A"))
    assert "g_gemm (app+0x20)" in sites_a


def test_csv():
    assert header_of_csv("diff", A, B) == [
        "kind", "side", "api", "symbol", "op", "dtype", "shape", "backend_a", "backend_b", "frames", "calls_a",
        "calls_b", "calls_delta", "calls_rel", "total_ns_a", "total_ns_b", "total_ns_delta", "total_ns_rel",
        "steady_ns_a", "steady_ns_b", "steady_ns_delta", "steady_ns_rel", "one_time_calls_a", "one_time_calls_b",
        "one_time_ns_a", "one_time_ns_b", "one_time_a", "one_time_b"]
    rows = sol_csv("diff", A, B)
    assert len(rows) == 11
    sides = [(r["kind"], r["side"]) for r in rows]
    assert sides.count(("op", "common")) == 3 and sides.count(("site", "only_b")) == 2
    dg = next(r for r in rows if r["kind"] == "op" and r["symbol"] == "dgemm_")
    assert (int(dg["calls_delta"]), int(dg["total_ns_delta"]), float(dg["total_ns_rel"])) == (3, -10000, -0.2)
    new = next(r for r in rows if r["kind"] == "op" and r["symbol"] == "sscal_")
    assert new["calls_rel"] == "" and new["side"] == "only_b" and new["backend_a"] == ""
    site = next(r for r in rows if r["kind"] == "site" and r["side"] == "only_a")
    assert site["frames"] == "g_gemm (app+0x20);main (app+0x1)" and site["api"] == ""


def test_across_apis(tmp_path):
    """B calling cblas_sgemm where A called sgemm_, from the same place: by default two ops (only in
    A, only in B); across APIs one, with both symbols, and one call site."""
    doc = json.loads(B.read_text())
    for o in doc["ops"]:
        if o["symbol"] == "sgemm_":
            o["api"], o["symbol"] = "cblas", "cblas_sgemm"
    for site in doc["sites"]:
        if site["symbol"] == "sgemm_":
            site["symbol"] = "cblas_sgemm"
    b = tmp_path / "sol-b.summary.json"
    b.write_text(json.dumps(doc))
    plain = sol_json("diff", A, b)["ops"]
    assert "sgemm_" in {r["symbol"] for r in plain["only_a"]}
    assert "cblas_sgemm" in {r["symbol"] for r in plain["only_b"]}
    across = sol_json("diff", A, b, "--across-apis")
    assert across["across_apis"] is True
    sg = next(r for r in across["ops"]["common"] if r["op"] == "gemm" and r["dtype"] == "f32")
    assert (sg["api"], sg["symbol"], sg["calls_delta"], sg["total_ns_delta"]) == \
        ("blas+cblas", "cblas_sgemm+sgemm_", 0, 50000)
    assert all(r["op"] != "gemm" or r["dtype"] != "f32" for r in across["ops"]["only_a"] + across["ops"]["only_b"])
    site = next(r for r in across["sites"]["common"] if "f_gemm (app+0x10)" in r["frames"])
    assert site["symbol"] == "cblas_sgemm+sgemm_" and site["total_ns_delta"] == 50000


def test_top_limits_each_section():
    doc = sol_json("diff", A, B, "--top", "1")
    for kind in ("ops", "sites"):
        assert all(len(doc[kind][s]) == 1 for s in ("only_a", "only_b", "common"))
    assert doc["ops"]["counts"]["common"] == 3 and doc["sites"]["counts"]["common"] == 2


def test_directories_merge_before_comparing():
    doc = sol_json("diff", DATA / "survey", DATA / "survey" / "sol-r0-4242.summary.json")
    ops = doc["ops"]
    # The directory has dgemv_ that the single rank-0 process lacks, and sgemm_ calls on openblas
    # too: the same op, run in two places.
    assert {r["symbol"] for r in ops["only_a"]} == {"dgemv_"}
    assert ops["only_b"] == []
    sg = next(r for r in ops["common"] if r["symbol"] == "sgemm_")
    assert (sg["calls_a"], sg["calls_b"], sg["calls_delta"]) == (54, 20, -34)
    assert (sg["backend_a"], sg["backend_b"]) == ("native+openblas", "native")


ONE_TIME = DATA / "one-time"
REF, OCL = ONE_TIME / "sol-1000.summary.json", ONE_TIME / "sol-2000.summary.json"


def test_one_time_work_is_set_apart_and_rows_rank_by_steady_state():
    """B's first sdot compiled its kernel (52 ms of its 52.3): in steady state its 20 calls take
    300 us (the other 19 at 15 us each), so dgemm_'s +1 ms ranks first; --rank total ranks by what
    the calls took. A side whose every call did one-time work has no steady state."""
    doc = sol_json("diff", REF, OCL)
    assert doc["rank"] == "steady"
    common = doc["ops"]["common"]
    assert [r["symbol"] for r in common] == ["dgemm_", "cblas_sdot", "saxpy_"]
    sdot = common[1]
    assert (sdot["one_time_calls_b"], sdot["one_time_ns_b"], sdot["one_time_b"]) == (1, 52000000, "kernel compile")
    assert (sdot["steady_ns_a"], sdot["steady_ns_b"], sdot["total_ns_b"], sdot["one_time_a"]) == (20000, 300000,
                                                                                                   52285000, "")
    saxpy = common[2]
    assert (saxpy["steady_ns_b"], saxpy["steady_ns_delta"], saxpy["one_time_b"]) == (
        None, None, "backend start, kernel compile")
    assert [r["symbol"] for r in sol_json("diff", REF, OCL, "--rank", "total")["ops"]["common"]][0] == "cblas_sdot"
    sites = doc["sites"]["common"]
    assert [s["symbol"] for s in sites] == ["dgemm_", "cblas_sdot", "saxpy_"] and sites[1]["one_time_ns_b"] == 52000000


def test_one_time_work_in_text():
    out = sol("diff", REF, OCL, check=0).stdout
    lines = out.splitlines()
    sdot = next(l for l in lines if "cblas_sdot" in l and "dot" in l.split())
    assert "B 52.00 ms kernel compile" in sdot and "300.0 us" in sdot and "+280.0 us" in sdot, out
    saxpy = next(l for l in lines if "saxpy_" in l and "axpy" in l.split())
    assert saxpy.split()[:8] == ["1", "1", "0", "10.0", "us", "-", "-", "-"], saxpy
    assert "one-time work: calls that also compiled or loaded a kernel" in out
    assert "-: every call did such work" in out
    # Site rows name their op, with the site under it.
    at = next(i for i, l in enumerate(lines) if l.endswith("  dot n=2"))
    assert lines[at + 1].strip() == "cblas_sdot < dot_loop < main"


def test_setup_calls_are_hidden_unless_asked(tmp_path):
    """The same rule and flag as sol report's."""
    for name, path in (("a", A), ("b", B)):
        doc = json.loads(path.read_text())
        doc["ops"].append({"api": "dnnl", "symbol": "dnnl_memory_create", "op": "dnnl_api", "dtype": "none",
                           "shape": "", "backend": "native", "calls": 3 if name == "a" else 5, "total_ns": 400,
                           "min_ns": 50, "max_ns": 200, "flops": 0, "bytes": 0})
        (tmp_path / ("sol-%s.summary.json" % name)).write_text(json.dumps(doc))
    a, b = tmp_path / "sol-a.summary.json", tmp_path / "sol-b.summary.json"
    p = sol("diff", a, b, "--format", "json", check=0)
    assert "dnnl_memory_create" not in p.stdout
    assert "set-up calls are not shown (A: 3, B: 5; --setup shows them)" in p.stderr
    shown = sol_json("diff", a, b, "--setup")["ops"]["common"]
    assert any(r["symbol"] == "dnnl_memory_create" for r in shown)
