"""NumPy and PyTorch programs print bit-identical results with and without libsol (native mode),
and libsol really sat in between (SOL_LOG=debug shows the native symbols it forwarded to)."""
import pytest

from conftest import PY_PROGRAMS, PYTHON, run

PROGRAMS = {
    "numpy_ops": ["cblas_sgemm", "cblas_dgemm", "cblas_zgemm", "cblas_cgemv", "cblas_zdotc_sub"],
    "torch_cnn": ["sgemm_", "dnnl_primitive_execute", "dnnl_dilated_convolution_forward_desc_init"],
    "torch_mlp": ["sgemm_", "dgemm_"],
    "torch_lstm": ["sgemm_"],
    "torch_dataloader": ["sgemm_"],
    "numpy_multiprocessing": ["cblas_dgemm"],
}


@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_identical_with_and_without_libsol(program):
    cmd = [PYTHON, str(PY_PROGRAMS / (program + ".py"))]
    native = run(cmd, preload=False, cwd=PY_PROGRAMS)
    assert native.returncode == 0, native.stderr
    sol = run(cmd, env={"SOL_BACKEND": "native", "SOL_LOG": "debug"}, cwd=PY_PROGRAMS)
    assert sol.returncode == 0, sol.stderr
    assert sol.stdout == native.stdout
    assert sol.stdout.strip(), "the program printed nothing"
    for symbol in PROGRAMS[program]:
        assert "native %s:" % symbol in sol.stderr, "%s did not go through libsol" % symbol


def test_shared_workloads_run_under_libsol():
    """The workloads in ../shared/workloads run unchanged and give the same numbers."""
    from conftest import SOURCE
    workloads = SOURCE.parent / "shared" / "workloads"
    if not workloads.is_dir():
        pytest.skip("../shared/workloads is not beside the checkout")
    numpy = [PYTHON, str(workloads / "numpy_blas.py")]
    assert run(numpy).stdout == run(numpy, preload=False).stdout
    torch = run([PYTHON, str(workloads / "torch_train.py"), "--iters", "3"])
    assert torch.returncode == 0, torch.stderr
    native = run([PYTHON, str(workloads / "torch_train.py"), "--iters", "3"], preload=False)
    assert torch.stdout.split()[0] == native.stdout.split()[0]  # loss=...; loop_s differs
