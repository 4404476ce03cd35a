"""An LSTM trained for a few steps: its gate matrices go through sgemm_ every time step."""
import torch
import torch.nn as nn

from digest import digest

torch.manual_seed(0)
lstm = nn.LSTM(input_size=12, hidden_size=24, num_layers=2, batch_first=True)
head = nn.Linear(24, 4)
params = list(lstm.parameters()) + list(head.parameters())
opt = torch.optim.SGD(params, lr=0.1)
x = torch.randn(6, 10, 12)
y = torch.randn(6, 4)
for step in range(3):
    opt.zero_grad()
    out, _ = lstm(x)
    loss = nn.functional.mse_loss(head(out[:, -1]), y)
    loss.backward()
    opt.step()
    print("step", step, "loss", loss.item().hex())
print("params", digest(*params))
