"""N calls of cblas_ddot (n=1) through ctypes from DEPTH nested Python functions; prints ns/call.

usage: py_tiny_calls.py N DEPTH. What a traced call costs when the caller is Python code: its
frames are read on every call.
"""
import ctypes
import sys
import time

ctypes.CDLL("libblas.so.3", mode=ctypes.RTLD_GLOBAL)
ddot = ctypes.CDLL(None).cblas_ddot  # the global scope's: the preloaded one when there is one
ddot.restype = ctypes.c_double
ddot.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
x = (ctypes.c_double * 1)(2.0)
px = ctypes.addressof(x)


def loop(n):
    t0 = time.perf_counter_ns()
    for _ in range(n):
        ddot(1, px, 1, px, 1)
    return time.perf_counter_ns() - t0


def nest(depth, n):
    return nest(depth - 1, n) if depth > 1 else loop(n)


n, depth = int(sys.argv[1]), int(sys.argv[2])
nest(depth, n // 10)  # warm-up: the stacks' first walks
print("%.1f ns/call" % (nest(depth, n) / n))
