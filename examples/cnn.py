"""The example's model and synthetic data: examples/train.py trains it, bench/cnn_toggled.py times
its steps with tracing turned off and on."""
import torch
import torch.nn as nn


def build(seed=0):
    """(batch, model, optimizer): batch(n) draws n labelled images. Ten classes, each a fixed random
    pattern plus noise: learnable in a few epochs."""
    torch.manual_seed(seed)
    patterns = torch.randn(10, 3, 16, 16)

    def batch(n):
        y = torch.randint(0, 10, (n,))
        return patterns[y] + 0.8 * torch.randn(n, 3, 16, 16), y

    model = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 4 * 4, 256), nn.ReLU(), nn.Linear(256, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    return batch, model, opt
