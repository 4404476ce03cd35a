"""Names of stack frames that no dynamic symbol covers: a program's static and hidden functions,
named from its .symtab, from MiniDebugInfo (.gnu_debugdata) once stripped, and from a separate
debug file found by .gnu_debuglink (capture/trace/symbolize.cpp, through libdw), with the calls'
file:line where DWARF has them; without libdw, dladdr's names and one line."""
import ctypes
import shutil
import socket
import subprocess

import pytest

from conftest import LIBSOL, PROGRAMS, SOURCE, run, sol_lines
from test_trace import summary, traced

PROGRAM = PROGRAMS / "static_caller"
STATIC, HIDDEN = "sol_static_gemm", "sol_hidden_caller"


def libdw_missing():
    """Why frames cannot be named beyond dladdr here, or None."""
    try:
        ctypes.CDLL("libdw.so.1")
    except OSError as e:
        return f"libdw is not installed ({e})"
    with open(LIBSOL, "rb") as f:
        if b"dwfl_linux_proc_report" not in f.read():
            return "libsol was built without elfutils' headers (libdw-dev)"
    return None


@pytest.fixture
def libdw():
    why = libdw_missing()
    if why:
        pytest.skip(why)


def tool(*cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw).stdout


def symbols(path, dynamic=False):
    out = subprocess.run(["nm", "--defined-only"] + (["-D"] if dynamic else []) + [str(path)],
                         capture_output=True, text=True).stdout
    return {line.split()[-1] for line in out.splitlines() if line.strip()}


def gemm_site(program, tmp_path, env=None):
    """The traced program's sgemm_ site and its stderr."""
    plain = run([str(program)], preload=False)
    r, trace_dir = traced([str(program)], tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout == plain.stdout
    (site,) = [s for s in summary(trace_dir)["sites"] if s["symbol"] == "sgemm_"]
    assert len(site["sources"]) == len(site["frames"])
    return site, r.stderr


def gemm_frames(program, tmp_path, env=None):
    """The frames of the traced program's sgemm_ site, innermost first."""
    site, stderr = gemm_site(program, tmp_path, env)
    return site["frames"], stderr


def call_lines():
    """Where static_caller.c calls sgemm_ and sol_static_gemm: the lines its frames' sources name."""
    text = (SOURCE / "tests" / "programs" / "static_caller.c").read_text().splitlines()
    gemm = next(i for i, l in enumerate(text, 1) if "sgemm_(\"N\"" in l)
    static = next(i for i, l in enumerate(text, 1) if "return sol_static_gemm(n)" in l)
    return [f"static_caller.c:{gemm}", f"static_caller.c:{static}"]


def assert_named(frames, object_name):
    assert frames[0].startswith(f"{STATIC} ({object_name}+0x"), frames
    assert frames[1].startswith(f"{HIDDEN} ({object_name}+0x"), frames
    assert any(f.startswith(f"main ({object_name}+0x") for f in frames), frames


def test_static_functions_are_named_from_symtab(tmp_path, libdw):
    # The premise: only .symtab has the callers' names.
    assert {STATIC, HIDDEN} <= symbols(PROGRAM)
    assert not {STATIC, HIDDEN} & symbols(PROGRAM, dynamic=True)
    site, stderr = gemm_site(PROGRAM, tmp_path)
    assert_named(site["frames"], "static_caller")
    assert not [l for l in sol_lines(stderr) if "exported names only" in l]
    # Built with -g: the DWARF line table gives each frame's call.
    assert [s.rsplit("/", 1)[-1] for s in site["sources"][:2]] == call_lines(), site["sources"]


def stripped_copy(tmp_path, name):
    out = tmp_path / name
    shutil.copy(PROGRAM, out)
    tool("strip", "--strip-all", "-R", ".comment", str(out))
    assert not {STATIC, HIDDEN} & symbols(out)
    return out


def test_minidebuginfo_names_a_stripped_program(tmp_path, libdw):
    # gdb's recipe (Debugging with GDB, "MiniDebugInfo"): the function symbols that .dynsym lacks,
    # in an xz-compressed ELF file inside the stripped program's .gnu_debugdata section.
    work = tmp_path / "mini"
    work.mkdir()
    dynsyms = sorted(symbols(PROGRAM, dynamic=True))
    funcs = sorted(line.split()[0] for line in tool("nm", "--format=posix", "--defined-only", str(PROGRAM)).splitlines()
                   if line.split()[1] in ("T", "t"))
    (work / "keep").write_text("".join(s + "\n" for s in funcs if s not in dynsyms))
    tool("objcopy", "--only-keep-debug", str(PROGRAM), str(work / "debug"))
    tool("objcopy", "-S", "--remove-section", ".gdb_index", "--remove-section", ".comment",
         f"--keep-symbols={work / 'keep'}", str(work / "debug"), str(work / "mini_debuginfo"))
    tool("xz", "-k", str(work / "mini_debuginfo"))
    program = stripped_copy(tmp_path, "static_caller_mini")
    tool("objcopy", f"--add-section=.gnu_debugdata={work / 'mini_debuginfo.xz'}", str(program))
    site, _ = gemm_site(program, tmp_path)
    assert_named(site["frames"], "static_caller_mini")
    assert site["sources"][:3] == [None, None, None]  # names only: no DWARF in MiniDebugInfo


def test_debuglink_names_a_stripped_program(tmp_path, libdw):
    debug = tmp_path / "static_caller_linked.debug"
    tool("objcopy", "--only-keep-debug", str(PROGRAM), str(debug))
    program = stripped_copy(tmp_path, "static_caller_linked")
    # The build-id stays in the stripped file, but no /usr/lib/debug/.build-id entry exists for it:
    # only the link, to a file beside the program, can find the names.
    tool("objcopy", f"--add-gnu-debuglink={debug.name}", str(program), cwd=tmp_path)
    site, _ = gemm_site(program, tmp_path, env={"DEBUGINFOD_URLS": ""})
    assert_named(site["frames"], "static_caller_linked")
    assert [s.rsplit("/", 1)[-1] for s in site["sources"][:2]] == call_lines(), site["sources"]


def test_stripped_program_keeps_locations_and_asks_no_debuginfod_server(tmp_path, libdw):
    # A server on loopback stands for the distribution's: libdw would ask it for the debug file of
    # every module without one, at exit of every traced process. Frames keep object+offset.
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        server.setblocking(False)
        program = stripped_copy(tmp_path, "static_caller_bare")
        env = {"DEBUGINFOD_URLS": "http://127.0.0.1:%d" % server.getsockname()[1],
               "DEBUGINFOD_CACHE_PATH": str(tmp_path / "debuginfod-cache"), "DEBUGINFOD_TIMEOUT": "2"}
        frames, _ = gemm_frames(program, tmp_path, env=env)
        with pytest.raises(BlockingIOError):
            server.accept()
    own = [f for f in frames if "static_caller_bare+0x" in f]
    assert len(own) >= 3 and all(f.startswith("static_caller_bare+0x") for f in own), frames


def test_without_libdw_frames_keep_dladdr_names_and_one_line(tmp_path):
    hide = str(PROGRAMS / "libhide_libdw.so")
    site, stderr = gemm_site(PROGRAM, tmp_path, env={"LD_PRELOAD": f"{LIBSOL}:{hide}"})
    frames = site["frames"]
    assert site["sources"] == [None] * len(frames)
    own = [f for f in frames if "static_caller+0x" in f]
    assert len(own) >= 3 and all(f.startswith("static_caller+0x") for f in own), frames
    # libc's exported start-up function still has its name.
    assert any(f.startswith("__libc_start_main (libc.so.6+0x") for f in frames), frames
    if b"dwfl_linux_proc_report" in open(LIBSOL, "rb").read():
        lines = [l for l in sol_lines(stderr) if "exported names only" in l]
        assert len(lines) == 1 and "libdw.so.1" in lines[0], stderr
