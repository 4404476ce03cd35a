#!/usr/bin/env python3
"""What the primitive graph costs and what a replay adds (usage: replay_overhead.py BUILD_DIR [--quick]).

1. Replay's own overhead: the example CNN's training loop (examples/train.py) traced with its data,
   then its graph replayed on native (`sol replay --repeat N`, the fastest pass), against the
   program's own time in the same primitives (the traced calls' total in summary.json, the same
   nodes). Target: the replay within 10 % of the program's primitive time. Per node, what the
   replay added (or saved: a replay's nodes run back to back, with warm caches).
2. Capture's cost on the traced CNN loop without data: the loop in one process, tracing turned off
   and on between blocks of steps (bench/cnn_toggled.py, the method trace_overhead.py uses); the
   graph is written whenever tracing is on. Target: traced blocks <= 1.05x untraced ones. And the
   same with SOL_TRACE_DATA=1, for information (saving inputs reads every call's operands).

Both figures are ratios measured in one run; the machine may be shared and noisy.
"""
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
QUICK = "--quick" in sys.argv
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIBSOL = os.path.join(BUILD, "libsol.so")
SOL = os.path.join(BUILD, "sol")
PY = "/usr/bin/python3"


def env(**extra):
    e = {k: v for k, v in os.environ.items() if not k.startswith("SOL_") and k != "LD_PRELOAD"}
    e.update(extra)
    return e


def program_time(trace_dir):
    """The traced run's computing calls (oneDNN's set-up calls left out): their total ns; the same
    without each signature's slowest call, scaled back to its count of calls (the first call of a
    primitive pays for first touches, which a replay's fastest pass has behind it); and calls."""
    total = steady = calls = 0
    for path in glob.glob(os.path.join(trace_dir, "**", "sol-*.summary.json"), recursive=True):
        with open(path) as f:
            for o in json.load(f)["ops"]:
                if o["op"] in ("dnnl_api", "cublas_api", "cudnn_api") or o["backend"] == "invalid":
                    continue
                total += o["total_ns"]
                calls += o["calls"]
                n = o["calls"]
                steady += (o["total_ns"] - o["max_ns"]) * n / (n - 1) if n > 1 else o["total_ns"]
    return total, steady, calls


def replay_overhead():
    trace_dir = tempfile.mkdtemp(prefix="sol-bench-replay-")
    train = [PY, os.path.join(ROOT, "examples", "train.py"), "--epochs", "1", "--batches", "10" if QUICK else "30"]
    subprocess.run(train, env=env(LD_PRELOAD=LIBSOL, SOL_TRACE="1", SOL_TRACE_DATA="1", SOL_TRACE_DIR=trace_dir,
                                  SOL_BACKEND="native"), capture_output=True, check=True, cwd=os.path.join(ROOT, "examples"))
    total_ns, program_ns, calls = program_time(trace_dir)
    repeat = "3" if QUICK else "5"
    out = subprocess.run([SOL, "replay", trace_dir, "--repeat", repeat, "--format", "json"], env=env(),
                         capture_output=True, text=True, check=True).stdout
    doc = json.loads(out)
    native = doc["backends"]["native"]
    replay_ns = native["seconds"] * 1e9
    ratio = replay_ns / program_ns
    print("Native replay of the CNN loop's graph (examples/train.py, %d nodes, fastest of %s passes)"
          % (doc["nodes"], repeat))
    print("  program's primitive time  %10.2f ms  (%d computing calls, traced; %.2f ms with each signature's "
          "slowest call, its first touches, in place of one of its steady ones)" % (program_ns / 1e6, calls, total_ns / 1e6))
    print("  native replay             %10.2f ms  (%d ran, %d declined; %d of %d nodes bit for bit)"
          % (replay_ns / 1e6, native["ran"], native["declined"], native["reproduced"], native["hashed"]))
    print("  replay/program = %.3f (target <= 1.10): %s; %+.2f us per node"
          % (ratio, "PASS" if ratio <= 1.10 else "FAIL", (replay_ns - program_ns) / max(doc["nodes"], 1) / 1e3))


def capture_cost():
    trace_dir = tempfile.mkdtemp(prefix="sol-bench-capture-")
    toggled = [PY, os.path.join(ROOT, "bench", "cnn_toggled.py"), "12" if QUICK else "30", "5"]
    print("The CNN loop in one process, tracing toggled every 5 steps (bench/cnn_toggled.py)")
    for name, e in (("without libsol (the method's noise)", env()),
                    ("SOL_TRACE=1 (graph, no data)", env(LD_PRELOAD=LIBSOL, SOL_TRACE="1", SOL_TRACE_TOGGLE="sigusr2",
                                                         SOL_TRACE_DIR=trace_dir)),
                    ("SOL_TRACE=1 SOL_TRACE_DATA=1", env(LD_PRELOAD=LIBSOL, SOL_TRACE="1", SOL_TRACE_DATA="1",
                                                          SOL_TRACE_TOGGLE="sigusr2", SOL_TRACE_DIR=trace_dir))):
        out = subprocess.run(toggled, env=e, capture_output=True, text=True, check=True).stdout.strip()
        print("  %-40s %s" % (name, out))
        if "no data" in name:
            median = float(re.search(r"median ([\d.]+)", out).group(1))
            print("  traced/untraced without data = %.3f (target <= 1.05): %s" % (median, "PASS" if median <= 1.05 else "FAIL"))


if __name__ == "__main__":
    replay_overhead()
    capture_cost()
