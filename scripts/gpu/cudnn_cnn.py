"""A small CNN (conv+bn+relu+pool+linear), a few training steps, forward and backward: the workload
of scripts/gpu/cudnn_trace.sh. On the GPU (argv[1] == "cuda") through cuDNN; on the CPU through
oneDNN (Debian's PyTorch), for the fixture that run compares against. Prints one loss per step."""
import sys

import torch

device = sys.argv[1] if len(sys.argv) > 1 else "cuda"
torch.manual_seed(0)
torch.backends.cudnn.enabled = True
torch.backends.cudnn.benchmark = False
torch.backends.cudnn.deterministic = True
model = torch.nn.Sequential(
    torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.BatchNorm2d(16), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
    torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.BatchNorm2d(32), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
    torch.nn.Flatten(), torch.nn.Linear(32 * 8 * 8, 10)).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(8, 3, 32, 32).to(device)
y = torch.randint(0, 10, (8,)).to(device)
for step in range(3):
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    print("loss %d %.6f" % (step, loss.item()))
