"""The trace's dataflow graph (sol-<tag>.graph.dot) follows data, not addresses: the exact edge set
of programs whose BLAS calls are known, memory given back and reused links nothing, and oneDNN's
set-up calls stay out of the graph."""
import glob
import re

import pytest

from conftest import PROGRAMS, PY_PROGRAMS, PYTHON, run

NODE = re.compile(r'^\s*(s\d+) \[label="(.*)"\];$')
EDGE = re.compile(r'^\s*(s\d+) -> (s\d+) \[label="(.*)"\];$')


def traced_graph(cmd, tmp_path, **kw):
    trace_dir = tmp_path / "trace"
    r = run(cmd, env={"SOL_TRACE": "1", "SOL_TRACE_DIR": str(trace_dir)}, **kw)
    assert r.returncode == 0, r.stderr
    plain = run(cmd, preload=False, **kw)
    assert r.stdout == plain.stdout  # tracing changes nothing the program computes
    (path,) = glob.glob(str(trace_dir / "**" / "sol-*.graph.dot"), recursive=True)
    return r.stdout, open(path).read()


def parse(dot):
    """{node id: (symbol, shape, calls)} and {(from shape, to shape): label}; shapes name the nodes,
    which are one per signature, so no two nodes of these programs share a shape."""
    nodes, edges = {}, {}
    for line in dot.splitlines():
        if m := NODE.match(line):
            symbol, _op_dtype, shape, calls = m.group(2).split("\\n")
            nodes[m.group(1)] = (symbol, shape, int(calls.split()[0]))
        elif m := EDGE.match(line):
            key = (nodes[m.group(1)][1], nodes[m.group(2)][1])
            assert key not in edges, "two edges %s" % (key,)
            edges[key] = m.group(3)
    return nodes, edges


def gemm(m, n, k, transa="N", transb="N"):
    return "m=%d n=%d k=%d transa=%s transb=%s" % (m, n, k, transa, transb)


def test_reused_memory_links_nothing_and_a_chain_links_once(tmp_path):
    """tests/programs/dataflow_reuse.c: a block written by one sgemm_, given back (free, realloc,
    munmap), handed out again at the same address and written by plain C, then read by another
    sgemm_: no edge. Two sgemm_ calls chained through one buffer: the graph's only edge."""
    out, dot = traced_graph([str(PROGRAMS / "dataflow_reuse")], tmp_path)
    # Without reuse the cases below would prove nothing: glibc hands a freed block of the same size
    # back first, and the kernel the hole an unmapped range left.
    assert "reused free=1 realloc=1 munmap=1" in out, out
    nodes, edges = parse(dot)
    assert sorted(shape for _, shape, _ in nodes.values()) == sorted([
        gemm(12, 20, 16), gemm(12, 8, 20),  # free
        gemm(10, 9, 7), gemm(10, 5, 9),     # realloc
        gemm(32, 32, 4), gemm(32, 6, 32),   # munmap
        gemm(12, 10, 16), gemm(6, 10, 12),  # chain
    ])
    # The chain's second call reads T (12 x 10, column-major) as B: 480 bytes, one call.
    assert edges == {(gemm(12, 10, 16), gemm(6, 10, 12)): "12x10 f32, 480 B"}


def dnnl_problem(shape):
    """The dims of a oneDNN node's problem: '512x64' in 'prop=undef 512x64 src=f32:ab ...'."""
    return re.search(r"\b\d+x\d+\b", shape).group(0)


def test_onednn_buffers_freed_link_nothing_and_objects_do_not_matter(tmp_path):
    """tests/programs/dataflow_dnnl.c: a buffer oneDNN allocated for a memory object, written by a
    reorder, freed when the object is destroyed or given another data handle, and handed out again
    at the same address to a new object: a ReLU reading it after plain C wrote it links to nothing.
    The program's own buffer outlives the memory objects made on it: the ReLU that reads through a
    second object links to the reorder that wrote through the first. So does a ReLU reading the
    buffer a reorder wrote."""
    program = PROGRAMS / "dataflow_dnnl"
    if not program.exists():
        pytest.skip("built without oneDNN's library")
    out, dot = traced_graph([str(program)], tmp_path)
    assert "reused destroy=1 handle=1" in out, out
    _, edges = parse(dot)
    named = {}
    for line in dot.splitlines():
        if m := NODE.match(line):
            _, op_dtype, shape, _ = m.group(2).split("\\n")
            named[shape] = "%s %s" % (op_dtype.split()[0], dnnl_problem(shape))
    assert sorted(named.values()) == sorted(
        "%s %dx64" % (op, rows) for op in ("reorder", "eltwise") for rows in (512, 384, 12, 4))
    assert {(named[a], named[b]): label for (a, b), label in edges.items()} == {
        ("reorder 12x64", "eltwise 12x64"): "12x64 f32, 3.0 KiB",
        ("reorder 4x64", "eltwise 4x64"): "4x64 f32, 1.0 KiB",
    }


# torch_dataflow.py: x (BATCH x 8) -> L1 = Linear(8, 16) -> ReLU -> L2 = Linear(16, 12, no bias)
# -> L3 = Linear(12, 4) -> MSE, two SGD steps. PyTorch 1.13 on the CPU computes every product of a
# Linear layer (in -> out) with one sgemm_, column-major, on row-major tensors:
#   forward        y = x W^T + b: addmm (bias copied into y first, then beta = 1) or mm (no bias)
#                  sgemm T,N m=out n=BATCH k=in     reads W, x (and y: the copied bias); writes y
#   grad of input  gx = gy W     (mm_mat1_backward)
#                  sgemm N,N m=in n=BATCH k=out     reads W, gy; writes gx
#   grad of weight gW = gy^T x   (mm_mat2_backward: W^T is column-major, so (gy^T x) is computed)
#                  sgemm N,T m=in n=out k=BATCH     reads x, gy; writes gW
# L1's input x needs no gradient: no grad-of-input call for L1. Eight signatures, two calls each.
# (NumPy, which PyTorch imports, checks itself with one cblas_sdot of 2 floats: a node, no edge.)
#
# An edge needs a buffer that an intercepted call wrote and another read, with no write by code SOL
# does not see in between and the buffer not given back meanwhile:
#   L2 forward -> L3 forward          L2's output a2 is L3's input x (no bias, no ReLU between)
#   L2 forward -> L3 grad of weight   a2 is saved for L3's backward and read there as x
#   L3 grad of input -> L2 grad of input and -> L2 grad of weight: L3's gx is L2's gy, read by both
# And none else:
#   L1 forward -> anything: its output goes through ReLU (PyTorch's own kernel, a new tensor): L2
#     reads the ReLU's output, which no intercepted call wrote.
#   into L3's backward from a forward: L3's gy is MSE's backward, PyTorch's own kernel.
#   into L1 grad of weight: its gy is ReLU's backward (threshold_backward), PyTorch's own kernel.
#   L2 grad of input -> anything: it is read only by ReLU's backward.
#   grad of weight -> anything: the gradients are read by SGD (PyTorch's own kernels), and the
#     weights SGD writes are read by the next step's calls: no intercepted call wrote them.
#   step 1 -> step 2: every activation and gradient of step 1 is freed, and step 2's tensors (often
#     at the same addresses) are written first by PyTorch's kernels or are fresh outputs.
# Each edge is read by one call per step (x2), through one operand of 12 x BATCH floats (a2 and
# L3's gx, BATCH x 12 row-major, are 12 x BATCH column-major): 12 * 6 * 4 = 288 bytes.
BATCH = 6


def forward(i, o):
    return gemm(o, BATCH, i, "T", "N")


def grad_input(i, o):
    return gemm(i, BATCH, o, "N", "N")


def grad_weight(i, o):
    return gemm(i, o, BATCH, "N", "T")


def test_exact_edges_of_a_small_network(tmp_path):
    out, dot = traced_graph([PYTHON, str(PY_PROGRAMS / "torch_dataflow.py")], tmp_path, cwd=PY_PROGRAMS)
    assert out.count("loss") == 2
    nodes, edges = parse(dot)
    assert sorted(node for node in nodes.values() if node[0] == "sgemm_") == sorted(
        ("sgemm_", shape, 2) for shape in (
            forward(8, 16), forward(16, 12), forward(12, 4),
            grad_input(12, 4), grad_weight(12, 4),
            grad_input(16, 12), grad_weight(16, 12),
            grad_weight(8, 16)))
    label = "x2: 12x%d f32, %d B" % (BATCH, 12 * BATCH * 4)
    assert edges == {
        (forward(16, 12), forward(12, 4)): label,
        (forward(16, 12), grad_weight(12, 4)): label,
        (grad_input(12, 4), grad_input(16, 12)): label,
        (grad_input(12, 4), grad_weight(16, 12)): label,
    }


def test_no_edges_where_every_chain_is_broken(tmp_path):
    """torch_mlp.py: Linear -> Tanh -> Linear -> ReLU -> Linear, every layer with a bias, Adam,
    five steps. Between any two GEMMs lies PyTorch's own code: Tanh or ReLU (and their backward
    passes) between layers, the bias copied into each forward output, MSE's backward before the
    last layer's backward, Adam between steps. No edge at all. Linked by addresses alone, the
    graph had some 27 edges here: 16 KiB activations freed by one step and handed out again to
    the next."""
    _, dot = traced_graph([PYTHON, str(PY_PROGRAMS / "torch_mlp.py")], tmp_path, cwd=PY_PROGRAMS)
    nodes, edges = parse(dot)
    assert sum(1 for symbol, _, _ in nodes.values() if symbol == "sgemm_") == 8
    assert edges == {}


def test_cnn_edges_stay_within_onednn_and_setup_calls_are_not_nodes(tmp_path):
    """torch_cnn.py. oneDNN's set-up calls (descriptors, memory objects: thousands of calls)
    compute nothing and carry no data: the graph leaves them out and says how many. Its edges are
    oneDNN's own chains (a weights reorder into the convolution that reads it, a convolution into
    the reorder of its output) and carry the tensors' dims. The linear layers are separated from
    the convolutions and from each other by PyTorch's pooling, flatten and ReLU: no edge touches
    an sgemm_ (by addresses alone, convolutions fed the linear layers' GEMMs through reused
    memory)."""
    _, dot = traced_graph([PYTHON, str(PY_PROGRAMS / "torch_cnn.py")], tmp_path, cwd=PY_PROGRAMS)
    assert re.search(r"\\n\d+ set-up signatures \(\d+ calls\) not shown \(sol report --setup", dot)
    nodes, edges = parse(dot)
    symbols = {symbol for symbol, _, _ in nodes.values()}
    assert symbols == {"sgemm_", "dnnl_primitive_execute", "cblas_sdot"}, symbols
    gemms = {shape for symbol, shape, _ in nodes.values() if symbol == "sgemm_"}
    assert edges and not any(a in gemms or b in gemms for a, b in edges), edges
    # The first convolution's weights (8 output channels, 3 input channels, 3x3) reordered for it in
    # each of 5 forward passes (4 training steps, 1 evaluation).
    # Its bytes: 864 in a plain layout, more where oneDNN pads the channels to its blocking (16 on
    # AVX-512: 1.7 KiB), which depends on the CPU.
    weights = [l for l in edges.values() if l.startswith("x5: 8x3x3x3 f32, ")]
    assert weights, edges
    size, unit = weights[0].split(", ")[1].split()
    assert float(size) * {"B": 1, "KiB": 1024, "MiB": 1 << 20}[unit] >= 864 * 0.99, weights
    for label in edges.values():
        assert re.fullmatch(r"(x\d+: )?\d+(x\d+)* f32( \+ \d+(x\d+)* f32)*, [\d.]+ (B|KiB|MiB)", label), label
