"""Nothing can go missing: libsol's dynamic symbols against the specs, the reference BLAS,
cblas.h, oneDNN's header and what Debian's PyTorch imports."""
import re
import subprocess
import tomllib

import pytest

from conftest import LIBSOL, SOURCE

REFERENCE_BLAS = "/usr/lib/x86_64-linux-gnu/blas/libblas.so.3"
CBLAS_H = "/usr/include/x86_64-linux-gnu/cblas-netlib.h"
DNNL_H = "/usr/include/oneapi/dnnl/dnnl.h"
TORCH = "/usr/lib/x86_64-linux-gnu/libtorch_cpu.so.1.13"

# What the reference library exports that libsol must not define: the error handlers and helper
# the program may override (xerbla_, cblas_xerbla), LSAME, and the reference CBLAS's internal
# state (RowMajorStrg, CBLAS_CallFromC), which belong to whichever library implements CBLAS.
NOT_INTERCEPTED = {"xerbla_", "xerbla_array_", "lsame_", "cblas_xerbla", "RowMajorStrg", "CBLAS_CallFromC"}


def dynamic_symbols(path, defined=True):
    flag = "--defined-only" if defined else "--undefined-only"
    out = subprocess.run(["nm", "-D", flag, path], capture_output=True, text=True, check=True).stdout
    return {line.split()[-1].split("@")[0] for line in out.splitlines() if line.strip()}


@pytest.fixture(scope="module")
def exported():
    return dynamic_symbols(LIBSOL)


def spec_names():
    with open(SOURCE / "interpose" / "spec" / "blas.toml", "rb") as f:
        blas = tomllib.load(f)
    names = set()
    for entry in blas["routine"]:
        for n in entry["names"]:
            name = n.split(":")[0]
            names |= {name + "_", name, name.upper()}
            if "ret" in entry:
                names.add(name + "sub_")
            if entry.get("cblas", True):
                complex_ret = entry.get("ret") == "T" and n.split(":")[-1][0] in "cz"
                names.add("cblas_" + name + ("_sub" if complex_ret else ""))
    with open(SOURCE / "interpose" / "spec" / "dnnl.toml", "rb") as f:
        for fn in tomllib.load(f)["fn"]:
            names.add(re.search(r"(dnnl_\w+)\s*\(", fn["sig"]).group(1))
    return names


# Process hooks: a traced process that ends with _exit still writes its summaries
# (interpose/exit_hooks.cpp); SOL's SIGSEGV handler stays first (interpose/signal_hooks.cpp); a
# traced thread without Python names who started it (interpose/thread_hooks.cpp); memory given
# back is observed, and large blocks are SOL's own while the lazy executor serves them
# (interpose/alloc_hooks.cpp).
HOOKS = {"_exit", "_Exit", "sigaction", "signal", "pthread_create", "free", "realloc", "munmap",
         "malloc", "calloc", "posix_memalign", "aligned_alloc", "memalign", "valloc", "pvalloc",
         "malloc_usable_size"}


def test_exports_are_exactly_the_spec(exported):
    expected = spec_names() | HOOKS
    assert exported - expected == set(), "exported but not in the spec"
    assert expected - exported == set(), "in the spec but not exported"


def test_every_reference_blas_symbol_is_intercepted(exported):
    reference = dynamic_symbols(REFERENCE_BLAS)
    assert len(reference) > 300
    missing = reference - NOT_INTERCEPTED - exported
    assert missing == set()
    assert NOT_INTERCEPTED & exported == set()


def test_fortran_aliases(exported):
    for sym in (s for s in exported if s.endswith("_") and not s.endswith("sub_")):
        base = sym[:-1]
        assert base in exported and base.upper() in exported, sym


def test_every_cblas_prototype_is_intercepted(exported):
    with open(CBLAS_H) as f:
        declared = set(re.findall(r"\b(cblas_\w+)\s*\(", f.read()))
    assert len(declared) > 140
    assert declared - {"cblas_xerbla"} - exported == set()


def test_every_dnnl_function_is_intercepted(exported):
    with open(DNNL_H) as f:
        declared = set(re.findall(r"DNNL_API\s*\*?\s*(dnnl_\w+)\s*\(", f.read()))
    assert len(declared) > 150
    assert declared - exported == set()


def test_everything_pytorch_imports_from_onednn_is_intercepted(exported):
    try:
        imported = {s for s in dynamic_symbols(TORCH, defined=False) if s.startswith("dnnl_")}
    except (FileNotFoundError, subprocess.CalledProcessError):
        pytest.skip("python3-torch is not installed")
    assert len(imported) > 50
    assert imported - exported == set()
