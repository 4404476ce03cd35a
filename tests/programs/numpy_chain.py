"""A chain of NumPy products whose data flows from call to call, with NumPy's own code changing it
in between (an in-place ReLU, an update of the weights, a rescale): float32 and float64 GEMM, GEMV
and dot products. Prints each step's sums and an exact digest of the weights."""
import numpy as np

from digest import digest

rng = np.random.default_rng(7)
for dtype in (np.float32, np.float64):
    x = rng.standard_normal((48, 40)).astype(dtype)
    w = rng.standard_normal((40, 24)).astype(dtype)
    v = rng.standard_normal(24).astype(dtype)
    for step in range(3):
        h = x @ w                       # gemm
        np.maximum(h, 0, out=h)         # NumPy's own code, in place
        y = h @ v                       # gemv
        g = x.T @ h                     # gemm, transposed
        w -= 0.01 * g[:, :24]           # the update NumPy makes
        h *= 0.5                        # in place again
        s = float(np.dot(y, y))         # dot
        print(np.dtype(dtype).name, step, repr(s), repr(float(np.abs(h).sum())))
    print(np.dtype(dtype).name, "weights", digest(w))
