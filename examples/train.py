"""SOL's example: train a small image classifier on synthetic data with PyTorch.

Convolutions and pooling reach oneDNN, the fully connected layers reach BLAS (sgemm_), so under
libsol every layer passes through an intercepted primitive. Prints one line per epoch and a final
summary line that scripts compare:  final loss=<loss> accuracy=<acc> time=<seconds>
"""
import argparse
import time

import torch
import torch.nn as nn

from cnn import build

p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
p.add_argument("--epochs", type=int, default=5)
p.add_argument("--batches", type=int, default=20, help="batches per epoch")
p.add_argument("--batch-size", type=int, default=64)
args = p.parse_args()

batch, model, opt = build()

start = time.perf_counter()
for epoch in range(args.epochs):
    total = 0.0
    for _ in range(args.batches):
        x, y = batch(args.batch_size)
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        total += loss.item()
    print("epoch %d loss %.4f" % (epoch, total / args.batches), flush=True)
elapsed = time.perf_counter() - start

with torch.no_grad():
    x, y = batch(512)
    accuracy = (model(x).argmax(1) == y).float().mean().item()
print("final loss=%.6f accuracy=%.3f time=%.3fs" % (loss.item(), accuracy, elapsed))
