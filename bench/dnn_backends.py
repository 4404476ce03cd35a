#!/usr/bin/env python3
"""DNN nodes of a PyTorch CNN on SOL's backends against native oneDNN, per problem, measured in
one run (usage: dnn_backends.py BUILD_DIR [--backends reference,opencl]).

Runs tests/programs/torch_dnn_cnn.py traced (no stacks) natively and with SOL_BACKEND=<backend>
for each backend, then prints, for every DNN problem (kind and shape) of the run, the mean time
per execution on native oneDNN and on each backend and their ratio. The traced times are the
time of the call as the program sees it (data movement included for opencl)."""
import glob
import json
import os
import subprocess
import sys
import tempfile

BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BACKENDS = ["reference", "opencl"]
for i, a in enumerate(sys.argv):
    if a == "--backends" and i + 1 < len(sys.argv):
        BACKENDS = sys.argv[i + 1].split(",")
CNN = ["/usr/bin/python3", os.path.join(ROOT, "tests", "programs", "torch_dnn_cnn.py")]


def traced(backend):
    """{(op, shape): (calls, total_ns, backend that ran it)} of one traced run."""
    with tempfile.TemporaryDirectory() as d:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SOL_") and k != "LD_PRELOAD"}
        env.update(LD_PRELOAD=os.path.join(BUILD, "libsol.so"), SOL_BACKEND=backend, SOL_TRACE="1",
                   SOL_TRACE_DIR=d, SOL_TRACE_STACKS="0", SOL_LOG="error")
        subprocess.run(CNN, env=env, check=True, capture_output=True, cwd=os.path.dirname(CNN[1]))
        out = {}
        for p in glob.glob(os.path.join(d, "**", "sol-*.summary.json"), recursive=True):
            for o in json.load(open(p))["ops"]:
                if o["symbol"] != "dnnl_primitive_execute":
                    continue
                key = (o["op"], o["shape"])
                calls, ns, _ = out.get(key, (0, 0, ""))
                out[key] = (calls + o["calls"], ns + o["total_ns"], o["backend"])
        return out


def main():
    native = traced("native")
    runs = {b: traced(b) for b in BACKENDS}
    head = "%-20s %-46s %6s %10s" % ("op", "problem", "calls", "native us")
    for b in BACKENDS:
        head += " %12s %8s" % (b + " us", "ratio")
    print("DNN problems of tests/programs/torch_dnn_cnn.py, mean time per execution")
    print(head)
    totals = {b: [0.0, 0.0] for b in BACKENDS}
    for key in sorted(native, key=lambda k: -native[k][1]):
        calls, ns, _ = native[key]
        op, shape = key
        problem = shape.split(" ")[1] if shape.startswith("prop=") and " " in shape else shape
        prop = shape.split(" ")[0][5:] if shape.startswith("prop=") else ""
        short = {"forward_training": "fwd_t", "forward_inference": "fwd_i", "backward_data": "bwd_d",
                 "backward_weights": "bwd_w", "backward": "bwd", "undef": ""}.get(prop, prop)
        line = "%-20s %-46s %6d %10.1f" % (op, (short + " " + problem).strip()[:46], calls, ns / calls / 1e3)
        for b in BACKENDS:
            got = runs[b].get(key)
            if not got:
                line += " %12s %8s" % ("-", "-")
                continue
            bcalls, bns, ran = got
            line += " %12.1f %7.1fx" % (bns / bcalls / 1e3, (bns / bcalls) / (ns / calls))
            if ran != b:
                line += "(%s)" % ran
            totals[b][0] += ns
            totals[b][1] += bns
        print(line)
    for b in BACKENDS:
        if totals[b][0]:
            print("all DNN executions: %s takes %.1fx native oneDNN's time" % (b, totals[b][1] / totals[b][0]))


if __name__ == "__main__":
    main()
