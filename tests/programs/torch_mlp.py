"""A multi-layer perceptron trained for a few steps: every layer is an sgemm_ (forward and backward)."""
import torch
import torch.nn as nn

from digest import digest

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(64, 128), nn.Tanh(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 8))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
x = torch.randn(32, 64)
y = torch.randn(32, 8)
for step in range(5):
    opt.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    print("step", step, "loss", loss.item().hex())
print("params", digest(*model.parameters()))
print("double", digest(torch.randn(40, 30, dtype=torch.float64) @ torch.randn(30, 20, dtype=torch.float64)))
