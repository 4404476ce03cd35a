"""Trust boundaries: a sol.toml in the current directory cannot make SOL load code; files and
directories other users can write are refused; secure-execution processes read nothing; trace and
verify files never follow a planted link.

A marker library (built here: its constructor appends to a file) stands for code someone planted.
"""
import os
import shutil
import stat
import subprocess
import textwrap

import pytest

from conftest import LIBSOL, PROGRAMS, REFERENCE_BLAS_DIR, SOL, run, sol_lines

SDOT = str(PROGRAMS / "sdot")
THREADS = str(PROGRAMS / "threads")  # sgemm_ up to 48x48x48: under auto with the reference BLAS
                                     # as native, these go to the openblas backend
CODE_KEYS = ("backends.openblas.library", "backends.onednn.library", "backends.opencl.cache_dir")


def cc(args):
    r = subprocess.run(["cc"] + args, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


@pytest.fixture
def marker(tmp_path_factory):
    """(library, mark file): loading the library appends a line to the mark file."""
    d = tmp_path_factory.mktemp("marker")
    src, lib, mark = d / "mark.c", d / "libmark.so", d / "mark"
    src.write_text(textwrap.dedent("""\
        #include <stdio.h>
        __attribute__((constructor)) static void mark(void) {
          FILE* f = fopen(MARK, "a");
          if (f) { fputs("loaded\\n", f); fclose(f); }
        }
        """))
    cc(["-shared", "-fPIC", "-o", str(lib), '-DMARK="%s"' % mark, str(src)])
    return lib, mark


@pytest.fixture
def project(tmp_path, marker):
    """A directory as a cloned repository would be, its sol.toml naming the marker everywhere code
    is loaded from, and an empty home."""
    lib, _ = marker
    proj, home = tmp_path / "project", tmp_path / "home"
    proj.mkdir()
    home.mkdir()
    (proj / "sol.toml").write_text(textwrap.dedent("""\
        log = "info"
        [backends.openblas]
        library = "%s"
        [backends.onednn]
        library = "%s"
        [backends.opencl]
        cache_dir = "%s"
        """ % (lib, lib, tmp_path / "planted-cache")))
    return proj, {"HOME": str(home), "LD_LIBRARY_PATH": REFERENCE_BLAS_DIR}


def ignored_lines(stderr):
    return [l for l in sol_lines(stderr) if " is ignored: a sol.toml in the current directory" in l]


def check_one_line_per_key(stderr):
    lines = ignored_lines(stderr)
    assert len(lines) == len(CODE_KEYS), stderr
    for key in CODE_KEYS:
        (line,) = [l for l in lines if " %s is ignored" % key in l]
        assert line.startswith("sol: sol.toml:"), line
        assert "SOL_CONFIG=./sol.toml" in line and "~/.config/sol/sol.toml" in line, line


@pytest.mark.parametrize("how", ["sol backends", "sol config", "openblas", "auto"])
def test_the_current_directorys_file_loads_no_code(how, project, marker):
    proj, env = project
    _, mark = marker
    if how.startswith("sol "):
        r = run([SOL, how.split()[1]], env=env, cwd=proj, preload=False)
    else:
        r = run([THREADS], env=dict(env, SOL_BACKEND=how), cwd=proj)
        assert r.returncode == 0 and "wrong=0" in r.stdout, r.stdout + r.stderr
    assert not mark.exists(), r.stderr
    check_one_line_per_key(r.stderr)
    if how == "sol config":
        out = {l.split("=")[0].strip(): l for l in r.stdout.splitlines() if not l.startswith("#")}
        for key in CODE_KEYS:
            assert "# default; not taken: sol.toml:" in out[key], out[key]
            assert "is in the current directory, not trusted" in out[key], out[key]
        assert '"info"' in out["log"] and "sol.toml:1:7" in out["log"]  # other keys still apply
        assert "trusted keys are not taken from it" in r.stdout.splitlines()[1]


@pytest.mark.parametrize("how", ["SOL_CONFIG", "sol run --config"])
def test_a_file_named_explicitly_is_followed(how, project, marker):
    """The same file, named by the user: the marker is loaded. (This is also what shows that the
    test above would see a library being loaded.)"""
    proj, env = project
    _, mark = marker
    if how == "SOL_CONFIG":
        r = run([THREADS], env=dict(env, SOL_BACKEND="openblas", SOL_CONFIG="./sol.toml"), cwd=proj)
    else:
        r = run([SOL, "run", "--backend", "auto", "--config", "sol.toml", "--", THREADS], env=env, cwd=proj,
                preload=False)
    assert r.returncode == 0 and "wrong=0" in r.stdout, r.stdout + r.stderr
    assert mark.read_text().startswith("loaded"), r.stderr
    assert ignored_lines(r.stderr) == []


def test_the_users_own_file_is_followed(project, marker):
    proj, env = project
    _, mark = marker
    user = os.path.join(env["HOME"], ".config", "sol")
    os.makedirs(user)
    shutil.move(str(proj / "sol.toml"), user)
    r = run([THREADS], env=dict(env, SOL_BACKEND="openblas"), cwd=proj)
    assert r.returncode == 0 and "wrong=0" in r.stdout, r.stdout + r.stderr
    assert mark.exists(), r.stderr


def test_a_config_file_others_can_write_is_not_read(project, marker):
    proj, env = project
    _, mark = marker
    config = proj / "sol.toml"
    os.chmod(config, 0o666)
    r = run([THREADS], env=dict(env, SOL_BACKEND="openblas", SOL_CONFIG=str(config)), cwd=proj)
    assert r.returncode == 0 and "wrong=0" in r.stdout, r.stdout + r.stderr
    assert not mark.exists()
    assert sol_lines(r.stderr) == ["sol: config file %s is not used: %s is writable by group or others "
                                   "(only you or root may be able to change it); using defaults" % (config, config)]


def test_a_config_directory_others_can_write_is_not_read(project, marker):
    proj, env = project
    _, mark = marker
    user = os.path.join(env["HOME"], ".config", "sol")
    os.makedirs(user)
    shutil.move(str(proj / "sol.toml"), user)
    os.chmod(user, 0o777)
    r = run([THREADS], env=dict(env, SOL_BACKEND="openblas"), cwd=proj)
    assert r.returncode == 0 and "wrong=0" in r.stdout, r.stdout + r.stderr
    assert not mark.exists()
    lines = sol_lines(r.stderr)
    assert len(lines) == 1 and ("is not used: %s is writable by group or others" % user) in lines[0], r.stderr


def test_a_library_others_can_write_is_not_loaded(tmp_path, marker):
    lib, mark = marker
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    planted = shared / "libmark.so"
    shutil.copy(lib, planted)
    config = tmp_path / "sol.toml"
    config.write_text('[backends.openblas]\nlibrary = "%s"\n' % planted)
    r = run([THREADS], env={"SOL_BACKEND": "openblas", "SOL_CONFIG": str(config), "HOME": str(tmp_path),
                            "LD_LIBRARY_PATH": REFERENCE_BLAS_DIR})
    assert r.returncode == 0 and "wrong=0" in r.stdout, r.stdout + r.stderr
    assert not mark.exists()
    assert ("sol: %s is not loaded: %s is writable by group or others" % (planted, shared)) in sol_lines(r.stderr)


def test_a_cache_directory_others_can_write_is_not_used(tmp_path):
    """Under auto, a process whose own BLAS is an optimized one (the system's OpenBLAS here) asks
    the cache whether an accelerator is here."""
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    config = tmp_path / "sol.toml"
    config.write_text('[backends.opencl]\ncache_dir = "%s"\n' % (shared / "cache"))
    r = run([THREADS], env={"SOL_CONFIG": str(config), "HOME": str(tmp_path)})
    assert r.returncode == 0 and "wrong=0" in r.stdout, r.stdout + r.stderr
    lines = sol_lines(r.stderr)
    assert len(lines) == 1, r.stderr
    assert ("opencl: cache directory %s is not used (%s is writable by group or others)" % (shared / "cache", shared)
            in lines[0]), lines[0]
    assert not (shared / "cache").exists()


def test_a_cache_directory_is_created_private(tmp_path):
    cache = tmp_path / "home" / ".cache" / "sol" / "opencl"
    r = run([THREADS], env={"HOME": str(tmp_path / "home")})
    assert r.returncode == 0 and "wrong=0" in r.stdout, r.stdout + r.stderr
    if not cache.exists():
        pytest.skip("no OpenCL platform here: auto keeps nothing in the cache")
    for d in (tmp_path / "home" / ".cache", cache):
        assert stat.S_IMODE(os.stat(d).st_mode) == 0o700, d
    files = list(cache.iterdir())
    assert files
    for f in files:
        assert stat.S_IMODE(os.stat(f).st_mode) == 0o600, f


# Where a planted link sits, and what the program is doing: tracing sdot, or verifying threads'
# sgemm_ against a wrong library (so that mismatches are written).
PLANTED = {
    "trace.json": "trace", "trace.json.part": "trace", "summary.json": "trace", "summary.txt": "trace",
    "folded": "trace", "graph.dot": "trace", "verify.jsonl": "verify",
    "graph.jsonl": "graph", "graph.jsonl.part": "graph", "graph.data": "graph",
}


@pytest.mark.parametrize("name", sorted(PLANTED))
def test_a_link_planted_where_a_trace_file_goes_is_not_followed(name, tmp_path):
    traces = tmp_path / "traces"
    traces.mkdir()
    os.chmod(traces, 0o1777)  # a shared trace directory, as /tmp is
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    env = {"HOME": str(tmp_path), "SOL_TRACE_DIR": str(traces)}
    where = traces  # where the file goes: a trace file in its run's directory (named here)
    if PLANTED[name] in ("trace", "graph"):
        program, env = SDOT, dict(env, SOL_TRACE="1", SOL_TRACE_DATA="1", SOL_TRACE_RUN="t1")
        where = traces / "run-t1"
        where.mkdir()
    else:
        config = tmp_path / "sol.toml"
        config.write_text('backend = "openblas"\n[backends.openblas]\nlibrary = "%s"\n'
                          % (PROGRAMS / "libwrong_blas.so"))
        program = THREADS
        env = dict(env, SOL_CONFIG=str(config), SOL_VERIFY="1", LD_LIBRARY_PATH=REFERENCE_BLAS_DIR)
    # exec keeps the shell's pid, so the link has the name the process will use.
    r = run(["sh", "-c", 'ln -s "$0" "$1/sol-$$.%s" && exec "$2"' % name, str(victim), str(where), program],
            env=env)
    assert "sdot=32" in r.stdout if program == SDOT else "wrong=480" in r.stdout, r.stdout + r.stderr
    assert victim.read_text() == "precious\n"
    lines = sol_lines(r.stderr)
    if name.startswith("trace.json"):
        expect = "is a symbolic link; SOL does not write through one); tracing is off, the program runs on"
    elif name == "graph.data":
        expect = "is a symbolic link; SOL does not write through one); the graph goes on without it"
    elif PLANTED[name] == "graph":
        expect = "is a symbolic link; SOL does not write through one); the trace goes on without it"
    elif PLANTED[name] == "trace":
        expect = "could not write every trace file in %s" % where
    else:
        expect = "is a symbolic link; SOL does not write through one); mismatches are only counted"
    assert any(expect in l for l in lines), r.stderr
    if name != "trace.json" and name != "trace.json.part" and PLANTED[name] in ("trace", "graph"):
        (trace,) = where.glob("sol-*.trace.json")
        assert stat.S_IMODE(trace.lstat().st_mode) == 0o600  # it holds the command line


def test_a_run_directory_that_is_not_ours_is_refused(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    traces = tmp_path / "traces"
    traces.mkdir()
    os.symlink(elsewhere, traces / "run-t2")
    r = run([SDOT], env={"SOL_TRACE": "1", "SOL_TRACE_DIR": str(traces), "SOL_TRACE_RUN": "t2"})
    assert "sdot=32" in r.stdout, r.stderr
    assert any("not a directory of yours" in l and "tracing is off" in l for l in sol_lines(r.stderr)), r.stderr
    assert list(elsewhere.iterdir()) == []


def test_trace_files_are_private(tmp_path):
    r = run([SDOT], env={"SOL_TRACE": "1", "SOL_TRACE_DIR": str(tmp_path)})
    assert r.returncode == 0, r.stderr
    files = list(tmp_path.glob("run-*/sol-*"))
    assert len(files) == 6, files  # trace.json, summary.json and .txt, folded, graph.dot and .jsonl
    for f in files:
        assert stat.S_IMODE(f.stat().st_mode) == 0o600, f


PROBE = r"""
#define _GNU_SOURCE
#include <link.h>
#include <stdio.h>
#include <string.h>
#include <sys/auxv.h>
float sdot_(const int*, const float*, const int*, const float*, const int*);
static int find(struct dl_phdr_info* info, size_t size, void* found) {
  (void)size;
  if (strstr(info->dlpi_name, "libsol")) *(int*)found = 1;
  return 0;
}
int main(void) {
  int libsol = 0;
  dl_iterate_phdr(find, &libsol);
  const int n = 3, inc = 1;
  const float x[3] = {1, 2, 3}, y[3] = {4, 5, 6};
  printf("secure=%lu libsol=%d sdot=%g\n", getauxval(AT_SECURE), libsol, sdot_(&n, x, &inc, y, &inc));
  return 0;
}
"""


def test_secure_execution_reads_no_sol_variable(tmp_path):
    """A set-user-ID program (root running a copy owned by nobody: AT_SECURE) with libsol preloaded
    the only way the loader allows there: by name, from a system directory, set-user-ID itself."""
    if os.geteuid() != 0:
        pytest.skip("needs root to make a set-user-ID program and put libsol in a system directory; "
                    "config_trust_test checks the decision (Trust.SecureExecutionReadsNothing)")
    libdir = "/usr/lib/x86_64-linux-gnu"
    if not os.path.isdir(libdir):
        pytest.skip("no %s to preload libsol from in secure mode" % libdir)
    probe = tmp_path / "probe"
    (tmp_path / "probe.c").write_text(PROBE)
    cc(["-o", str(probe), str(tmp_path / "probe.c"), "-lblas"])
    setuid = tmp_path / "probe-setuid"
    shutil.copy(probe, setuid)
    os.chown(setuid, 65534, 65534)
    os.chmod(setuid, 0o4755)
    preloaded = os.path.join(libdir, "libsol-trust-test-%d.so" % os.getpid())
    # What libsol would do with these if it read them: stop the program with status 78.
    bad = {"SOL_BACKEND": "bogus", "SOL_STRICT": "1", "SOL_LOG": "debug", "HOME": str(tmp_path)}
    try:
        shutil.copy(LIBSOL, preloaded)
        os.chmod(preloaded, 0o4755)
        plain = subprocess.run([str(probe)], env=dict(bad, LD_PRELOAD=os.path.basename(preloaded)),
                               capture_output=True, text=True)
        secure = subprocess.run([str(setuid)], env=dict(bad, LD_PRELOAD=os.path.basename(preloaded)),
                                capture_output=True, text=True)
    finally:
        os.unlink(preloaded)
    assert plain.returncode == 78, plain.stdout + plain.stderr  # the same libsol reads them normally
    if not secure.stdout.startswith("secure=1"):
        pytest.skip("the set-user-ID copy did not run in secure mode here (%s)" % (secure.stdout or secure.stderr))
    assert secure.stdout == "secure=1 libsol=1 sdot=32\n", secure.stderr
    assert secure.returncode == 0 and sol_lines(secure.stderr) == [], secure.stderr
