"""A CNN that reaches every kind of oneDNN primitive Debian's PyTorch 1.13 uses in training and in
mkldnn inference: plain, strided, grouped, depthwise and dilated convolutions (forward, backward
data, backward weights), batch normalization, ReLU, max and average pooling, a transposed
convolution, linear layers, log-softmax with NLL, and the reorders between layouts; then an
inference pass on mkldnn tensors (pooling, eltwise, batch normalization, sum). Prints the loss of
each step and checksums of the results, for comparison within a tolerance."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils import mkldnn as mkldnn_utils

torch.manual_seed(0)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.c2 = nn.Conv2d(8, 16, 3, padding=1, groups=2)
        self.dw = nn.Conv2d(16, 16, 3, padding=2, dilation=2, groups=16)
        self.up = nn.ConvTranspose2d(16, 8, 2, stride=2)
        self.c3 = nn.Conv2d(8, 8, 3, stride=2, padding=(1, 0))
        self.fc = nn.Linear(8 * 8 * 7, 10)

    def forward(self, x):
        x = F.relu(self.bn1(self.c1(x)))
        x = F.max_pool2d(x, 2)
        x = F.relu(self.c2(x))
        x = F.avg_pool2d(self.dw(x), 2)
        x = F.relu(self.up(x))
        x = self.c3(x)
        return F.log_softmax(self.fc(x.flatten(1)), 1)


model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
x = torch.randn(8, 3, 32, 32)
y = torch.randint(0, 10, (8,))
for step in range(3):
    opt.zero_grad()
    loss = F.nll_loss(model(x), y)
    loss.backward()
    opt.step()
    print("step", step, "loss", repr(loss.item()))
print("params", " ".join(repr(p.detach().abs().sum().item()) for p in model.parameters()))

# Inference on mkldnn tensors: oneDNN's pooling, eltwise, batch normalization and sum primitives.
net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                    nn.Conv2d(8, 8, 3, padding=1), nn.AvgPool2d(2)).eval()
with torch.no_grad():
    m = mkldnn_utils.to_mkldnn(net)
    xm = x.to_mkldnn()
    a = xm
    for layer in m:
        a = layer(a)
    s = a + a
    print("mkldnn", " ".join(repr(t.to_dense().abs().sum().item()) for t in (a, s, torch.relu(xm))))
