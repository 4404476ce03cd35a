"""A tiny network whose BLAS calls can be listed by hand, for the exact edge set of the trace's
dataflow graph (tests/integration/test_dataflow.py says which edges and why).

x (6x8) -> Linear(8, 16) -> ReLU -> Linear(16, 12, bias=False) -> Linear(12, 4) -> MSE against t,
two steps of SGD; float32, one thread. Every size differs from the others so that each GEMM has a
shape of its own."""
import torch
import torch.nn as nn

torch.manual_seed(0)
torch.set_num_threads(1)
BATCH = 6
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 12, bias=False), nn.Linear(12, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(BATCH, 8)
t = torch.randn(BATCH, 4)
for step in range(2):
    opt.zero_grad()
    loss = nn.functional.mse_loss(model(x), t)
    loss.backward()
    opt.step()
    print("step", step, "loss", loss.item().hex())
