"""NumPy's matmul (dgemm) from a named function, for the trace's Python stacks."""
import numpy as np

a = np.random.default_rng(0).random((64, 64))


def numpy_matmul_from_here():
    return a @ a  # LINE matmul


numpy_matmul_from_here()
print("done")
