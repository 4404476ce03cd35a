#!/usr/bin/env python3
"""pip's NumPy under libsol: a 1024x1024 float32 matmul (scipy_cblas_sgemm64_ into the wheel's own
OpenBLAS) under auto, against the same without libsol.

    bench/pip_matmul.py BUILD_DIR [--python VENV_PYTHON] [--rounds N]

Alternating processes, each timing its best of 20 matmuls after a warm-up; the ratio is of the
medians over the rounds. auto's profile goes to a directory of its own, shared by the runs under
libsol: the first one measures the class (its row says so), the later ones route by the profile,
as a user's later runs do. The venv is the one scripts/setup.sh makes.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile

WORK = r"""
import time, numpy as np
rng = np.random.default_rng(0)
a = rng.random((1024, 1024), dtype=np.float32)
b = rng.random((1024, 1024), dtype=np.float32)
for _ in range(3):
    a @ b
times = []
for _ in range(20):
    t0 = time.perf_counter()
    a @ b
    times.append(time.perf_counter() - t0)
print(min(times))
"""


def one(python, env):
    r = subprocess.run([python, "-c", WORK], env=env, capture_output=True, text=True, check=True)
    return float(r.stdout.split()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("build")
    deps = os.environ.get("SOL_TEST_DEPS") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "sol-test")
    ap.add_argument("--python", default=os.path.join(deps, "venv", "bin", "python"))
    ap.add_argument("--rounds", type=int, default=6)
    args = ap.parse_args()
    if not os.path.exists(args.python):
        print("pip_matmul: no venv python at %s (scripts/setup.sh makes it)" % args.python)
        return 0
    libsol = os.path.abspath(os.path.join(args.build, "libsol.so"))
    base = {k: v for k, v in os.environ.items() if not k.startswith("SOL_") and k != "LD_PRELOAD"}
    with tempfile.TemporaryDirectory(prefix="sol-bench-pip-") as cache:
        sol_env = dict(base, LD_PRELOAD=libsol, XDG_CACHE_HOME=cache)
        plain, sol = [], []
        first = one(args.python, sol_env)  # measures the class
        for _ in range(args.rounds):
            plain.append(one(args.python, base))
            sol.append(one(args.python, sol_env))
        route = subprocess.run([os.path.join(args.build, "sol"), "tune", "--show"], env=dict(base, XDG_CACHE_HOME=cache),
                               capture_output=True, text=True).stdout
    gflops = lambda s: 2 * 1024 ** 3 / s / 1e9
    p, s = statistics.median(plain), statistics.median(sol)
    print("pip NumPy 1024x1024 float32 matmul, best of 20 per process, median of %d alternating processes"
          % args.rounds)
    print("  without libsol  %8.2f ms  %6.1f GFLOP/s" % (p * 1e3, gflops(p)))
    print("  auto            %8.2f ms  %6.1f GFLOP/s  (first process, measuring: %.2f ms)" % (s * 1e3, gflops(s),
                                                                                             first * 1e3))
    print("  auto / without  %8.3f" % (s / p))
    rows = [l for l in route.splitlines() if l.strip().startswith("sgemm ") and "1024" in l]
    if rows:
        print("  profile: " + " ".join(rows[0].split()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
