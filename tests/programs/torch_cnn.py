"""A small CNN trained for a few steps: convolutions and pooling reach oneDNN, linear layers sgemm_."""
import torch
import torch.nn as nn

from digest import digest

torch.manual_seed(0)
model = nn.Sequential(
    nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(8, 16, 3, padding=1, stride=2), nn.ReLU(), nn.AdaptiveAvgPool2d(2),
    nn.Flatten(), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
x = torch.randn(16, 3, 24, 24)
y = torch.randint(0, 10, (16,))
for step in range(4):
    opt.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    print("step", step, "loss", loss.item().hex())
print("params", digest(*model.parameters()))
with torch.no_grad():
    print("eval", digest(model(x)))
