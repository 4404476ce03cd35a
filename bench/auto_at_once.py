#!/usr/bin/env python3
"""auto for a program that calls at once (bench_at_once: a C program whose GEMM cells, 64/256/1024 x
NN/TN/NT, f32 and f64, 0.2 s each, begin at its first instruction, while the process's thread pools
still start): a fresh profile, one first run, then `--runs` later runs that route from the profile.

    auto_at_once.py BUILD_DIR [--prescott] [--runs N] [--seconds S] [--types sd]

Each later run is a round: every candidate forced (native, and each CPU backend) and auto routing
from the profile, one process each, in a rotating order, so that a drift of the machine's load hits
all alike. Per cell: auto / the round's fastest candidate, per round, how many rounds reach 0.9 of
it, and the median of auto / fastest and auto / native.
Targets (issue 42): >= 0.9 of the fastest in every cell in at least 4 of 5 processes, never more
than 5 % below native. Also the first run's total time against native's, the measuring's cost.
--prescott runs everything with OPENBLAS_CORETYPE=Prescott (a misdetected OpenBLAS).
"""
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

args = sys.argv[1:]
BUILD = os.path.abspath(args[0] if args and not args[0].startswith("-") else "build")


def opt(name, default):
    return type(default)(args[args.index(name) + 1]) if name in args else default


RUNS = opt("--runs", 5)
SECONDS = opt("--seconds", 0.2)
TYPES = opt("--types", "sd")
PRESCOTT = "--prescott" in args
LIBSOL = os.path.join(BUILD, "libsol.so")
PROGRAM = [os.path.join(BUILD, "bench", "bench_at_once"), str(SECONDS), TYPES]


def run(backend=None, cache=None, preload=True):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SOL_") and k != "LD_PRELOAD"}
    if PRESCOTT:
        env["OPENBLAS_CORETYPE"] = "Prescott"
    if preload:
        env["LD_PRELOAD"] = LIBSOL
        env["SOL_BACKEND"] = backend
        env["SOL_TUNE"] = "1" if backend == "auto" else "0"
        env["XDG_CACHE_HOME"] = cache or tempfile.mkdtemp(prefix="sol-at-once-")
    out = subprocess.run(PROGRAM, env=env, capture_output=True, text=True, check=True).stdout
    cells, total = {}, None
    for line in out.splitlines():
        f = line.split()
        if f[0] == "total":
            total = float(f[1])
        else:
            cells[" ".join(f[:3])] = float(f[3])
    return cells, total


def main():
    candidates = ["native", "onednn"] + (["openblas"] if PRESCOTT else [])
    # As detected, the openblas backend runs the program's own OpenBLAS: it is native.
    def forced(c):
        return run(preload=False)[0] if c == "native" else run(c)[0]

    cache = tempfile.mkdtemp(prefix="sol-at-once-profile-")
    try:
        native_total = statistics.median(run(preload=False)[1] for _ in range(3))
        first, first_total = run("auto", cache)
        # Rounds of one process each: every candidate forced, and auto routing from the profile, in
        # a rotating order, so that the machine's load drifting hits all alike; auto is compared with
        # the fastest candidate of its own round.
        rounds = []
        for r in range(RUNS):
            order = candidates + ["auto"]
            order = order[r % len(order):] + order[:r % len(order)]
            got = {c: (run("auto", cache)[0] if c == "auto" else forced(c)) for c in order}
            rounds.append(got)
    finally:
        shutil.rmtree(cache, True)

    print("OpenBLAS %s; %d rounds, each every candidate forced and auto from the first run's profile"
          % ("with Prescott kernels" if PRESCOTT else "as detected", RUNS))
    print("%-12s %8s %8s %8s  %-38s %6s %7s %7s" % ("cell", "fastest", "by", "native", "auto / round's fastest",
                                                   ">=0.9", "median", "/native"))
    cells = list(rounds[0]["native"])
    worst_count, worst_native = RUNS, 9.9
    for cell in cells:
        if any(min(r[c][cell] for c in candidates + ["auto"]) <= 0 for r in rounds):
            print("%-12s too few calls in %.2f s to rate (give --seconds more)" % (cell, SECONDS))
            continue
        fastest = [max(r[c][cell] for c in candidates) for r in rounds]
        by = max(candidates, key=lambda c: statistics.median(r[c][cell] for r in rounds))
        ratios = [r["auto"][cell] / f for r, f in zip(rounds, fastest)]
        to_native = statistics.median(r["auto"][cell] / r["native"][cell] for r in rounds)
        ok = sum(x >= 0.9 for x in ratios)
        worst_count, worst_native = min(worst_count, ok), min(worst_native, to_native)
        print("%-12s %8.1f %8s %8.1f  %-38s %3d/%d %7.3f %7.3f" % (
            cell, statistics.median(fastest), by, statistics.median(r["native"][cell] for r in rounds),
            " ".join("%.2f" % x for x in ratios), ok, RUNS, statistics.median(ratios), to_native))
    print("worst cell: %d of %d processes at >= 0.9 of the fastest (target: %d); median auto / native >= %.3f "
          "(target: 0.95)" % (worst_count, RUNS, max(1, RUNS - 1), worst_native))
    print("first run: %.2f s, native %.2f s (%.2fx)" % (first_total, native_total, first_total / native_total))


if __name__ == "__main__":
    main()
