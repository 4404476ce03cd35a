"""A small PyTorch MLP trained for a few steps: prints each step's loss exactly (repr), so runs
on different executors (eager, lazy) can be compared bit for bit on the same backend."""
import torch

torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.Tanh(), torch.nn.Linear(512, 256),
                            torch.nn.Tanh(), torch.nn.Linear(256, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
x = torch.randn(128, 256)
y = torch.randint(0, 10, (128,))
for step in range(5):
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    print("step", step, "loss", repr(loss.item()))
