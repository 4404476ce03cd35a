"""The sol command: sol run sets up the environment and preload; every command has the same --help
and the same kind of errors."""
import os
import re

from conftest import PROGRAMS, SOL, run, run_on_terminal, sol_lines


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
        (["run", "--backend", "cudaa", "--", "true"], 2, "unknown backend 'cudaa'"),
        (["run", "--frobnicate", "--", "true"], 2, "unknown option '--frobnicate'"),
        (["run", "--"], 2, "CMD is required"),
        (["run", "--config", "/nonexistent.toml", "--", "true"], 2, "/nonexistent.toml"),
        (["run", "--", "/nonexistent/program"], 127, "cannot run '/nonexistent/program'"),
        (["frobnicate"], 2, "unknown command 'frobnicate'"),
        ([], 2, "no command given"),
    ]
    for args, status, message in cases:
        r = run([SOL] + args, preload=False)
        assert r.returncode == status, (args, r.returncode, r.stderr)
        lines = sol_lines(r.stderr)
        assert len(lines) == 1 and message in lines[0], (args, r.stderr)


def test_run_passes_the_command_on_untouched():
    # Words that CLI11 would read as options, the end of options or a list, after "--" and without it.
    words = ["--help", "--", "--trace", "-x", "[a,b]", "{}", "%%", "run"]
    for head in (["--"], []):
        r = run([SOL, "run", *head, "printf", r"%s\n", *words], preload=False)
        assert (r.returncode, r.stdout.splitlines()) == (0, words), (head, r.stderr)


COMMANDS = ["run", "config", "report", "diff", "backends"]


def test_every_command_has_help():
    top = run([SOL, "--help"], preload=False)
    assert top.returncode == 0 and top.stdout.startswith("usage: sol ") and top.stderr == ""
    for command in COMMANDS:
        assert re.search(r"^  %s +\S" % command, top.stdout, re.M), (command, top.stdout)
        for flag in ("--help", "-h"):
            r = run([SOL, command, flag], preload=False)
            assert (r.returncode, r.stderr) == (0, ""), (command, r.stderr)
            assert r.stdout.startswith("usage: sol %s " % command), r.stdout


def test_help_names_the_example_configuration_with_its_path():
    top = " ".join(run([SOL, "--help"], preload=False).stdout.split())
    path = re.search(r"(\S*config/sol\.example\.toml)", top).group(1)
    assert os.path.isfile(path), top  # in this build, the source tree's


def test_version():
    r = run([SOL, "--version"], preload=False)
    assert r.returncode == 0 and re.fullmatch(r"sol \d+\.\d+\.\d+\n", r.stdout), r.stdout


def test_usage_errors_are_one_line_and_status_2():
    cases = [(["--frobnicate"], "sol: unknown option '--frobnicate'")]
    cases += [([c, "--frobnicate"], "sol: %s: unknown option '--frobnicate'" % c) for c in COMMANDS]
    cases += [
        (["reprot"], "sol: unknown command 'reprot' (did you mean 'report'?)"),
        (["run", "--trce", "--", "true"], "sol: run: unknown option '--trce' (did you mean '--trace'?)"),
        (["config", "--kyes"], "sol: config: unknown option '--kyes' (did you mean '--keys'?)"),
        (["report", "x", "--fromat=json"], "sol: report: unknown option '--fromat' (did you mean '--format'?)"),
        (["report", "x", "--format", "jsn"], "(did you mean 'json'?)"),
        (["run", "--backend", "opencll", "--", "true"], "(did you mean 'opencl'?)"),
        (["report"], "sol: report: PATH is required"),
        (["report", "a", "b"], "sol: report: unexpected argument 'b'"),
        (["diff", "a"], "sol: diff: B is required"),
        (["backends", "x"], "sol: backends: unexpected argument 'x'"),
    ]
    for args, message in cases:
        r = run([SOL] + args, preload=False)
        assert (r.returncode, r.stdout) == (2, ""), (args, r.returncode, r.stderr)
        lines = r.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("sol: ") and message in lines[0], (args, r.stderr)


def test_sol_backends_wraps_long_lists_at_a_terminal():
    """At a terminal, OpenCL's routines and the DNN kinds wrap at its width, under the list they
    continue; into a pipe each list stays one line, for programs that read it."""
    status, out, _ = run_on_terminal([SOL, "backends"], 100, preload=False)
    assert status == 0, out
    lines = out.splitlines()
    listed = [(i, l) for i, l in enumerate(lines) if re.match(r"^ {13}(takes|and) ", l)]
    assert listed, out
    for i, line in listed:
        assert len(line) <= 100, line
        while i + 1 < len(lines) and lines[i + 1].startswith(" " * 15) and not lines[i + 1][15].isspace():
            assert len(lines[i + 1]) <= 100, lines[i + 1]
            i += 1
    piped = run([SOL, "backends"], preload=False).stdout
    assert not any(l.startswith(" " * 15) and not l[15].isspace() for l in piped.splitlines()), piped
    if "opencl     available" in piped:
        assert re.search(r"^ {13}takes \d+ of \d+ BLAS routines: .{200,}$", piped, re.M), piped
        assert re.search(r"^opencl     available.*\n {13}takes .*\n {15}\S", out, re.M), out
