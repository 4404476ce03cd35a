"""NumPy's and SciPy's BLAS as pip installs them (their wheels' own OpenBLAS, under the scipy_*64_
and scipy_* names): matmul in every element type, transposed, strided, matrix-vector and vector
products; scipy.linalg.blas; LU and solve. Prints a digest of every result.

The operands hold small integers, so every product is exact whatever order a library sums in: a
backend's results must equal the wheel's own, bit for bit."""
import hashlib
import sys

import numpy as np
import scipy.linalg as sl
from scipy.linalg import blas

TYPES = [np.float32, np.float64, np.complex64, np.complex128]


def ints(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    x = rng.integers(-3, 4, size=shape).astype(dtype)
    if np.iscomplexobj(x):
        x = x + 1j * rng.integers(-3, 4, size=shape)
    return x.astype(dtype)


def show(name, r):
    r = np.asarray(r)
    print(name, r.dtype, r.shape, hashlib.sha1((r + 0).tobytes()).hexdigest()[:16])  # + 0: -0.0 is 0.0


def pip_matmul_from_here(a, b):
    return a @ b  # LINE matmul


for t in TYPES:
    a, b, v = ints((96, 80), t, 1), ints((80, 112), t, 2), ints(80, t, 3)
    show("matmul", pip_matmul_from_here(a, b))
    show("matmul a.T b.T", a.T[:, :64] @ b.T[:64, :])
    show("matmul strided", a[::2, ::3] @ b[::3, ::2])
    show("matmul a a.T", a @ a.T)
    show("matvec", a @ v)
    show("vecmat", v @ b)
    show("dot", v @ v)
    show("vdot", np.vdot(v, v))

d, e = ints((64, 48), np.float64, 4), ints((48, 32), np.float64, 5)
show("dgemm", blas.dgemm(2.0, d, e))
show("dgemm trans", blas.dgemm(1.0, d, d, trans_a=True))
show("sgemv", blas.sgemv(1.0, d.astype(np.float32), ints(48, np.float32, 6)))
show("zaxpy", blas.zaxpy(ints(40, np.complex128, 7), ints(40, np.complex128, 8), a=2 - 1j))
show("ddot", blas.ddot(ints(40, np.float64, 9), ints(40, np.float64, 10)))
show("idamax", blas.idamax(ints(40, np.float64, 11)))
show("cgemm", blas.cgemm(1.0, ints((32, 16), np.complex64, 12), ints((16, 24), np.complex64, 13)))

m = ints((64, 64), np.float64, 14) + 40 * np.eye(64)
lu, piv = sl.lu_factor(m)
show("lu", lu)
show("lu_solve", sl.lu_solve((lu, piv), ints(64, np.float64, 15)))
show("solve", sl.solve(m, ints((64, 3), np.float64, 16)))
print("done", file=sys.stderr)
