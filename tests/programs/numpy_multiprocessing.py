"""multiprocessing (fork) workers doing BLAS work with NumPy; the parent checks their results."""
import multiprocessing as mp

import numpy as np

from digest import digest


def work(seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((64, 64))
    return digest(a @ a.T), float(np.trace(a @ a))


if __name__ == "__main__":
    parent = np.ones((8, 8)) @ np.ones((8, 8))  # the parent calls BLAS before forking
    with mp.get_context("fork").Pool(2) as pool:
        for seed, (d, tr) in enumerate(pool.map(work, range(6))):
            print("worker", seed, d, tr.hex())
    print("parent", digest(parent))
