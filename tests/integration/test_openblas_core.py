"""The openblas backend on an OpenBLAS that runs kernels below this CPU's level. OPENBLAS_CORETYPE=Prescott
stands in for the AVX-512 Xeons that Debian's OpenBLAS 0.3.21 does not recognise: SOL's calls must run
on a private instance of the same library with the kernels that fit the CPU, with the native library's
results, from many threads and in forked children too.

The expected kernels come from /proc/cpuinfo here, independently of common/cpu.cpp."""
import glob
import json
import math
import os
import re

import pytest

from conftest import PROGRAMS, PY_PROGRAMS, PYTHON, SOL, run, sol_lines

PRESCOTT = {"OPENBLAS_CORETYPE": "Prescott"}
LEVEL = {"Prescott": 1, "Sandybridge": 2, "Haswell": 3, "Zen": 3, "SkylakeX": 4, "Cooperlake": 4, "SapphireRapids": 4}

# One float32 GEMM big enough for OpenBLAS's blocked, threaded path; prints its sum and a sample.
SGEMM_SCRIPT = """
import numpy as np
rng = np.random.default_rng(7)
a, b = (rng.standard_normal((512, 512)).astype(np.float32) for _ in range(2))
c = a @ b
print(float(c.sum(dtype=np.float64)), *(float(x) for x in c.ravel()[::4099]))
"""


def cpu_level_and_best(openblas_version):
    """This CPU's level (LEVEL's scale) and the OPENBLAS_CORETYPE that fits it, from /proc/cpuinfo
    (whose flags the kernel clears for register states it does not save)."""
    info = open("/proc/cpuinfo").read()
    vendor = re.search(r"^vendor_id\s*:\s*(\S+)", info, re.M).group(1)
    flags = set(re.search(r"^flags\s*:(.*)$", info, re.M).group(1).split())
    if {"avx512f", "avx512bw", "avx512dq", "avx512vl"} <= flags:
        # OpenBLAS takes OPENBLAS_CORETYPE=Cooperlake only from 0.3.22 on
        return 4, "Cooperlake" if "avx512_bf16" in flags and openblas_version >= (0, 3, 22) else "SkylakeX"
    if {"avx2", "fma"} <= flags:
        return 3, "Zen" if vendor in ("AuthenticAMD", "HygonGenuine") else "Haswell"
    if "avx" in flags:
        return 2, "Sandybridge"
    return 1, "Prescott"


def device(stderr):
    """The openblas backend's device() as SOL_LOG=info prints it, or None."""
    for line in sol_lines(stderr):
        if line.startswith("sol: backend openblas: "):
            return line[len("sol: backend openblas: "):]
    return None


def kernels(dev):
    m = re.search(r", (\w+) kernels", dev or "")
    return m and m.group(1)


def numbers(text):
    return [float(t) for t in text.split()]


def close(a, b, rtol, atol):
    return len(a) == len(b) and all(math.isclose(x, y, rel_tol=rtol, abs_tol=atol) for x, y in zip(a, b))


def calls_on_openblas(trace_dir, symbol):
    """How many processes ran `symbol` on the openblas backend, from their trace summaries."""
    return sum(any(o["symbol"] == symbol and o["backend"] == "openblas" for o in json.load(open(p))["ops"])
               for p in glob.glob(os.path.join(trace_dir, "**", "sol-*.summary.json"), recursive=True))


def run_on_openblas(cmd, extra=None, **kw):
    return run(cmd, env={"SOL_BACKEND": "openblas", "SOL_LOG": "info", **(extra or {})}, **kw)


@pytest.fixture(scope="module")
def native_openblas():
    """The openblas backend's device() in a program linked to libblas.so.3, run as usual; skips the
    module when that library is not OpenBLAS."""
    r = run_on_openblas([str(PROGRAMS / "threads")])
    dev = device(r.stderr)
    if r.returncode != 0 or not dev or "the program's own instance" not in dev:
        pytest.skip("libblas.so.3 is not an OpenBLAS here: %s" % (dev or r.stderr[-500:]))
    return dev


@pytest.fixture(scope="module")
def best(native_openblas):
    m = re.match(r"OpenBLAS (\d+)\.(\d+)\.(\d+)", native_openblas)
    level, name = cpu_level_and_best(tuple(int(x) for x in m.groups()) if m else (0, 0, 0))
    if level <= LEVEL["Prescott"]:
        pytest.skip("this CPU is only SSE3-level: Prescott kernels are the best it has")
    return name


def test_kernels_fit_the_cpu_as_it_loads(native_openblas):
    # Detected by OpenBLAS or supplied by a private instance, SOL's kernels are this CPU's level.
    m = re.match(r"OpenBLAS (\d+)\.(\d+)\.(\d+)", native_openblas)
    level, _ = cpu_level_and_best(tuple(int(x) for x in m.groups()))
    assert LEVEL.get(kernels(native_openblas)) == level, native_openblas


def test_private_instance_stands_in_for_the_programs(best):
    r = run_on_openblas([str(PROGRAMS / "threads")], PRESCOTT)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]  # 8 threads' products, each checked
    dev = device(r.stderr)
    assert kernels(dev) == best, dev
    assert "private instance (the program's runs Prescott kernels)" in dev, dev
    assert "the program's own instance" not in dev, dev


def test_private_instance_when_sol_opens_openblas_itself(best):
    # no_native is linked to libsol only: the backend opens libopenblas.so.0 itself.
    r = run_on_openblas([str(PROGRAMS / "no_native")], PRESCOTT, preload=False)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "sgemm 23 34 31 46\ncblas_dgemm 19 22 43 50\n"
    dev = device(r.stderr)
    assert kernels(dev) == best, dev
    assert "private instance (loaded as usual, it runs Prescott kernels)" in dev, dev


def test_sol_backends_names_the_kernels(best):
    out = run([SOL, "backends"], preload=False, env=PRESCOTT).stdout
    line = next((l for l in out.splitlines() if l.startswith("openblas ")), "")
    assert "available" in line and ", %s kernels," % best in line and "private instance" in line, out


def test_sgemm_results_equal_the_native_librarys(best, tmp_path):
    cmd = [PYTHON, "-c", SGEMM_SCRIPT]
    native = run(cmd, preload=False, env=PRESCOTT)
    assert native.returncode == 0, native.stderr[-3000:]
    r = run_on_openblas(cmd, {**PRESCOTT, "SOL_TRACE": "1", "SOL_TRACE_DIR": str(tmp_path)})
    assert r.returncode == 0, r.stderr[-3000:]
    assert kernels(device(r.stderr)) == best, r.stderr
    assert calls_on_openblas(str(tmp_path), "cblas_sgemm") == 1
    # Other kernels sum in another order: float32 rounding differs, not the result
    assert close(numbers(r.stdout), numbers(native.stdout), 1e-4, 1e-3), (r.stdout, native.stdout)


# The process's threads just after NumPy's import, which started the program's OpenBLAS pool and
# made a call that set the private instance up (NumPy checks its BLAS with an SDOT), and after a
# GEMM large enough for two threads; then that GEMM's sum.
POOL_SCRIPT = """
import os
import numpy as np
after_import = len(os.listdir("/proc/self/task"))
rng = np.random.default_rng(3)
a, b = (rng.standard_normal((512, 512)).astype(np.float32) for _ in range(2))
c = a @ b
print(after_import, len(os.listdir("/proc/self/task")), "%.6e" % float(c.sum(dtype=np.float64)))
"""


def test_private_instance_starts_its_pool_on_its_first_threaded_call(best):
    """The private instance's constructor starts its worker threads, which spin for 0.1-0.2 s
    waiting for work; SOL stops them until a call needs them, so a set-up on a program's first calls
    leaves no core busy beside the program's own pool (the race that followed a set-up ran oneDNN's
    team at a thousandth of its speed)."""
    env = {**PRESCOTT, "OPENBLAS_NUM_THREADS": "2"}  # one worker per pool
    native = run([PYTHON, "-c", POOL_SCRIPT], preload=False, env=env)
    assert native.returncode == 0, native.stderr[-3000:]
    r = run_on_openblas([PYTHON, "-c", POOL_SCRIPT], env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert kernels(device(r.stderr)) == best, r.stderr
    after_import, after_threaded, total = numbers(r.stdout)
    # The call that set it up ran on one thread; the 512^3 SGEMM started its one worker.
    assert after_threaded == after_import + 1, r.stdout
    assert math.isclose(total, numbers(native.stdout)[2], rel_tol=1e-4, abs_tol=1e-2), (r.stdout, native.stdout)


def test_forked_children_use_the_private_instance(best, tmp_path):
    """The parent's threaded GEMMs start the private instance's thread pool; forked workers then
    call it. fork() does not run the handlers OpenBLAS registered in its namespace's libc, so
    without SOL's own the workers would wait forever for threads fork did not copy."""
    cmd = [PYTHON, str(PY_PROGRAMS / "numpy_fork_float32.py")]
    native = run(cmd, preload=False, cwd=PY_PROGRAMS, env=PRESCOTT)
    r = run_on_openblas(cmd, {**PRESCOTT, "SOL_TRACE": "1", "SOL_TRACE_DIR": str(tmp_path)}, cwd=PY_PROGRAMS,
                        timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert kernels(device(r.stderr)) == best, r.stderr
    assert close([float(x) for l in r.stdout.splitlines() for x in l.split()[1:]],
                 [float(x) for l in native.stdout.splitlines() for x in l.split()[1:]], 2e-3, 2e-3), \
        (r.stdout, native.stdout)
    assert calls_on_openblas(str(tmp_path), "cblas_sgemm") >= 2  # the parent and its workers
