"""The sol command: sol run sets up the environment and preload; its errors are clear."""
import os

from conftest import PROGRAMS, SOL, run, sol_lines


def test_run_preloads_libsol_and_sets_options(tmp_path):
    r = run([SOL, "run", "--backend", "native", "--config", "/dev/null", "--",
             "bash", "-c", "echo $LD_PRELOAD; echo $SOL_BACKEND; echo $SOL_CONFIG"], preload=False)
    assert r.returncode == 0, r.stderr
    preload, backend, config = r.stdout.split("\n")[:3]
    assert preload.endswith("libsol.so") and os.path.exists(preload)
    assert (backend, config) == ("native", "/dev/null")


def test_run_forwards_the_exit_status_and_output():
    r = run([SOL, "run", "--", str(PROGRAMS / "sdot")], env={"SOL_LOG": "debug"}, preload=False)
    assert (r.returncode, r.stdout) == (0, "sdot=32\n")
    assert "native sdot_:" in r.stderr
    assert run([SOL, "run", "bash", "-c", "exit 7"], preload=False).returncode == 7


def test_run_trace_dir_implies_trace():
    r = run([SOL, "run", "--trace-dir", "/tmp/x", "--", "bash", "-c", "echo $SOL_TRACE $SOL_TRACE_DIR"],
            preload=False)
    assert r.stdout.strip() == "1 /tmp/x"


def test_run_errors():
    cases = [
        (["run", "--backend", "cuda", "--", "true"], 2, "unknown backend 'cuda'"),
        (["run", "--frobnicate", "--", "true"], 2, "unknown option '--frobnicate'"),
        (["run", "--"], 2, "no command given"),
        (["run", "--config", "/nonexistent.toml", "--", "true"], 2, "/nonexistent.toml"),
        (["run", "--", "/nonexistent/program"], 127, "cannot run '/nonexistent/program'"),
        (["frobnicate"], 2, "unknown command 'frobnicate'"),
    ]
    for args, status, message in cases:
        r = run([SOL] + args, preload=False)
        assert r.returncode == status, (args, r.returncode, r.stderr)
        lines = sol_lines(r.stderr)
        assert len(lines) == 1 and message in lines[0], (args, r.stderr)
