"""The build as scripts configure it: the demo builds libsol and the sol command and no test, and
CI (scripts/test.sh, through scripts/build.sh) fails on a compiler warning in SOL's own code.
Each test configures a build directory of its own the way the scripts do, and builds nothing
but what it names."""
import json
import os
import shlex
import subprocess

import pytest

from conftest import SOURCE


def script(args, build_dir):
    env = dict(os.environ, BUILD_DIR=str(build_dir))
    return subprocess.run([str(SOURCE / "scripts" / "build.sh"), *args], env=env, capture_output=True, text=True,
                          timeout=600)


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory):
    """A fresh build directory configured by `scripts/build.sh --demo`, with what it would build
    (the build tool's dry run)."""
    build_dir = tmp_path_factory.mktemp("demo-build")
    r = script(["--demo", "-n"], build_dir)
    assert r.returncode == 0, r.stdout + r.stderr
    return build_dir, r.stdout


def test_the_demo_builds_libsol_and_the_sol_command_and_no_test(demo_dir):
    build_dir, dry_run = demo_dir
    cache = (build_dir / "CMakeCache.txt").read_text()
    assert "BUILD_TESTING:BOOL=OFF" in cache
    steps = [l for l in dry_run.splitlines() if l.startswith("[")]
    linked = [l.split()[-1] for l in steps if " Linking " in l]
    assert "libsol.so" in linked and "sol" in linked, linked
    for step in steps:
        assert "tests/" not in step and "bench/" not in step and "gtest" not in step, step
    # And the full build would build the tests: they are only left out.
    full = subprocess.run(["cmake", "--build", str(build_dir), "--target", "help"], capture_output=True, text=True)
    assert "blas_test" not in full.stdout  # not even configured with tests off


def test_ci_fails_on_a_compiler_warning_in_sols_code(demo_dir, tmp_path):
    """scripts/build.sh configures SOL_WERROR=ON, which scripts/test.sh (and so .ci/run) builds
    with: a translation unit of SOL's compiled with its exact command fails on a warning."""
    build_dir, _ = demo_dir
    assert "scripts/build.sh" in (SOURCE / "scripts" / "test.sh").read_text()
    assert "scripts/test.sh" in (SOURCE / ".ci" / "run").read_text()
    assert "SOL_WERROR:BOOL=ON" in (build_dir / "CMakeCache.txt").read_text()
    commands = json.loads((build_dir / "compile_commands.json").read_text())
    entry = next(c for c in commands if c["file"].endswith("config/config.cpp"))
    words = shlex.split(entry["command"])
    warned = tmp_path / "warned.cpp"
    warned.write_text("int sol_warned(int x) {\n  int unused = x;\n  return x;\n}\n")
    clean = tmp_path / "clean.cpp"
    clean.write_text("int sol_clean(int x) {\n  return x;\n}\n")
    results = {}
    for source in (warned, clean):
        cmd = [str(source) if w == entry["file"] else w for w in words if w != "ccache"]
        cmd[cmd.index("-o") + 1] = str(tmp_path / (source.stem + ".o"))
        for flag in ("-MT", "-MF"):  # a dependency file, into a directory not made yet
            if flag in cmd:
                del cmd[cmd.index(flag):cmd.index(flag) + 2]
        cmd = [w for w in cmd if w != "-MD"]
        results[source.stem] = subprocess.run(cmd, cwd=entry["directory"], capture_output=True, text=True)
    assert results["clean"].returncode == 0, results["clean"].stderr
    assert results["warned"].returncode != 0 and "-Werror=unused-variable" in results["warned"].stderr, \
        results["warned"].stderr
