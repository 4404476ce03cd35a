"""NumPy operations that reach CBLAS (gemm, gemv, dot, vdot for every dtype, transposed and strided
operands). One line per case: name, a float summary, and an exact digest."""
import numpy as np

from digest import digest

rng = np.random.default_rng(1)
for dtype in (np.float32, np.float64, np.complex64, np.complex128):
    def rand(*shape):
        x = rng.standard_normal(shape)
        if np.issubdtype(dtype, np.complexfloating):
            x = x + 1j * rng.standard_normal(shape)
        return x.astype(dtype)

    a, b, v = rand(150, 90), rand(90, 70), rand(90)
    name = np.dtype(dtype).name
    cases = {
        "gemm": a @ b,
        "gemm_tn": a.T @ rand(150, 40),
        "gemm_strided": a[::2, ::3] @ b[::3, :],
        "gemv": a @ v,
        "gemv_t": v @ b,
        "dot": np.dot(v, v),
        "vdot": np.vdot(v, v),
        "inner": np.inner(a[:5], a[:7]),
        "syrk": a @ a.T,
    }
    for case, r in cases.items():
        r = np.asarray(r)
        print(name, case, r.shape, digest(r), float(np.abs(r).sum()))
