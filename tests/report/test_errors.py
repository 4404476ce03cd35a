"""Inputs and options sol report and sol diff refuse: exit status 2 and one `sol: ` line."""
import pytest
from conftest import DATA, assert_error, sol

ERR = DATA / "errors"


def test_missing_path(tmp_path):
    missing = tmp_path / "nope"
    assert_error(sol("report", missing), 2, str(missing), "no such file or directory")


def test_empty_dir(tmp_path):
    assert_error(sol("report", tmp_path), 2, str(tmp_path), "no sol-* trace files")


def test_dir_without_summary_or_trace(tmp_path):
    (tmp_path / "sol-4242.summary.txt").write_text("table\n")
    (tmp_path / "sol-4242.folded").write_text("main;sgemm_ 10\n")
    assert_error(sol("report", tmp_path), 2, "no sol-*.summary.json or sol-*.trace.json")


def test_dir_with_only_bad_files():
    p = sol("report", ERR / "allbad")
    assert p.returncode == 2
    assert [l for l in p.stderr.splitlines() if l.startswith("sol: warning: ")], p.stderr
    assert "none of its 1 processes could be read" in p.stderr.splitlines()[-1]


def test_truncated_summary():
    path = ERR / "corrupt.summary.json"
    assert_error(sol("report", path), 2, str(path), "not valid JSON")


@pytest.mark.parametrize("name", ["wrong-format.summary.json", "not-a-summary.json"])
def test_not_a_sol_summary(name):
    path = ERR / name
    assert_error(sol("report", path), 2, str(path), "not a SOL summary")


@pytest.mark.parametrize("args, words", [
    (["--frobnicate"], ["unknown option '--frobnicate'"]),
    (["--top", "abc"], ["--top: 'abc' is not a positive number"]),
    (["--top", "0"], ["--top: '0'"]),
    (["--top", "-1"], ["--top: '-1'"]),
    (["--top"], ["--top", "missing"]),
    (["--by", "file"], ["--by: 'file'"]),
    (["--format", "xml"], ["--format: 'xml'"]),
    (["--flamegraph="], ["--flamegraph", "missing"]),
    (["--perfetto="], ["--perfetto", "missing"]),
])
def test_bad_report_options(args, words):
    assert_error(sol("report", DATA / "survey", *args), 2, *words)


def test_report_needs_one_path():
    assert_error(sol("report"), 2, "PATH is required")
    assert_error(sol("report", DATA / "survey", DATA / "survey"), 2, "unexpected argument")


def test_diff_errors(tmp_path):
    good = DATA / "diff" / "sol-a.summary.json"
    assert_error(sol("diff", good), 2, "B is required")
    assert_error(sol("diff", good, tmp_path / "missing"), 2, str(tmp_path / "missing"))
    assert_error(sol("diff", ERR / "corrupt.summary.json", good), 2, "corrupt.summary.json")
    assert_error(sol("diff", good, good, "--by", "op"), 2, "unknown option '--by'")


def test_help():
    for verb in ("report", "diff"):
        p = sol(verb, "--help", check=0)
        assert p.stdout.startswith(f"usage: sol {verb}")
    assert "sol diff A B" in sol("report", "--help", check=0).stdout
