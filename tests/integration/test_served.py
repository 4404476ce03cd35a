"""Large allocations served from SOL's own pages (capture/lazy/served.hpp, interpose/alloc_hooks.cpp),
switched on for these tests with the test-only SOL_TEST_SERVE_FROM (the lazy executor's own switch
comes later): real programs compute exactly what they compute without libsol, while every block of
64 KiB and more is SOL's."""
import glob
import math

from conftest import PROGRAMS, PYTHON, run, sol_lines
from test_dataflow import gemm, parse

SERVE = {"SOL_TEST_SERVE_FROM": "65536"}


def test_malloc_family_keeps_every_block_and_serves_the_large_ones():
    """tests/programs/served_alloc.c: each entry point, random mixes from one and eight threads, forks
    while other threads allocate; it checks every block's contents and, with --expect-served, that
    each large block is a served one."""
    cmd = [str(PROGRAMS / "served_alloc")]
    plain = run(cmd, preload=False)
    assert plain.returncode == 0, plain.stderr
    served = run(cmd + ["--expect-served", "65536"], env=SERVE)
    assert served.returncode == 0, served.stderr
    assert served.stdout == plain.stdout
    assert sol_lines(served.stderr) == []


def test_nothing_is_served_without_the_switch():
    """The program's own check fails where blocks are glibc's: libsol preloaded but not serving."""
    r = run([str(PROGRAMS / "served_alloc"), "--expect-served", "65536"])
    assert r.returncode == 1
    assert "not a served block" in r.stderr


def test_bad_switch_value_is_one_line_and_changes_nothing():
    r = run([str(PROGRAMS / "served_alloc"), "--expect-served", "65536"], env={"SOL_TEST_SERVE_FROM": "64k"})
    assert "not a served block" in r.stderr
    assert sol_lines(r.stderr) == ["sol: SOL_TEST_SERVE_FROM=64k is not a byte count; ignored"]


def test_observers_see_frees_of_served_blocks(tmp_path):
    """The trace's dataflow observes frees: a served block written by sgemm_, freed, handed out again
    at the same address (a cached block) and written by plain C links nothing to the sgemm_ that
    reads it. Two sgemm_ calls chained through a served block: the one edge."""
    cmd = [str(PROGRAMS / "served_alloc"), "dataflow"]
    trace_dir = tmp_path / "trace"
    r = run(cmd, env={**SERVE, "SOL_TRACE": "1", "SOL_TRACE_DIR": str(trace_dir)})
    assert r.returncode == 0, r.stderr
    assert "reused=1" in r.stdout, r.stdout  # without reuse the case would prove nothing
    plain = run(cmd, preload=False)
    assert r.stdout.splitlines()[1:] == plain.stdout.splitlines()[1:]  # the checksum
    (path,) = glob.glob(str(trace_dir / "**" / "sol-*.graph.dot"), recursive=True)
    dot = open(path).read()
    nodes, edges = parse(dot)
    assert sorted(shape for _, shape, _ in nodes.values()) == sorted([
        gemm(256, 256, 4), gemm(256, 8, 256), gemm(128, 128, 4), gemm(6, 128, 128)])
    assert list(edges) == [(gemm(128, 128, 4), gemm(6, 128, 128))]
    assert edges[(gemm(128, 128, 4), gemm(6, 128, 128))].startswith("128x128 f32, ")


def numbers(line):
    return [float(x) for x in line.split()]


def compare(script, rel_tol):
    """Runs a Python script without libsol and with large blocks served: its first line (numbers)
    agrees, its second says that served blocks were page-aligned."""
    plain = run([PYTHON, "-c", script], preload=False)
    assert plain.returncode == 0, plain.stderr
    served = run([PYTHON, "-c", script], env=SERVE)
    assert served.returncode == 0, served.stderr
    assert sol_lines(served.stderr) == []
    want, got = numbers(plain.stdout.splitlines()[0]), numbers(served.stdout.splitlines()[0])
    assert len(want) == len(got)
    for w, g in zip(want, got):
        assert math.isclose(w, g, rel_tol=rel_tol), (want, got)
    assert served.stdout.splitlines()[1] == "page-aligned True", served.stdout


NUMPY = """
import numpy as np
rng = np.random.default_rng(0)
a = rng.standard_normal((600, 600))
b = a @ a.T
c = np.zeros((1000, 1000)); c[::7] = 1.5
d = np.concatenate([a.ravel()] * 3)
e = np.linalg.solve(b + 600 * np.eye(600), np.ones(600))
f = np.resize(d, 2_000_000)
g = [np.full(20000 + 997 * i, float(i)) for i in range(40)]
del g[::2]
h = np.sort(rng.standard_normal(300_000))
print(float(b.sum()), float(c.sum()), float(d.sum()), float(e.sum()), float(f.sum()),
      sum(float(x.sum()) for x in g), float(h[::1000].sum()))
print("page-aligned", all(x.ctypes.data % 4096 == 0 for x in (a, b, c, d, f, h)))
"""


def test_numpy_computes_the_same():
    compare(NUMPY, 1e-12)


TORCH = """
import torch
torch.manual_seed(0)
a = torch.randn(512, 512)
b = a @ a
c = torch.zeros(1000, 1000); c[::3] = 2.0
d = torch.cat([a, a, a]).reshape(-1)
e = torch.nn.functional.linear(torch.randn(64, 512), a, torch.ones(512))
print(float(b.sum()), float(b.abs().sum()), float(c.sum()), float(d.sum()), float(e.abs().sum()))
print("page-aligned", all(x.data_ptr() % 4096 == 0 for x in (a, b, c, d)))
"""


def test_torch_matmul_computes_the_same():
    compare(TORCH, 1e-5)
