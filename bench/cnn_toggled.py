#!/usr/bin/env python3
"""The traced CNN loop's cost, paired in one process: the example's model and data
(examples/cnn.py, what examples/train.py trains), trained in blocks of steps with tracing turned
off and on between blocks (SOL_TRACE_TOGGLE=sigusr2, sent by the process to itself). Run under
libsol with SOL_TRACE=1 SOL_TRACE_TOGGLE=sigusr2:

    cnn_toggled.py [PAIRS] [STEPS_PER_BLOCK]

Separate processes differ by 10-30 % on a shared machine (placement of pages and threads, start-up
work); two blocks a tenth of a second apart in one process see the same machine. Each pair runs
on-off or off-on, alternately (a drift over the run cancels out), after a first pair that records
every call site and stack once (left out: a whole run pays it once too). Prints the median of the
pairs' on/off ratios, their quartiles, and the blocks' seconds. Without libsol, or without the
toggle, both blocks of a pair run alike: the ratio is then the method's own noise.
"""
import os
import signal
import statistics
import sys
import time

import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"))
from cnn import build  # noqa: E402

PAIRS = int(sys.argv[1]) if len(sys.argv) > 1 else 20
STEPS = int(sys.argv[2]) if len(sys.argv) > 2 else 5

batch, model, opt = build()


def block():
    t = time.perf_counter()
    for _ in range(STEPS):
        x, y = batch(64)
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    return time.perf_counter() - t


tracing = True  # SOL_TRACE=1: on from the start
# Without SOL's handler SIGUSR2 would end the process: the blocks then run alike, unsignalled.
TOGGLE = os.environ.get("SOL_TRACE_TOGGLE") == "sigusr2" and "libsol" in os.environ.get("LD_PRELOAD", "")


def set_tracing(on):
    global tracing
    if on != tracing and TOGGLE:
        os.kill(os.getpid(), signal.SIGUSR2)
    tracing = on


ratios, on_s, off_s = [], [], []
for pair in range(PAIRS + 1):
    order = (True, False) if pair % 2 == 0 else (False, True)
    got = {}
    for on in order:
        set_tracing(on)
        got[on] = block()
    if pair == 0:
        continue  # every site and stack recorded for the first time
    ratios.append(got[True] / got[False])
    on_s.append(got[True])
    off_s.append(got[False])
set_tracing(True)
q = statistics.quantiles(ratios, n=4)
print("traced/untraced blocks: median %.3f, quartiles %.3f-%.3f over %d pairs of %d steps; "
      "block s: on %.4f, off %.4f (medians)" % (statistics.median(ratios), q[0], q[2], PAIRS, STEPS,
                                                 statistics.median(on_s), statistics.median(off_s)))
