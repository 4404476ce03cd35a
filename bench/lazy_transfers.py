#!/usr/bin/env python3
"""What lazy execution saves on a device backend, eager (SOL_LAZY=0) against lazy, in one run
(usage: lazy_transfers.py BUILD_DIR [--backend opencl] [--n 2048] [--steps 200] [--rounds 3]
[--only chain,iteration,no-reuse,lapack] [--quick]).

Three NumPy workloads and a LAPACK factorization, each run alternately eager and lazy (best of
--rounds each):

  chain      D = A @ B @ C @ ...: lazily each input goes to the device once and the result
             comes back once; eager moves every operand of every GEMM both ways.
  iteration  x = tanh(A @ x), x a vector, --steps times: lazily A goes up once and only x moves
             each step; eager moves A every step (target: >= 100x fewer bytes to the device).
  no-reuse   independent GEMMs whose results the host reads at once: nothing can be saved, so
             lazy must cost no more than eager (target: <= 5 % slower).
  lapack     the reference LAPACK's dpotrf of an n x n matrix (bench/lapack.c, Debian's
             liblapack3): every BLAS call a different block of the matrix, the host's work in
             between, so copies go unused and the matrix runs eagerly after a few (the Resident's
             turns); lazy must cost no more than eager (target: <= 5 % slower). Skipped without
             bench_lapack or the reference LAPACK.

Prints bytes to the device and back (the `sol: transfers:` line), wall time and CPU time (pocl
computes on the CPU: on a shared machine CPU time is the steadier figure), with ratios."""
import os
import re
import resource
import subprocess
import sys
import time

BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 and not sys.argv[1].startswith("--") else "build")


def arg(name, default):
    for i, a in enumerate(sys.argv):
        if a == name and i + 1 < len(sys.argv):
            return type(default)(sys.argv[i + 1])
    return default


QUICK = "--quick" in sys.argv
BACKEND = arg("--backend", "opencl")
N = arg("--n", 512 if QUICK else 2048)
STEPS = arg("--steps", 20 if QUICK else 200)
ROUNDS = arg("--rounds", 1 if QUICK else 3)
ONLY = arg("--only", "")  # a comma list of workloads
TRANSFERS = re.compile(r"^sol: transfers: (\d+) nodes, (\d+) flushes, (\d+) bytes to the device, (\d+) bytes back$", re.M)

PROGRAMS = {
    "chain": """
import numpy as np, sys
n = %(n)d
rng = np.random.default_rng(0)
ms = [rng.standard_normal((n, n)).astype(np.float32) / np.sqrt(n) for _ in range(6)]
d = ms[0]
for m in ms[1:]:
    d = d @ m
print(float(d[0, 0]))
""",
    "iteration": """
import numpy as np
n, steps = %(n)d, %(steps)d
rng = np.random.default_rng(0)
A = rng.standard_normal((n, n)).astype(np.float32) / np.sqrt(n)
x = rng.standard_normal(n).astype(np.float32)
for _ in range(steps):
    x = np.tanh(A @ x)
print(float(x[0]))
""",
    "no-reuse": """
import numpy as np
n = %(n)d // 2
rng = np.random.default_rng(0)
s = 0.0
for i in range(8):
    a = rng.standard_normal((n, n)).astype(np.float32)
    b = rng.standard_normal((n, n)).astype(np.float32)
    s += float((a @ b)[0, 0])  # fresh inputs, the result read at once
print(s)
""",
}


REFERENCE_LAPACK = "/usr/lib/x86_64-linux-gnu/lapack"
BENCH_LAPACK = os.path.join(BUILD, "bench", "bench_lapack")
WORKLOADS = list(PROGRAMS) + ["lapack"]  # the last a C program: command() and result()


def command(name):
    if name == "lapack":
        return [BENCH_LAPACK, "potrf", str(N)]
    return ["/usr/bin/python3", "-c", PROGRAMS[name] % {"n": N, "steps": STEPS}]


def result(name, stdout):
    """What must be the same eagerly and lazily: the output, or the factors' checksum (the
    program's line also carries its time)."""
    if name == "lapack":
        m = re.search(r" checksum=(\S+)", stdout)
        return m.group(1) if m else stdout
    return stdout


def once(name, lazy):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SOL_") and k != "LD_PRELOAD"}
    env.update(LD_PRELOAD=os.path.join(BUILD, "libsol.so"), SOL_BACKEND=BACKEND, SOL_LAZY=lazy, SOL_LOG="info")
    if name == "lapack":
        env["LD_LIBRARY_PATH"] = REFERENCE_LAPACK
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    r = subprocess.run(command(name), env=env, capture_output=True, text=True)
    dt = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if r.returncode != 0:
        sys.exit("%s (SOL_LAZY=%s) failed:\n%s" % (name, lazy, r.stderr))
    m = TRANSFERS.search(r.stderr)
    if not m:
        sys.exit("%s (SOL_LAZY=%s): no transfers line (did the device run it?)\n%s" % (name, lazy, r.stderr))
    return result(name, r.stdout), tuple(int(g) for g in m.groups()), dt, cpu


def main():
    print("lazy vs eager on %s, n = %d, %d iteration steps, best of %d (alternating)" % (BACKEND, N, STEPS, ROUNDS))
    print("%-10s %-6s %6s %8s %14s %14s %9s %9s" % ("workload", "mode", "nodes", "flushes", "bytes up", "bytes back",
                                                 "time s", "cpu s"))
    for name in WORKLOADS:
        if ONLY and name not in ONLY.split(","):
            continue
        if name == "lapack" and not (os.path.exists(BENCH_LAPACK) and
                                     os.path.exists(os.path.join(REFERENCE_LAPACK, "liblapack.so.3"))):
            print("%-10s skipped: no %s or reference LAPACK (liblapack3)" % (name, BENCH_LAPACK))
            continue
        best = {}
        for _ in range(ROUNDS):
            for lazy in ("0", "1"):
                out, tr, dt, cpu = once(name, lazy)
                if lazy not in best or dt < best[lazy][2]:
                    best[lazy] = (out, tr, dt, cpu)
        for lazy, label in (("0", "eager"), ("1", "lazy")):
            _, (nodes, flushes, up, back), dt, cpu = best[lazy]
            print("%-10s %-6s %6d %8d %14d %14d %9.3f %9.3f" % (name, label, nodes, flushes, up, back, dt, cpu))
        e, l = best["0"], best["1"]
        same = "identical" if e[0] == l[0] else "DIFFERENT RESULTS"
        print("%-10s ratio  bytes up %.1fx fewer, bytes back %.1fx fewer, time lazy/eager %.3f (cpu %.3f), results %s" % (
            name, e[1][2] / max(l[1][2], 1), e[1][3] / max(l[1][3], 1), l[2] / e[2], l[3] / e[3], same))


if __name__ == "__main__":
    main()
