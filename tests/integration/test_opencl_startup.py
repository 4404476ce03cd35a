"""The opencl backend's start-up: compiled programs (SOL's and CLBlast's) kept in the cache
directory and loaded by the next process, the device started ahead of the first call, a damaged
cache file replaced with one line, and a fork during the start-up.

Every run makes the same single-precision GEMMs as test_transfers.py, whose CLBlast program pocl's
own kernel cache then already holds: a fresh SOL cache directory costs a load of that, not a
compile of CLBlast's kernels."""
import glob
import os
import re

import pytest

from conftest import PROGRAMS, run, run_until, sol_lines

GEMMS = [str(PROGRAMS / "device_gemms"), "64", "32", "16", "3"]
PROGRAMS_LINE = re.compile(r"^sol: opencl: (\d+) programs from the cache, (\d+) compiled$", re.M)
AHEAD_LINE = re.compile(r"^sol: opencl: device started ahead of the first call in [\d.]+ ms \((\d+) programs from the cache\)$",
                        re.M)


@pytest.fixture(scope="module")
def native():
    r = run(GEMMS, preload=False)
    assert r.returncode == 0, r.stderr
    return r.stdout


@pytest.fixture(scope="module")
def available():
    r = run(GEMMS, env={"SOL_BACKEND": "opencl", "SOL_LOG": "info"})
    if "backend opencl unavailable" in r.stderr:
        pytest.skip("opencl is not available here (see `sol backends`)")


def gemms(cache, *extra, log="debug"):
    config = cache.parent / "sol.toml"
    config.write_text('[backends.opencl]\ncache_dir = "%s"\n' % cache)
    return run(GEMMS + list(extra), env={"SOL_BACKEND": "opencl", "SOL_LOG": log, "SOL_CONFIG": str(config)})


def gemms_once_started(cache):
    """The GEMMs made once the device has started ahead of them, however long that takes."""
    config = cache.parent / "sol.toml"
    config.write_text('[backends.opencl]\ncache_dir = "%s"\n' % cache)
    flag = cache.parent / "started"
    if flag.exists():
        flag.unlink()
    return run_until(GEMMS + ["until=%s" % flag], flag, ("sol: opencl: device started ahead",),
                     env={"SOL_BACKEND": "opencl", "SOL_LOG": "debug", "SOL_CONFIG": str(config)})


def programs(stderr):
    """(from the cache, compiled) as the exit line says."""
    m = PROGRAMS_LINE.findall(stderr)
    assert len(m) == 1, stderr
    return tuple(int(v) for v in m[0])


def test_second_run_loads_what_the_first_compiled(available, native, tmp_path):
    cache = tmp_path / "cache"
    first = gemms_once_started(cache)
    assert first.returncode == 0, first.stderr
    assert programs(first.stderr) == (0, 1), first.stderr  # CLBlast's SGEMM program
    # The device was started while the program waited, with nothing to load yet.
    assert AHEAD_LINE.findall(first.stderr) == ["0"], first.stderr
    [binary] = glob.glob(str(cache / "clblast_sgemm_*.clbin"))
    assert os.stat(binary).st_mode & 0o777 == 0o600 and os.stat(cache).st_mode & 0o777 == 0o700

    second = gemms_once_started(cache)
    assert second.returncode == 0, second.stderr
    assert programs(second.stderr) == (1, 0), second.stderr
    assert AHEAD_LINE.findall(second.stderr) == ["1"], second.stderr  # loaded before the first call
    assert first.stdout == second.stdout == native

    # A program that calls at once (mostly before the thread begins) loads its program too.
    third = gemms(cache)
    assert third.returncode == 0, third.stderr
    assert programs(third.stderr) == (1, 0), third.stderr
    assert third.stdout == native


def test_a_damaged_cache_file_is_replaced_with_one_line(available, native, tmp_path):
    cache = tmp_path / "cache"
    assert gemms(cache).returncode == 0
    [binary] = glob.glob(str(cache / "clblast_sgemm_*.clbin"))
    data = bytearray(open(binary, "rb").read())
    data[len(data) // 2] ^= 0x5A
    open(binary, "wb").write(bytes(data))

    # Read twice (the start-up, then the first call), reported once, at the default level. (Once
    # however far the start-up got before the first call: the verdict does not depend on the wait.)
    damaged = gemms(cache, "wait=300", log="warn")
    assert damaged.returncode == 0, damaged.stderr
    assert sol_lines(damaged.stderr) == [
        "sol: opencl: cache file %s is corrupt (its contents do not match their digest); compiling the program again"
        % binary], damaged.stderr
    assert damaged.stdout == native

    again = gemms(cache)
    assert again.returncode == 0, again.stderr
    assert programs(again.stderr) == (1, 0), again.stderr
    assert again.stdout == native


@pytest.mark.parametrize("at", [0, 20])
def test_fork_during_the_start_up(available, native, tmp_path, at):
    """Before the start-up began (0 ms) the child starts its own device; while it runs (20 ms) the
    fork waits for it and the child, which must not use its parent's OpenCL state, runs natively.
    Either way no process hangs and both print what the program's own library computes: where the
    fork falls in the start-up on a loaded machine changes the path taken, not the verdict."""
    r = gemms(tmp_path / "cache", "fork-at=%d" % at, log="warn")
    assert r.returncode == 0, r.stderr
    assert sorted(r.stdout.splitlines()) == sorted([native.replace("process", "child").strip(), native.strip()])
    assert sol_lines(r.stderr) == [], r.stderr
