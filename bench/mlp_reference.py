#!/usr/bin/env python3
"""A PyTorch MLP training loop on a program whose libblas.so.3 is the reference BLAS
(LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/blas), in one run:

  reference native     no libsol: the slow library the program is linked to
  libsol (auto)        the same program under libsol with the default backend
  OpenBLAS native      no libsol, libblas.so.3 = OpenBLAS: what a rebuild against OpenBLAS gives

Target: libsol >= 0.98 of OpenBLAS native's speed (the IR and the router cost nothing visible).
    mlp_reference.py BUILD_DIR [--quick]
"""
import os
import re
import subprocess
import sys

BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
QUICK = "--quick" in sys.argv
REFERENCE_DIR = "/usr/lib/x86_64-linux-gnu/blas"
SCRIPT = r"""
import time, torch, torch.nn as nn
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(256, 512), torch.randint(0, 10, (256,))
def step():
    opt.zero_grad(); loss = nn.functional.cross_entropy(model(x), y); loss.backward(); opt.step(); return loss
step()  # warm-up
t = time.perf_counter()
for _ in range(ITERS): loss = step()
print("loop_s=%.4f loss=%.6f" % (time.perf_counter() - t, loss.item()))
"""


def run(env_extra, iters):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SOL_") and k not in ("LD_PRELOAD", "LD_LIBRARY_PATH")}
    env.update(env_extra)
    out = subprocess.run(["/usr/bin/python3", "-c", SCRIPT.replace("ITERS", str(iters))], env=env,
                         capture_output=True, text=True, check=True).stdout
    m = re.search(r"loop_s=([\d.]+) loss=([-\d.]+)", out)
    return float(m.group(1)), float(m.group(2))


def main():
    iters_fast, iters_ref = (5, 1) if QUICK else (30, 2)
    rounds = 2 if QUICK else 5
    variants = {
        "reference native": ({"LD_LIBRARY_PATH": REFERENCE_DIR}, iters_ref),
        "libsol (auto)": ({"LD_LIBRARY_PATH": REFERENCE_DIR, "LD_PRELOAD": os.path.join(BUILD, "libsol.so")}, iters_fast),
        "OpenBLAS native": ({}, iters_fast),
    }
    per_iter = {}
    for _ in range(rounds):
        for name, (e, iters) in variants.items():
            t, _loss = run(e, iters)
            per_iter[name] = min(per_iter.get(name, 1e30), t / iters)
    print("PyTorch MLP training step (512-1024-1024-10, batch 256), libblas.so.3 = reference BLAS")
    for name, t in per_iter.items():
        print("  %-20s %9.2f ms/step" % (name, t * 1e3))
    speed = per_iter["OpenBLAS native"] / per_iter["libsol (auto)"]
    print("  libsol speed / OpenBLAS native = %.3f (target >= 0.98): %s" % (speed, "PASS" if speed >= 0.98 else "FAIL"))
    print("  OpenBLAS native speed / reference native = %.1fx" % (per_iter["reference native"] / per_iter["OpenBLAS native"]))


if __name__ == "__main__":
    main()
