"""Tiny CUDA models for scripts/gpu/cublas_trace.sh: a CNN and a transformer block, a few training
steps each, printing every loss exactly (repr) so that runs with and without libsol compare.

    python3 cublas_models.py cnn|transformer

Deterministic: fixed seeds, deterministic algorithms (which cuBLAS needs CUBLAS_WORKSPACE_CONFIG
for; the script sets it). The transformer also runs one step under bf16 autocast, which reaches
cublasGemmEx / cublasLtMatmul with bf16 operands."""
import os
import sys

import torch
import torch.nn as nn


def cnn():
    # Strided convolutions rather than pooling: pooling's CUDA backward passes have no
    # deterministic implementation, and the losses must repeat bit for bit.
    model = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(),
        nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.ReLU(),
        nn.Flatten(), nn.Linear(16 * 8 * 8, 32), nn.ReLU(), nn.Linear(32, 10)).cuda()
    x = torch.randn(8, 3, 16, 16, device="cuda")
    y = torch.randint(0, 10, (8,), device="cuda")
    return model, lambda: nn.functional.cross_entropy(model(x), y)


def transformer():
    model = nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128, dropout=0.0,
                                       batch_first=True).cuda()
    x = torch.randn(4, 16, 64, device="cuda")
    return model, lambda: model(x).square().mean()


def main():
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cudnn.benchmark = False
    # Attention through the math path (batched GEMMs: cuBLAS), which is deterministic; the fused
    # kernels' backward passes are not.
    torch.backends.cuda.enable_flash_sdp(False)
    torch.backends.cuda.enable_mem_efficient_sdp(False)
    if hasattr(torch.backends.cuda, "enable_cudnn_sdp"):
        torch.backends.cuda.enable_cudnn_sdp(False)
    model, loss_fn = {"cnn": cnn, "transformer": transformer}[sys.argv[1]]()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(3):
        opt.zero_grad()
        loss = loss_fn()
        loss.backward()
        opt.step()
        print("step %d loss %r" % (step, loss.item()), flush=True)
    if sys.argv[1] == "transformer":
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = loss_fn()
        loss.backward()
        print("bf16 loss %r" % loss.item(), flush=True)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
