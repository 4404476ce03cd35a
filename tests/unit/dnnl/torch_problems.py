#!/usr/bin/python3
"""The oneDNN problems a small PyTorch CNN sends, as oneDNN itself reports them.

Runs a CNN (conv 3->8 k3 p1, ReLU, max-pool 2, linear) in a child Python with ONEDNN_VERBOSE=1
and prints each distinct (primitive kind, problem) pair of oneDNN's `onednn_verbose,exec` lines,
one per line, sorted:

    convolution mb4_ic3oc8_ih32oh32kh3sh1dh0ph1_iw32ow32kw3sw1dw0pw1
    reorder 4x8x32x32

The problem is the problem_desc field of the verbose line (benchdnn's notation), which SOL's trace
shape carries verbatim as its only token without '='. This is the independent reference a SOL
trace of the same run is compared against. The child inherits the environment, so

    SOL_TRACE=1 LD_PRELOAD=build/libsol.so /usr/bin/python3 torch_problems.py

yields SOL's trace of exactly the run whose verbose output is printed.

Kinds: oneDNN 2.6's verbose mode names the implementation's kind, SOL the kind the program
created. They differ for pooling and softmax (see VERBOSE_KIND); compare through verbose_kind().

Modes (--mode): `train` is eager PyTorch, one forward and backward pass in training mode and one
forward pass under no_grad: with Debian's torch 1.13 only the convolution reaches oneDNN (with the
reorders around it); ReLU, max-pool and linear run in ATen's own kernels. `mkldnn` converts the
model and input with torch.utils.mkldnn and runs inference, so that ReLU (eltwise), max-pool
(pooling_v2) and linear (inner_product) reach oneDNN too. `all` (default) runs both.

Needs Debian's /usr/bin/python3 (python3-torch links libdnnl.so.2 dynamically).
"""
import argparse
import os
import subprocess
import sys

# SOL's kind -> the kind oneDNN 2.6's verbose mode prints for it.
VERBOSE_KIND = {"pooling": "pooling_v2", "softmax": "softmax_v2", "logsoftmax": "softmax_v2"}


def verbose_kind(sol_kind):
    return VERBOSE_KIND.get(sol_kind, sol_kind)


def run_model(mode, batch):
    import copy

    import torch
    import torch.nn as nn

    torch.manual_seed(0)
    net = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(8 * 16 * 16, 10),
    )
    x = torch.randn(batch, 3, 32, 32)
    if mode in ("train", "all"):
        net.train()
        net(x).sum().backward()
        with torch.no_grad():
            net(x)
    if mode in ("mkldnn", "all"):
        from torch.utils import mkldnn as mkldnn_utils

        # to_mkldnn converts the container in place: keep `net` as it was.
        m = mkldnn_utils.to_mkldnn(copy.deepcopy(net).eval())
        with torch.no_grad():
            y = m[2](m[1](m[0](x.to_mkldnn())))  # conv, ReLU, max-pool on oneDNN tensors
            m[4](y.to_dense().flatten(1))  # the converted Linear: an inner product
    sys.stdout.flush()


def parse(lines):
    """(kind, prop, problem) of each exec line; fields located relative to the "exec" field."""
    out = []
    for line in lines:
        if not line.startswith("onednn_verbose,"):
            continue
        fields = line.rstrip("\n").split(",")
        try:
            e = fields.index("exec", 1, 4)
        except ValueError:
            continue
        # operation,engine,primitive,implementation,prop_kind,memory_descriptors,attributes,
        # auxiliary,problem_desc,exec_time
        if len(fields) < e + 10:
            continue
        out.append((fields[e + 2], fields[e + 4], fields[e + 8]))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mode", choices=("train", "mkldnn", "all"), default="all")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--with-prop", action="store_true", help="print kind, prop kind and problem")
    ap.add_argument("--raw", action="store_true", help="print the verbose exec lines instead")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.child:
        run_model(args.mode, args.batch)
        return 0

    env = dict(os.environ, ONEDNN_VERBOSE="1")
    cmd = [sys.executable, os.path.abspath(__file__), "--child", "--mode", args.mode, "--batch", str(args.batch)]
    proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, universal_newlines=True)
    if proc.returncode != 0:
        sys.stderr.write("torch_problems: the model run failed (exit %d)\n" % proc.returncode)
        return 1
    lines = proc.stdout.splitlines()
    if args.raw:
        for line in lines:
            if ",exec," in line:
                print(line)
        return 0
    seen = parse(lines)
    if not seen:
        sys.stderr.write("torch_problems: no onednn_verbose exec lines: is this torch built with oneDNN?\n")
        return 1
    rows = sorted({(k, p, pr) if args.with_prop else (k, pr) for k, p, pr in seen})
    for row in rows:
        print(" ".join(row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
