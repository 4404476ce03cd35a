"""float32 matrix products (cblas_sgemm) in a parent, then in forked multiprocessing workers.

The parent's products are large enough for a threaded GEMM, so a backend whose threads do not
survive fork (GNU OpenMP's, under oneDNN) would hang the workers; a 60 s watchdog turns that into
an error exit instead of a hung test. Prints sums for a tolerant comparison with a native run."""
import multiprocessing as mp
import sys

import numpy as np


def products(seed):
    rng = np.random.default_rng(seed)
    a, b = (rng.standard_normal((256, 256)).astype(np.float32) for _ in range(2))
    c, d = rng.standard_normal((48, 40)).astype(np.float32), rng.standard_normal((40, 36)).astype(np.float32)
    return float((a @ b).sum(dtype=np.float64)), float((c @ d).sum(dtype=np.float64))


if __name__ == "__main__":
    print("parent", *products(100))
    pool = mp.get_context("fork").Pool(2)
    try:
        results = pool.map_async(products, range(4)).get(timeout=60)
    except mp.TimeoutError:
        pool.terminate()
        sys.exit("workers hung: no result within 60 s")
    pool.close()
    pool.join()
    for seed, sums in enumerate(results):
        print("worker", seed, *sums)
    print("parent", *products(101))
