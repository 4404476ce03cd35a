"""Nothing can go missing: libsol's dynamic symbols against the specs, the reference BLAS,
cblas.h, oneDNN's header and what Debian's PyTorch imports."""
import os
import re
import subprocess
import tomllib

import pytest

from conftest import LIBSOL, SOURCE

REFERENCE_BLAS = "/usr/lib/x86_64-linux-gnu/blas/libblas.so.3"
ILP64_REFERENCE = "/usr/lib/x86_64-linux-gnu/blas64/libblas64.so.3"
ILP64_OPENBLAS = "/usr/lib/x86_64-linux-gnu/openblas64-pthread/libopenblas64.so.0"
CBLAS_H = "/usr/include/x86_64-linux-gnu/cblas-netlib.h"
DNNL_H = "/usr/include/oneapi/dnnl/dnnl.h"
TORCH = "/usr/lib/x86_64-linux-gnu/libtorch_cpu.so.1.13"
CUDNN_INCLUDE = "/usr/local/cuda/include"
CUDNN_LIB = "/usr/local/cuda/lib64/libcudnn.so.9"
# libsol has the cuDNN frontend where the build found cuDNN 9's headers (CMakeLists.txt).
CUDNN_BUILT = os.path.exists(os.path.join(CUDNN_INCLUDE, "cudnn_graph_v9.h"))

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


def blas_spec_names():
    """The BLAS and CBLAS names of every family, by family id."""
    with open(SOURCE / "interpose" / "spec" / "blas.toml", "rb") as f:
        blas = tomllib.load(f)
    by_family = {}
    for family in blas["family"]:
        names = by_family.setdefault(family["id"], set())
        for entry in blas["routine"]:
            for n in entry["names"]:
                name = n.split(":")[0]
                names.add(family["fortran"].replace("{}", name))
                if family.get("aliases"):
                    names |= {name, name.upper()}
                if "ret" in entry and family.get("shims"):
                    names.add(name + "sub_")
                if entry.get("cblas", True):
                    complex_ret = entry.get("ret") == "T" and n.split(":")[-1][0] in "cz"
                    names.add(family["c"].replace("{}", "cblas_" + name + ("_sub" if complex_ret else "")))
    return by_family


def spec_names():
    names = set().union(*blas_spec_names().values())
    with open(SOURCE / "interpose" / "spec" / "dnnl.toml", "rb") as f:
        for fn in tomllib.load(f)["fn"]:
            names.add(re.search(r"(dnnl_\w+)\s*\(", fn["sig"]).group(1))
    names |= cublas_spec_names()
    if CUDNN_BUILT:
        names |= cudnn_spec_names()
    return names


def cublas_spec_names():
    with open(SOURCE / "interpose" / "spec" / "cublas.toml", "rb") as f:
        return {re.search(r"(cublas\w+)\s*\(", fn["sig"]).group(1) for fn in tomllib.load(f)["fn"]}


def cudnn_spec_names():
    with open(SOURCE / "interpose" / "spec" / "cudnn.toml", "rb") as f:
        return {re.search(r"(cudnn\w+)\s*\(", fn["sig"]).group(1) for fn in tomllib.load(f)["fn"]}


# Process hooks: a traced process that ends with _exit still writes its summaries
# (interpose/exit_hooks.cpp); SOL's SIGSEGV handler stays first (interpose/signal_hooks.cpp); a
# traced thread without Python names who started it (interpose/thread_hooks.cpp); memory given
# back is observed, and large blocks are SOL's own while the lazy executor serves them
# (interpose/alloc_hooks.cpp).
HOOKS = {"_exit", "_Exit", "sigaction", "signal", "pthread_create", "free", "realloc", "munmap",
         "malloc", "calloc", "posix_memalign", "aligned_alloc", "memalign", "valloc", "pvalloc",
         "malloc_usable_size"}
# Where libraries appear: SOL looks for ones whose BLAS work it cannot see (interpose/sight.cpp).
HOOKS |= {"dlopen"}
# The system calls given memory the lazy executor may guard (interpose/syscall_hooks.cpp).
HOOKS |= {"read", "write", "pread", "pread64", "pwrite", "pwrite64", "readv", "writev", "preadv", "pwritev",
          "preadv2", "pwritev2", "send", "sendto", "sendmsg", "recv", "recvfrom", "recvmsg", "fread",
          "fwrite", "fread_unlocked", "fwrite_unlocked", "madvise", "mprotect"}
# Asked by SOL's own tune driver whether the class of its last call is still on trial.
HOOKS |= {"sol_tune_pending", "sol_tune_begin"}


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
    plain = blas_spec_names()["plain"]
    for sym in (s for s in exported & plain if s.endswith("_") and not s.endswith("sub_")):
        base = sym[:-1]
        assert base in exported and base.upper() in exported, sym


def test_every_family_names_every_routine(exported):
    """Each name family exports the same routines, Fortran and CBLAS, spelt its own way."""
    families = blas_spec_names()
    assert {"plain", "openblas64", "mkl64", "scipy", "scipy64"} <= families.keys()
    assert {"dgemm_64_", "cblas_dgemm64_", "dgemm_64", "cblas_dgemm_64", "scipy_dgemm_", "scipy_cblas_dgemm",
            "scipy_dgemm_64_", "scipy_cblas_dgemm64_", "scipy_cblas_cdotc_sub64_"} <= exported
    plain_fortran = {n for n in families["plain"] if n.endswith("_") and not n.endswith("sub_")}
    for family, names in families.items():
        assert names <= exported, family
        if family != "plain":
            fortran = {n for n in names if "cblas" not in n}
            assert len(fortran) == len(plain_fortran), family


def test_debian_ilp64_libraries_define_the_plain_names(exported):
    """Debian's ILP64 BLAS libraries (libblas64, openblas64) define the plain names: the ones
    libsol reads at 64 bits there."""
    plain = {n for n in blas_spec_names()["plain"] if n.endswith("_") or n.startswith("cblas_")}
    for path in (ILP64_REFERENCE, ILP64_OPENBLAS):
        if not os.path.exists(path):
            pytest.skip(path + " is not installed (scripts/setup.sh installs it)")
        defined = dynamic_symbols(path)
        assert {"dgemm_", "cblas_dgemm", "daxpy_", "cblas_idamax"} <= defined
        assert defined & plain <= exported


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


def test_cudnn_spec_matches_the_headers():
    """Every wrapped cuDNN function is declared by cuDNN 9 (the wrappers compile against the headers,
    which checks each signature), and the whole backend API and the handle calls are wrapped."""
    if not CUDNN_BUILT:
        pytest.skip("no cuDNN 9 headers")
    declared = set()
    for h in ("cudnn_graph_v9.h", "cudnn_ops_v9.h", "cudnn_cnn_v9.h", "cudnn_adv_v9.h"):
        with open(os.path.join(CUDNN_INCLUDE, h)) as f:
            declared |= set(re.findall(r"CUDNNWINAPI\s+(cudnn\w+)\s*\(", f.read()))
    spec = cudnn_spec_names()
    assert spec - declared == set()
    backend = {n for n in declared if n.startswith("cudnnBackend")}
    assert len(backend) >= 8
    assert backend | {"cudnnCreate", "cudnnDestroy", "cudnnSetStream", "cudnnGetStream"} <= spec


def test_cudnn_wrappers_resolve_in_the_real_library(exported):
    """What libsol wraps, the installed libcudnn.so.9 defines (the wrappers forward there)."""
    if not CUDNN_BUILT or not os.path.exists(CUDNN_LIB):
        pytest.skip("no libcudnn.so.9")
    defined = dynamic_symbols(CUDNN_LIB)
    wrapped = {s for s in exported if s.startswith("cudnn")}
    assert wrapped == cudnn_spec_names()
    assert wrapped - defined == set()
