"""What SOL cannot see, it says: one line for a library that holds BLAS code no call reaches
through a name SOL intercepts (pip's libtorch_cpu.so with its static MKL), and nothing for a
program whose libraries SOL does see.

The stand-in for libtorch_cpu.so is libstatic_blas_user.so: Debian's static OpenBLAS linked into a
library of its own, bound inside it (-Bsymbolic), as PyTorch's wheels link MKL."""
import os
import subprocess

import pytest

from conftest import PROGRAMS, PYTHON, SOL, run, sol_lines

UNSEEN = "that no call reaches through a name SOL intercepts"


def program(name):
    path = PROGRAMS / name
    if not path.exists():
        pytest.skip(name + " was not built (Debian's libopenblas-dev: scripts/setup.sh)")
    return str(path)


def unseen_lines(stderr):
    return [l for l in sol_lines(stderr) if UNSEEN in l]


def test_a_library_calling_its_own_blas_gets_one_line():
    exe = program("own_code_with_blas")
    plain = run([exe], preload=False)
    sol = run([exe])
    assert sol.returncode == 0 and sol.stdout == plain.stdout, sol.stderr
    lines = unseen_lines(sol.stderr)
    assert len(lines) == 1, sol.stderr
    assert "libstatic_blas_user.so holds a BLAS" in lines[0]
    assert "python3-torch" in lines[0] and "CUDA build" in lines[0]  # what to do instead


def test_a_library_loaded_later_gets_its_line_once():
    """Loaded with dlopen after start-up (as Python loads extensions): seen at the next dlopen or at
    exit, and said once however often it is loaded again."""
    lib = PROGRAMS / "libstatic_blas_user.so"
    if not lib.exists():
        pytest.skip("libstatic_blas_user.so was not built")
    code = ("import ctypes, json\n"
            "lib = ctypes.CDLL(%r)\n"
            "lib.own_blas_product.restype = ctypes.c_double\n"
            "print(lib.own_blas_product(3))\n"
            "ctypes.CDLL(%r)\n" % (str(lib), str(lib)))
    plain = run([PYTHON, "-c", code], preload=False)
    sol = run([PYTHON, "-c", code])
    assert sol.returncode == 0 and sol.stdout == plain.stdout == "161.0\n", sol.stderr
    assert len(unseen_lines(sol.stderr)) == 1, sol.stderr


def test_programs_whose_calls_sol_sees_get_no_line():
    """A program using only its own code, a C program linked to libblas.so.3, and Debian's NumPy and
    PyTorch (libblas.so.3, libdnnl.so.2): no library out of sight."""
    assert sol_lines(run([program("own_code")]).stderr) == []
    assert unseen_lines(run([str(PROGRAMS / "sdot")]).stderr) == []
    code = "import numpy, torch; print((numpy.ones((64, 64)) @ numpy.ones((64, 64)))[0, 0], torch.ones(8).sum().item())"
    sol = run([PYTHON, "-c", code])
    if "No module named 'torch'" in sol.stderr:
        pytest.skip("python3-torch is not installed")
    assert sol.returncode == 0, sol.stderr
    assert unseen_lines(sol.stderr) == [], sol.stderr


def test_nothing_is_said_below_warn():
    sol = run([program("own_code_with_blas")], env={"SOL_LOG": "error"})
    assert sol.returncode == 0 and sol_lines(sol.stderr) == [], sol.stderr


def test_sol_backends_lists_each_librarys_names_per_family():
    lib = PROGRAMS / "libstatic_blas_user.so"
    shim = PROGRAMS / "libblas_shim_openblas64.so"
    if not lib.exists() or not shim.exists():
        pytest.skip("the test libraries were not built")
    r = subprocess.run([SOL, "backends", "--load", str(lib), "--load", str(shim)], capture_output=True, text=True,
                       env={k: v for k, v in os.environ.items() if not k.startswith("SOL_")}, timeout=300)
    assert r.returncode == 0, r.stderr
    section = r.stdout.split("BLAS names by family in this process's libraries")[1]
    listed = {l.strip().split(": ")[0]: l for l in section.splitlines() if l.startswith("  /")}
    assert "plain" in listed[str(lib)] and "BLAS code" in listed[str(lib)]
    assert "openblas64 " in listed[str(shim)] and "(64-bit)" in listed[str(shim)]
    missing = subprocess.run([SOL, "backends", "--load", "/nonexistent/libx.so"], capture_output=True, text=True,
                             timeout=300)
    assert missing.returncode == 1 and "sol: --load /nonexistent/libx.so:" in missing.stderr
