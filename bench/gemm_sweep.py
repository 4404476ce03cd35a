#!/usr/bin/env python3
"""GEMM sweep: sgemm_/dgemm_ from 8 to 4096 on each backend against the native library (the
system's libblas.so.3, OpenBLAS on Debian with libopenblas-dev), in one run.

    gemm_sweep.py BUILD_DIR [--quick] [--startup [--libsol PATH]]

Prints GFLOP/s per size and backend and each backend's time relative to native; checks that
auto never picks something more than 5 % slower than native. Runs alternate per size; the best
time per call of each is kept (see rounds()). The reference backend stops at 512, OpenCL (pocl on
a CPU) at 2048: above that they take minutes per call.

Then the first call of a process (--startup: that alone): how much longer a process's first
sgemm_ (n = 64) takes than its later ones, natively and on opencl with a cold cache (an empty
backends.opencl.cache_dir; pocl's own kernel cache as the machine has it) and a warm one (filled by
an earlier process), for a program that calls at once and for one that first works 0.3 s (a
Python program importing NumPy). Target: <= 20 ms on opencl with a warm cache after that work.
--libsol times another build's libsol.so (the one before a change) with this build's programs.
"""
import atexit
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
QUICK = "--quick" in sys.argv
STARTUP = "--startup" in sys.argv
LIBSOL = os.path.join(BUILD, "libsol.so")
if "--libsol" in sys.argv:
    LIBSOL = os.path.abspath(sys.argv[sys.argv.index("--libsol") + 1])
GEMM = os.path.join(BUILD, "bench", "bench_gemm")
SIZES = [8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096] if not QUICK else [8, 64, 512, 1024]
LIMITS = {"reference": 512, "opencl": 2048}
VARIANTS = ["native", "auto", "openblas", "onednn", "onednn-mm", "reference", "opencl"]
# onednn-mm: the onednn backend running GEMM as cached matmul primitives (backends.onednn.gemm).
_SCRATCH = tempfile.mkdtemp(prefix="sol-bench-")
atexit.register(shutil.rmtree, _SCRATCH, True)
MATMUL_CONFIG = os.path.join(_SCRATCH, "matmul.toml")
with open(MATMUL_CONFIG, "w") as f:
    f.write('[backends.onednn]\ngemm = "matmul"\n')


def env(variant):
    e = {k: v for k, v in os.environ.items() if not k.startswith("SOL_") and k != "LD_PRELOAD"}
    if variant == "onednn-mm":
        e.update(LD_PRELOAD=LIBSOL, SOL_BACKEND="onednn", SOL_CONFIG=MATMUL_CONFIG, SOL_LOG="error")
    elif variant != "native":
        e.update(LD_PRELOAD=LIBSOL, SOL_BACKEND=variant, SOL_LOG="error")
    return e


def measure(variant, dtype, n, budget):
    out = subprocess.run([GEMM, dtype, str(n), str(budget)], env=env(variant), capture_output=True, text=True,
                         check=True).stdout.split()
    return float(out[0])


# Native and auto (the same code once auto has kept a call native) are compared by the target:
# many short alternating runs, so that both see the same spells of this shared VM's noise (a vCPU
# taken away halves a two-thread GEMM for a second or more). The others get two longer runs.
def rounds(variant, n):
    if variant in ("native", "auto"):
        return (8, 0.1) if n <= 1024 else (3, 0.1)
    return (2, 0.3 if n < 2048 else 0.1)


STARTUP_WAITS = [0.0, 0.3]  # seconds of the program's own work before its first call
STARTUP_ROUNDS = 7
STARTUP_VARIANTS = ["native", "opencl, cold cache", "opencl, warm cache"]


def first_call_ms(variant, wait):
    """The process's first sgemm_ minus its best later one, in ms."""
    e = env("native" if variant == "native" else "opencl")
    if variant != "native":
        cache = tempfile.mkdtemp(dir=_SCRATCH) if "cold" in variant else os.path.join(_SCRATCH, "warm")
        config = os.path.join(_SCRATCH, os.path.basename(cache) + ".toml")
        with open(config, "w") as f:
            f.write('[backends.opencl]\ncache_dir = "%s"\n' % cache)
        e["SOL_CONFIG"] = config
    out = subprocess.run([GEMM, "s", "64", "0.05", "NN", str(wait)], env=e, capture_output=True, text=True,
                         check=True).stdout.split()
    return (float(out[2]) - float(out[0])) * 1e3


def startup():
    first_call_ms("opencl, warm cache", 0)  # fills the warm cache
    samples = {(v, w): [] for v in STARTUP_VARIANTS for w in STARTUP_WAITS}
    for _ in range(STARTUP_ROUNDS):  # alternating, so that the machine's load hits all alike
        for v in STARTUP_VARIANTS:
            for w in STARTUP_WAITS:
                samples[(v, w)].append(first_call_ms(v, w))
    print("first sgemm_ (n=64) of a process: ms more than a later call, median (min-max) of %d processes"
          % STARTUP_ROUNDS)
    print("%-20s" % "" + "".join("%26s" % ("calls at once" if w == 0 else "after %.1f s of work" % w)
                                 for w in STARTUP_WAITS))
    for v in STARTUP_VARIANTS:
        row = "%-20s" % v
        for w in STARTUP_WAITS:
            x = sorted(samples[(v, w)])
            row += "%26s" % ("%.1f (%.1f-%.1f)" % (statistics.median(x), x[0], x[-1]))
        print(row)
    warm = statistics.median(samples[("opencl, warm cache", STARTUP_WAITS[-1])])
    print("opencl, warm cache, after the program's work: %.1f ms (target <= 20): %s" % (warm, "PASS" if warm <= 20 else "FAIL"))


def main():
    if STARTUP:
        startup()
        return
    worst_auto = 0.0
    for dtype in ("s", "d"):
        print("%sgemm_  GFLOP/s (time relative to native)" % dtype)
        print("%6s" % "n" + "".join("%20s" % v for v in VARIANTS))
        for n in SIZES:
            best = {}
            for r in range(8):
                for v in VARIANTS:
                    if n > LIMITS.get(v, 1 << 30) or (v.startswith("onednn") and dtype == "d"):
                        continue
                    count, budget = rounds(v, n)
                    if r >= count:
                        continue
                    t = measure(v, dtype, n, budget)
                    best[v] = min(best.get(v, t), t)
            row = "%6d" % n
            for v in VARIANTS:
                if v not in best:
                    row += "%20s" % "-"
                    continue
                gflops = 2.0 * n ** 3 / best[v] * 1e-9
                row += "%12.2f (%5.2fx)" % (gflops, best[v] / best["native"])
            print(row)
            worst_auto = max(worst_auto, best["auto"] / best["native"])
    print("auto: at worst %.3fx native's time (target <= 1.05): %s" % (worst_auto, "PASS" if worst_auto <= 1.05 else "FAIL"))
    startup()


if __name__ == "__main__":
    main()
