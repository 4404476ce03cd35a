"""PyTorch calls with distinctive Python frames, for the trace's Python stacks.

A convolution (oneDNN) and a linear layer (sgemm_) from named functions, a backward pass, a
thread that runs Python, a double-precision convolution whose dgemm_ calls come from OpenMP's
threads (PyTorch's own convolution, which runs no Python), and a forked child. Each line that
reaches a primitive is marked "# LINE <name>" for the test.
"""
import os
import sys
import threading

import torch
import torch.nn as nn

torch.manual_seed(0)
torch.set_num_threads(1)
conv = nn.Conv2d(3, 4, 3)
fc = nn.Linear(64, 8)
x = torch.randn(2, 3, 10, 10)


def run_the_convolution_here():
    return conv(x)  # LINE conv


def run_the_linear_layer_here(h):
    return fc(h)  # LINE linear


def a_training_step():
    y = run_the_linear_layer_here(run_the_convolution_here().reshape(2, -1)[:, :64])  # LINE step
    y.sum().backward()  # LINE backward


def in_a_python_thread():
    run_the_linear_layer_here(torch.randn(3, 64))


def double_conv_in_openmp_threads():
    torch.set_num_threads(2)
    conv64 = nn.Conv2d(3, 8, 3).double()
    conv64(torch.randn(8, 3, 16, 16, dtype=torch.double))  # LINE openmp
    torch.set_num_threads(1)


a_training_step()
t = threading.Thread(target=in_a_python_thread)
t.start()
t.join()
double_conv_in_openmp_threads()
pid = os.fork()
if pid == 0:
    def in_the_forked_child():
        run_the_linear_layer_here(torch.randn(5, 64))
    in_the_forked_child()
    os._exit(0)
os.waitpid(pid, 0)
print("done", file=sys.stderr)
