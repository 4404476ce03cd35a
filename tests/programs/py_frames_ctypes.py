"""cblas_dgemm through ctypes (any CPython, no NumPy): the trace's Python stacks on 3.12 and 3.13.

ctypes releases the GIL around a foreign call, as PyTorch and NumPy do around theirs.
"""
import ctypes
import sys

# Loaded into the global scope, then called through it: the preloaded library's cblas_dgemm, as
# for a program linked to libblas (a lookup in the library's own handle would bypass the preload).
ctypes.CDLL(sys.argv[1] if len(sys.argv) > 1 else "libblas.so.3", mode=ctypes.RTLD_GLOBAL)
blas = ctypes.CDLL(None)
n = 8
A = (ctypes.c_double * (n * n))(*([1.0] * (n * n)))
C = (ctypes.c_double * (n * n))()


def dgemm_through_ctypes():
    # cblas_dgemm(RowMajor, NoTrans, NoTrans, n, n, n, 1, A, n, A, n, 0, C, n)
    blas.cblas_dgemm(101, 111, 111, n, n, n, ctypes.c_double(1.0), A, n, A, n, ctypes.c_double(0.0), C, n)  # LINE dgemm


class Outer:
    def method_that_calls(self):
        dgemm_through_ctypes()  # LINE method


Outer().method_that_calls()
print("done", C[0])
