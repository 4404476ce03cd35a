"""The cuda backend from outside: `sol backends` lists it, available or with the reason why not;
on a machine without a GPU (or without CUDA) SOL_BACKEND=cuda runs everything natively, with one
line saying so, and the program's results are unchanged. With a GPU (the `gpu` tests, skipped
without one): a GEMM chain on the device with the transfers an eager device backend must make."""
import re
import shutil
import subprocess

import pytest

from conftest import PROGRAMS, SOL, run, sol_lines

TRANSFERS = re.compile(r"^sol: transfers: (\d+) nodes, (\d+) flushes, (\d+) bytes to the device, (\d+) bytes back$")
M, N, K = 64, 32, 16
A, B, C = 4 * M * K, 4 * K * N, 4 * M * N  # float operands, leading dimensions = rows


def gpu_present():
    """Whether nvidia-smi lists a GPU (the same test the GPU script makes)."""
    if not shutil.which("nvidia-smi"):
        return False
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return False
    return any(l.startswith("GPU ") for l in out.splitlines())


def cuda_line():
    out = run([SOL, "backends"], preload=False).stdout
    lines = [l for l in out.splitlines() if re.match(r"^cuda\s", l)]
    assert len(lines) == 1, out
    return lines[0]


def gemms(*args, **env):
    return run([str(PROGRAMS / "device_gemms"), *map(str, args)], env=env)


def test_backends_lists_cuda_available_or_why_not():
    line = cuda_line()
    m = re.match(r"^cuda\s+(available|unavailable: (.+))$", line)
    assert m, line
    if m.group(1) == "available":
        assert gpu_present(), "cuda is available but nvidia-smi lists no GPU: " + line
    else:
        # The reason names what is missing: the library, the device, or the headers at build time.
        assert re.search(r"cannot open shared object file|^no CUDA device: cudaGetDeviceCount: |built without the CUDA headers",
                         m.group(2)), line


def test_unavailable_cuda_runs_natively_with_one_line():
    line = cuda_line()
    if "unavailable" not in line:
        pytest.skip("cuda is available here")
    native = run([str(PROGRAMS / "device_gemms"), "37", "29", "11", "3"], preload=False)
    r = gemms(37, 29, 11, 3, SOL_BACKEND="cuda")
    assert r.returncode == 0, r.stderr
    assert r.stdout == native.stdout  # bitwise: the program's own library ran every call
    lines = sol_lines(r.stderr)
    assert len(lines) == 1 and "cuda" in lines[0], r.stderr
    assert line.split("unavailable: ", 1)[1] in lines[0], (lines, line)


@pytest.mark.gpu
def test_gpu_gemm_chain_on_the_device():
    if not gpu_present():
        pytest.skip("no GPU here (nvidia-smi -L lists none)")
    assert "available" in cuda_line().split()[1]
    native = run([str(PROGRAMS / "device_gemms"), *map(str, (M, N, K, 3))], preload=False)
    r = gemms(M, N, K, 3, SOL_BACKEND="cuda", SOL_LOG="info")
    assert r.returncode == 0, r.stderr
    assert abs(float(r.stdout.split()[-1]) - float(native.stdout.split()[-1])) <= 1e-4 * abs(float(native.stdout.split()[-1]))
    moved = [tuple(int(g) for g in m.groups()) for m in map(TRANSFERS.match, r.stderr.splitlines()) if m]
    # The first GEMM has beta = 0: C is zero-filled on the device, not uploaded.
    assert moved == [(3, 3, A + B + 2 * (A + B + C), 3 * C)], r.stderr
