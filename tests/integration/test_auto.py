"""auto end to end, on real programs: measured routing, the per-machine profile, trials in use, the
below-par native warning, and that measuring never touches the caller's memory.

Every verdict here holds on any machine at any load. Where a test steers a decision, it makes one
candidate fifty times slower (SOL_TEST_SLOW, auto/measure.hpp), a difference no load makes,
or writes the profile's rows itself, and it asserts the decision, never a time or a figure: which
candidate a class goes to, what is tried against what, and that results are bit for bit those of
the chosen library run directly. The rules themselves, with their thresholds, are unit-tested with
exact inputs (tests/unit/auto: the race on a clock the test moves, the trial call by call, the
rules around them). Programs that must see a trial end call for three to six seconds of their own
clock, several times the half second a trial takes; a device's start is waited for, not timed."""
import glob
import json
import os
import re
import shutil
import subprocess
import tempfile

import pytest

from conftest import LIBSOL, PROGRAMS, REFERENCE_BLAS_DIR, SOL, clean_env, run, run_until, sol_lines

# See auto(); also for the runs compared with them (OpenBLAS's results depend on its thread count).
ONE_THREAD = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
MEASURED = re.compile(r"^sol: measured (.+?) \((\w+), ([0-9x]+)\):(.*) GFLOP/s; auto takes (\w+) "
                      r"\(measuring took [0-9.]+ ms(?:, beside (\w+)'s threads)?(; native left out: .*?)?"
                      r"(?:; the call itself on (\w+))?(?:; first run taken again:(.*))?\)$")
TRIED = re.compile(r"^sol: tried (\w+) in use for (.+?): ([0-9.]+) GFLOP/s over (\d+) calls, "
                   r"(\w+) ([0-9.]+) over (\d+) in ([12]) turns(?:; a call every [0-9.]+ ms, [0-9.]+ on \w+)?; "
                   r"auto takes (\w+)$")


@pytest.fixture
def cache():
    """A cache directory of this test's own: its profile starts empty."""
    d = tempfile.mkdtemp(prefix="sol-auto-test-")
    yield d
    shutil.rmtree(d, True)


def auto(cache, program, *args, **env):
    # One thread per library: CTest runs tests side by side on few cores, where a multi-threaded
    # GEMM waits for a descheduled thread of its own. The decisions steered here hold single-threaded.
    # Every race is taken for calm (SOL_TEST_CALM): on a loaded machine a race may be disturbed, its
    # figures provisional and measured again by the next process, which a test that steers another
    # decision must not see; the test of that rule turns it back on.
    e = {"XDG_CACHE_HOME": cache, "SOL_BACKEND": "auto", "SOL_TUNE": "1", "SOL_LOG": "debug", "SOL_TEST_CALM": "1",
         **ONE_THREAD}
    e.update(env)
    return run([str(PROGRAMS / program), *map(str, args)], env=e)


def first_profile(cache, program, *args, **env):
    """A first run of `program` under auto that measured something: its profile's path and text,
    for a test to rewrite."""
    first = auto(cache, program, *args, **env)
    assert first.returncode == 0 and measured(first.stderr), first.stderr
    [path] = profiles(cache)
    with open(path) as f:
        return path, f.read()


def set_rows(path, text, choice, judged=3, rates=None):
    """Writes the profile `text` to `path` with each row's choice and judged count set, its figures
    calm (the test's own) and, given `rates`, its rates: a dict of candidate -> GFLOP/s, or a function
    of each candidate the row has. Without, the rest of each row stays as it is."""
    if rates is None:
        text = re.sub(r"^(row\t(?:[^\t]*\t){4})\w+\t\d+\t\w+", r"\g<1>%s\t%d\tcalm" % (choice, judged), text,
                      flags=re.M)
    else:
        def row(m):
            names = re.findall(r"\t(\w+)=", m.group(3))
            given = rates.items() if isinstance(rates, dict) else [(n, rates(n)) for n in names]
            return "%s%s\t%d\tcalm\t%s%s" % (m.group(1), choice, judged, m.group(2), "".join("\t%s=%s" % r for r in given))
        text = re.sub(r"^(row\t(?:[^\t]*\t){4})\w+\t\d+\t\w+\t(\d+)((?:\t\w+=[0-9.]+)+)$", row, text, flags=re.M)
    with open(path, "w") as f:
        f.write(text)


def rates_of(text):
    """{candidate: GFLOP/s} of " native=97.1 onednn=114.9"."""
    return dict((k, float(v)) for k, v in (r.split("=") for r in text.split()))


def measured(stderr):
    """{(class, symbol): (rates, choice)} of the measurements a run made."""
    out = {}
    for line in stderr.splitlines():
        m = MEASURED.match(line)
        if m:
            rates = rates_of(m.group(4))
            out[(m.group(1), m.group(2))] = (rates, m.group(5))
    return out


def trials(stderr, against="native"):
    """(candidate, class, its best rate in use, the incumbent's, choice) of each trial against
    `against` (native, or with native left out the measured choice)."""
    return [(m.group(1), m.group(2), float(m.group(3)), float(m.group(6)), m.group(9))
            for m in map(TRIED.match, stderr.splitlines()) if m and m.group(5) == against]


def profiles(cache):
    return glob.glob(os.path.join(cache, "sol", "profile-*.tsv"))


def rows(path):
    """The profile's rows, a class's later row (appended when it was measured again or tried in use)
    in place of its earlier ones, as SOL reads them: [row, native, key, class, size, choice, judged,
    how, seq, rates...]."""
    by_class = {}
    with open(path) as f:
        for l in f:
            if l.startswith("row\t") and l.endswith("\n"):
                row = l.rstrip("\n").split("\t")
                by_class[(row[1], row[2])] = row
    return list(by_class.values())


def row_rates(row):
    return dict((k, float(v)) for k, v in (x.split("=") for x in row[9:]))


def cpu_above_sse3():
    flags = open("/proc/cpuinfo").read()
    return " avx2 " in flags or " avx " in flags


def warnings(stderr):
    return [l for l in sol_lines(stderr) if not l.startswith("sol: debug:") and "below" in l]


def same_results(got, program, *args, backend, **env):
    """`got`'s results equal those of `program` run with `backend` named directly (native: without
    libsol), but for the lines after " after" (a rounds count)."""
    args = [str(PROGRAMS / program), *map(str, args)]
    direct = run(args, preload=False, env={**env, **ONE_THREAD}) if backend == "native" else \
        run(args, env={"SOL_BACKEND": backend, **env, **ONE_THREAD})
    assert direct.returncode == 0, direct.stderr
    assert got.stdout.split(" after")[0] == direct.stdout.split(" after")[0], (backend, got.stdout, direct.stdout)


def test_measuring_leaves_caller_memory_alone_and_results_are_the_chosen_backends(cache):
    first = auto(cache, "measured_calls")
    assert first.returncode == 0, first.stderr
    got = measured(first.stderr)
    assert len(got) == 2, "two classes to measure:\n" + first.stderr
    # The openblas backend on the program's own OpenBLAS (which libblas.so.3 forwards to) is the
    # very code native runs: measured once, as native.
    for rates, _ in got.values():
        assert "native" in rates and "openblas" not in rates, rates
    # The first call of a class runs natively (native's sample) and the candidates compute on
    # copies: everything the program sees is what its own library gives it.
    native = run([str(PROGRAMS / "measured_calls")], preload=False, env=ONE_THREAD)
    assert "canaries intact" in native.stdout
    assert first.stdout == native.stdout
    # The invalid call was never measured, and reported exactly as the library reports it.
    assert not any(sym == "dgemm_" for _, sym in got)
    assert "parameter number 13" in native.stdout + native.stderr
    assert [l for l in first.stderr.splitlines() if "DGEMM" in l] == \
           [l for l in native.stderr.splitlines() if "DGEMM" in l]
    # From then on, bit for bit what the profile's choice computes when asked for directly: the
    # "beta" line is the NT call's class, the "alias" line the NN call's. (The profile's, not the
    # race's: a class the race sent away from home stays home until a trial says otherwise.)
    routed = auto(cache, "measured_calls")
    assert measured(routed.stderr) == {}
    lines = dict(l.split(":", 1) for l in routed.stdout.splitlines() if ":" in l)
    [path] = profiles(cache)
    for row in rows(path):
        line = "beta" if "transb=T" in row[3] else "alias"
        direct = native if row[5] == "native" else \
            run([str(PROGRAMS / "measured_calls")], env={"SOL_BACKEND": row[5], **ONE_THREAD})
        assert direct.returncode == 0
        assert lines[line] == dict(l.split(":", 1) for l in direct.stdout.splitlines() if ":" in l)[line], row


def test_a_second_process_routes_from_the_profile_without_measuring(cache):
    first = auto(cache, "measured_calls")
    assert measured(first.stderr)
    [path] = profiles(cache)
    before = rows(path)
    second = auto(cache, "measured_calls")
    assert second.returncode == 0
    assert measured(second.stderr) == {}, second.stderr
    assert "canaries intact" in second.stdout
    # Unchanged, but for a class the first judged within 1.5x: the second counts itself among
    # its judges as it begins its trial (one call of each class: the trial is not over at exit).
    after = rows(path)
    assert len(after) == len(before), (before, after)
    for b, a in zip(before, after):
        rates = sorted(float(r.split("=")[1]) for r in b[9:])
        close = b[6] == "1" and len(rates) > 1 and rates[-1] <= 1.5 * rates[-2]
        if close:  # appended again, with the count and a later sequence number
            assert a[:6] + a[7:8] + a[9:] == b[:6] + b[7:8] + b[9:] and a[6] == "2", (b, a)
        else:
            assert a == b, (b, a)
    # Files private to the user.
    assert os.stat(path).st_mode & 0o077 == 0
    assert os.stat(os.path.dirname(path)).st_mode & 0o077 == 0


# 256: calls well under 2 ms, timed in batches, each of another candidate's calls followed by a
# native one; 768: calls of several ms, screened on a quarter first.
@pytest.mark.parametrize("n", [256, 768])
@pytest.mark.parametrize("slow", ["openblas", "onednn"])
def test_a_slow_backend_is_avoided(cache, slow, n):
    # The reference BLAS as the program's library, so that openblas is a candidate of its own.
    env = {"LD_LIBRARY_PATH": REFERENCE_BLAS_DIR} if slow == "openblas" else {}
    # The knob makes a candidate ten times slower; beside two busy loops every rate fell to 2-4
    # GFLOP/s, the slow candidate's highest.
    def judge(r):
        got = measured(r.stderr)
        assert got, r.stderr
        for (cls, _), (rates, choice) in got.items():
            assert slow in rates, (cls, rates)
        return all(choice != slow for rates, choice in got.values())

    undisturbed(cache, judge, "auto chose the slow " + slow, "measured_calls", n, SOL_TEST_SLOW=slow, **env)


# 256: calls well under 2 ms, timed in batches; 768: calls of several ms, screened on a quarter first.
@pytest.mark.parametrize("n", [256, 768])
@pytest.mark.parametrize("slow", ["openblas", "onednn"])
def test_a_slow_backend_is_avoided(cache, slow, n):
    # The reference BLAS as the program's library, so that openblas is a candidate of its own.
    env = {"LD_LIBRARY_PATH": REFERENCE_BLAS_DIR} if slow == "openblas" else {}
    r = auto(cache, "measured_calls", n, SOL_TEST_SLOW=slow, **env)
    assert r.returncode == 0, r.stderr
    got = measured(r.stderr)
    assert len(got) == 2, r.stderr
    for (cls, _), (rates, choice) in got.items():
        assert slow in rates and choice != slow, (cls, rates)
    [path] = profiles(cache)
    assert all(row[5] != slow for row in rows(path)), rows(path)


def test_the_programs_dnnl_sgemm_is_measured_against_the_blas_backends(cache):
    """A program's own dnnl_sgemm (oneDNN's GEMM, row-major) is measured as a Fortran SGEMM is: the
    program's oneDNN as native against the BLAS backends, instead of assuming that a library other
    than OpenBLAS, MKL or BLIS is slow. With openblas made fifty times slower, the class stays on
    the program's oneDNN, whose results it keeps bit for bit."""
    if not (PROGRAMS / "repeated_dnnl_sgemm").exists():
        pytest.skip("built without oneDNN's headers")
    r = auto(cache, "repeated_dnnl_sgemm", 256, 0.6, SOL_TEST_SLOW="openblas")
    assert r.returncode == 0, r.stderr
    [((cls, symbol), (rates, choice))] = measured(r.stderr).items()
    assert symbol == "dnnl_sgemm" and "row-major" in cls, r.stderr
    assert {"native", "openblas"} <= rates.keys() and choice == "native", r.stderr
    [path] = profiles(cache)
    [row] = rows(path)
    assert row[5] == "native" and "libdnnl" in open(path).read(), row
    plain = run([str(PROGRAMS / "repeated_dnnl_sgemm"), "256", "0"], preload=False, env=ONE_THREAD)
    assert r.stdout.split(" after")[0] == plain.stdout.split(" after")[0]
    # Measurement off: oneDNN's GEMM is an optimized library's, and stays where the program sent it.
    off = auto(cache, "repeated_dnnl_sgemm", 256, 0.1, SOL_TUNE="0", XDG_CACHE_HOME=os.path.join(cache, "off"))
    calls = re.search(r"^sol: (\d+) calls: (\d+) native$", off.stderr, re.M)
    assert off.returncode == 0 and calls and calls.group(1) == calls.group(2), off.stderr


def test_a_class_measured_close_is_measured_again_in_the_other_half_of_its_sizes(cache):
    """Where a class's two fastest candidates measured within 15 % of each other, their rates may
    cross inside it (SGEMM TN on the 2-core EPYC: native 10 % ahead at 256, oneDNN 7 % ahead at
    320), so a call in the other half of a dimension's class (256-383 splits at 320) is measured by
    a sub-class of its own, once; a call in the measured call's halves routes from the class. So is
    a class sent away from native, however far ahead the backend was (dnnl_sgemm NN on a 2-core
    AVX2 EPYC: 76 GFLOP/s at 512, 54 at 640, native 65 at both). A class measured far apart that
    stayed native does neither. The profile's rates and choice are set here, so that the test
    checks the decision, not this machine's figures."""
    path, text = first_profile(cache, "repeated_gemm", 256, 0.1)

    def with_rates(native, others, choice="native"):
        set_rows(path, text, choice, rates=lambda name: native if name == "native" else others)

    with_rates(100, 95)
    same_half = auto(cache, "repeated_gemm", 300, 0.05)
    assert same_half.returncode == 0 and measured(same_half.stderr) == {}, same_half.stderr
    other_half = auto(cache, "repeated_gemm", 320, 0.05)
    got = measured(other_half.stderr)
    assert [cls for cls, _ in got] == ["gemm f32 transa=N transb=N m=320 n=320 k=320"], other_half.stderr
    assert len(rows(path)) == 2
    again = auto(cache, "repeated_gemm", 383, 0.05)  # the same sub-class, now known
    assert again.returncode == 0 and measured(again.stderr) == {}, again.stderr
    # Far apart, native kept: no sub-class.
    with_rates(100, 50)
    far = auto(cache, "repeated_gemm", 320, 0.05)
    assert far.returncode == 0 and measured(far.stderr) == {}, far.stderr
    # Far apart, sent to a backend: the other half is measured for itself.
    [row_line] = [l for l in text.splitlines() if l.startswith("row\t")]
    [backend] = [name for name in re.findall(r"\t(\w+)=", row_line) if name != "native"][:1]
    with_rates(50, 100, backend)
    away = auto(cache, "repeated_gemm", 320, 0.05)
    got = measured(away.stderr)
    assert [cls for cls, _ in got] == ["gemm f32 transa=N transb=N m=320 n=320 k=320"], away.stderr
    same_half = auto(cache, "repeated_gemm", 300, 0.05)
    assert same_half.returncode == 0 and measured(same_half.stderr) == {}, same_half.stderr


@pytest.mark.skipif(not cpu_above_sse3(), reason="this CPU runs Prescott kernels by right")
def test_with_native_left_out_a_class_sent_from_the_openblas_backend_is_measured_again_in_its_other_half(cache):
    """Under Prescott kernels native is left out, and the openblas backend runs the program's
    library with this CPU's kernels: a class sent elsewhere, however far ahead, is measured again
    in the other half of its sizes (oneDNN's SGEMM NN: 73 GFLOP/s at 512, 52 at 640, the instance
    62 and 66), as a class sent away from native is. One that stayed on the openblas backend is
    not. The profile's rates and choice are set here."""
    env = {"OPENBLAS_CORETYPE": "Prescott"}
    path, text = first_profile(cache, "repeated_gemm", 256, 0.1, **env)

    set_rows(path, text, "openblas", rates={"openblas": 100, "onednn": 50})
    kept = auto(cache, "repeated_gemm", 320, 0.05, **env)
    assert kept.returncode == 0 and measured(kept.stderr) == {}, kept.stderr
    set_rows(path, text, "onednn", rates={"openblas": 50, "onednn": 100})
    away = auto(cache, "repeated_gemm", 320, 0.05, **env)
    got = measured(away.stderr)
    assert [cls for cls, _ in got] == ["gemm f32 transa=N transb=N m=320 n=320 k=320"], away.stderr


def test_each_call_goes_where_its_own_class_was_measured_to_go_call_after_call(cache):
    """Fourteen SGEMM calls, interleaved for 40 rounds: the same sizes in each transposition, sizes
    that share a class, Fortran and CBLAS in both layouts. Their classes go to native or to the
    reference backend by the profile (set here: the reference's results differ from OpenBLAS's in
    every one of them), and each call's result is the one of where its own class goes, in every
    round. Without debug lines a thread remembers its calls that stay native (more calls than its
    memo has entries): a call in another transposition, layout or size never follows one of them.
    With info lines every call is seen and counted."""
    rounds = 40

    def to_reference(api, ta, tb, m):
        return (ta != tb) ^ (m >= 96) ^ (api == "C")

    def row_to_reference(key, cls):
        layout = int(key, 16) >> 12 & 3  # none (Fortran), column-major, row-major (auto/profile.cpp)
        ta, tb = re.search(r"transa=(\w) transb=(\w)", cls).groups()
        m = int(re.search(r" m=(\d+)", cls).group(1))
        return to_reference("FCR"[layout], ta, tb, m)

    # A class sent away from native is measured again in the other halves of its sizes (its
    # sub-classes): until a run measures nothing, the profile is written anew, every class and
    # sub-class where its own sizes say, so that which sub-classes there are never depends on the
    # first run's figures.
    first = auto(cache, "interleaved_gemms", 2)
    assert first.returncode == 0 and measured(first.stderr), first.stderr
    [path] = profiles(cache)
    for attempt in range(4):
        with open(path) as f:
            lines = f.read().splitlines()
        for i, l in enumerate(lines):
            if l.startswith("row\t"):
                f = l.split("\t")
                ref = row_to_reference(f[2], f[3])
                rates = ["native=%d" % (50 if ref else 100), "onednn=50", "reference=%d" % (100 if ref else 50)]
                lines[i] = "\t".join(f[:5] + ["reference" if ref else "native", "3", "calm", f[8]] + rates)
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
        settle = auto(cache, "interleaved_gemms", 1)
        assert settle.returncode == 0, settle.stderr
        if not measured(settle.stderr):
            break
    else:
        raise AssertionError("sub-classes still measured after four rewrites: " + settle.stderr)
    native = run([str(PROGRAMS / "interleaved_gemms"), str(rounds)], preload=False, env=ONE_THREAD)
    reference = run([str(PROGRAMS / "interleaved_gemms"), str(rounds)],
                    env={"SOL_BACKEND": "reference", **ONE_THREAD})
    assert native.returncode == 0 and reference.returncode == 0, (native.stderr, reference.stderr)
    expected = []
    for n, r in zip(native.stdout.splitlines(), reference.stdout.splitlines()):
        api, ta, tb, m = re.match(r"(\w) (\w)(\w) (\d+)x", n).groups()
        assert n != r, "the reference backend computes %s as OpenBLAS does: nothing to tell them apart" % n
        expected.append(r if to_reference(api, ta, tb, int(m)) else n)
    for log in ("warn", "debug"):
        got = auto(cache, "interleaved_gemms", rounds, SOL_LOG=log)
        assert got.returncode == 0 and measured(got.stderr) == {}, got.stderr
        assert got.stdout.splitlines() == expected, (log, got.stdout, expected)
    counted = auto(cache, "interleaved_gemms", rounds, SOL_LOG="info")
    calls = 14 * rounds
    assert "sol: %d calls: " % calls in counted.stderr, counted.stderr
    assert counted.stdout.splitlines() == expected, counted.stdout


def test_the_entry_stubs_own_size_check_sends_exactly_the_calls_under_20_kflop_to_native(cache):
    """Under auto a GEMM's entry stub checks m * n * k itself (SOL_ENTRY_GEMM) and sends a call under
    20 kFLOP straight to native. Around that line, through the Fortran BLAS and CBLAS in both
    layouts, real (2mnk flops: 21^3 under, 22^3 not) and complex (8mnk: 13^3 under, 14^3 not), with
    the profile sending every measured class to the reference backend: each call's result says
    where it ran. With SOL_LOG=info, which sees every call, the routed path decides alike."""
    below = {"s": 21, "d": 21, "c": 13, "z": 13}
    specs = [api + t + str(n + at) for api in "FCR" for t in "sdcz" for n in [below[t]] for at in (0, 1)]
    first = auto(cache, "gemm_sizes", *[x for x in specs if int(x[2:]) > below[x[1]]])
    assert first.returncode == 0 and len(measured(first.stderr)) == 12, first.stderr
    [path] = profiles(cache)
    with open(path) as f:
        lines = f.read().splitlines()
    for i, l in enumerate(lines):
        if l.startswith("row\t"):
            f = l.split("\t")
            lines[i] = "\t".join(f[:5] + ["reference", "3", "calm", f[8], "native=50", "reference=100"])
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    native = run([str(PROGRAMS / "gemm_sizes"), *specs], preload=False, env=ONE_THREAD)
    reference = run([str(PROGRAMS / "gemm_sizes"), *specs], env={"SOL_BACKEND": "reference", **ONE_THREAD})
    assert native.returncode == 0 and reference.returncode == 0, (native.stderr, reference.stderr)
    expected = []
    for spec, n, r in zip(specs, native.stdout.splitlines(), reference.stdout.splitlines()):
        assert n != r, "the reference backend computes %s as the native library does" % spec
        expected.append(r if int(spec[2:]) > below[spec[1]] else n)
    for log in ("warn", "info"):
        got = auto(cache, "gemm_sizes", *specs, SOL_LOG=log)
        assert got.returncode == 0 and got.stdout.splitlines() == expected, (log, got.stdout, expected, got.stderr)
    assert "sol: %d calls: " % len(specs) in got.stderr, got.stderr


def test_under_a_native_library_below_par_auto_measures_from_a_16_cubed_gemm(cache):
    """An OpenBLAS on kernels older than the CPU's (OPENBLAS_CORETYPE=Prescott) is below par: the
    openblas backend runs this CPU's kernels, faster from about a 16^3 GEMM, and auto measures from
    8192 flops (2mnk: 15^3 under, 16^3 not; complex 8mnk: 10^3 under, 11^3 not) instead of the 20
    kFLOP that an optimized library keeps (as detected, 16^3 stays unmeasured). Below a 64^3
    GEMM's work native stays in the race (its Prescott kernels beat this CPU's on some sizes, and
    its samples cost little); from there it is left out."""
    specs = ["Fs15", "Fs16", "Cd15", "Cd16", "Fc10", "Fc11", "Rz10", "Rz11", "Fd64"]
    below_par = auto(cache, "gemm_sizes", *specs, OPENBLAS_CORETYPE="Prescott")
    assert below_par.returncode == 0, below_par.stderr
    lines = sorted((m for m in map(MEASURED.match, below_par.stderr.splitlines()) if m), key=lambda m: m.group(3))
    assert [m.group(3) for m in lines] == ["11x11x11", "11x11x11", "16x16x16", "16x16x16", "64x64x64"], \
        below_par.stderr
    for m in lines[:4]:
        assert m.group(7) is None and "native" in rates_of(m.group(4)), m.group(0)
    assert lines[4].group(7) == "; native left out: openblas runs its library with this CPU's kernels", \
        lines[4].group(0)
    shutil.rmtree(os.path.join(cache, "sol"), True)
    detected = auto(cache, "gemm_sizes", *specs)
    assert detected.returncode == 0, detected.stderr
    assert [m.group(3) for m in map(MEASURED.match, detected.stderr.splitlines()) if m] == ["64x64x64"], \
        detected.stderr
    # Bit for bit the program's own library below the floor, with or without libsol.
    plain = run([str(PROGRAMS / "gemm_sizes"), *specs], preload=False, env={"OPENBLAS_CORETYPE": "Prescott",
                                                                           **ONE_THREAD})
    for spec, got, want in zip(specs, below_par.stdout.splitlines(), plain.stdout.splitlines()):
        if spec.endswith(("15", "10")):  # unmeasured (the measured ones' first calls are native's too but Fd64's)
            assert got == want, (spec, got, want)


def test_a_backend_that_slows_the_programs_next_call_is_charged_for_it_in_a_mixed_program(cache):
    """A short call routed away from the program's library, in a program that also calls its
    library, is followed by the program's own calls: a candidate whose threads keep the cores
    busy after it returns (SOL_TEST_SLOW=name:after makes the native call after it fifty times
    slower) loses in a mixed program, though its own calls are as fast. measured_calls' first class
    (NT) is measured before the program made any other call: alone, uncharged; its second (NN)
    beside the threads of where the first went (home), and a candidate other than home is charged
    for home's calls after its own. With the first class on native, oneDNN is charged and the
    second stays native; with it on oneDNN, native's calls follow oneDNN's and native is charged:
    the second goes to oneDNN too."""
    # 128^3: calls of some 40 us, fifty times under the 2 ms beyond which a race stops pairing
    # calls (a call that long is timed alone): load would have to slow native's best sample fifty
    # times to undo the pairing, as it would to undo the knob's charge.
    r = auto(cache, "measured_calls", 128, SOL_TEST_SLOW="onednn:after")
    assert r.returncode == 0, r.stderr
    lines = [m for m in map(MEASURED.match, r.stderr.splitlines()) if m]
    assert len(lines) == 2 and "transb=T" in lines[0].group(1) and lines[0].group(6) is None, r.stderr
    first, second = lines
    home = second.group(6)
    assert home == first.group(5) and second.group(5) == home, (first.group(0), second.group(0))


def test_a_candidate_measured_beside_natives_threads_is_tried_in_use_and_the_profile_keeps_the_trials_verdict(cache):
    """Alone (the program's first class), every candidate ran beside native's spinning threads: the
    best other is tried in use against native, and the class goes where the trial says, its figures
    in use in the profile. The knob slows oneDNN fifty times while measured, as native's threads do
    on few cores: it loses the race, and is tried all the same."""
    r = auto(cache, "repeated_gemm", 256, 3, SOL_TEST_SLOW="onednn:measured")
    assert r.returncode == 0, r.stderr
    [((cls, _), (rates, raced))] = measured(r.stderr).items()
    assert raced == "native" and rates["onednn"] < rates["native"], r.stderr
    [(candidate, tried_cls, in_use, native, choice)] = trials(r.stderr)
    assert (candidate, tried_cls) == ("onednn", cls), r.stderr
    # The profile holds the trial's outcome, and its figures.
    [path] = profiles(cache)
    [row] = rows(path)
    assert row[5] == choice, row
    assert abs(row_rates(row)["onednn"] - in_use) < 0.1 and abs(row_rates(row)["native"] - native) < 0.1, row
    # Results: those of the library that computed the last call (the trial ends with native's
    # turn when native wins; the candidate computes every call after the trial when it wins).
    same_results(r, "repeated_gemm", 256, 0, backend=choice)


def test_a_class_judged_close_is_judged_again_by_the_next_processes(cache):
    """Some shapes run at one of two speeds by the process (its address-space layout): a class
    whose two best candidates one process judged within 1.5x is tried in use again by the next
    processes that call it, up to three in all, each from the profile's choice (the process's first
    call goes where the profile says), and keeps each candidate's best rate. The profile is set
    here: oneDNN chosen, native close behind, figures far below any real ones, a slowed oneDNN's
    included (so that this process's decide); the knob makes oneDNN fifty times slower, a slow draw
    (in every process: the knob is part of the profile's fingerprint)."""
    slow = {"SOL_TEST_SLOW": "onednn"}
    path, text = first_profile(cache, "repeated_gemm", 128, 0.1, **slow)

    def set_row(judged, native, onednn):
        set_rows(path, text, "onednn", judged, {"native": native, "onednn": onednn})

    set_row(1, 0.010, 0.012)
    second = auto(cache, "repeated_gemm", 128, 3, **slow)
    assert second.returncode == 0 and measured(second.stderr) == {}, second.stderr
    assert re.search(r"^sol: trying native in use for .*, between two turns of onednn's: judged within "
                     r"1\.5x by 1 earlier process$", second.stderr, re.M), second.stderr
    [(candidate, _, in_use, incumbent, choice)] = trials(second.stderr, against="onednn")
    assert candidate == "native" and choice == "native", second.stderr
    [row] = rows(path)
    assert row[5:7] == ["native", "2"], row
    assert abs(row_rates(row)["native"] - in_use) < 0.1 and abs(row_rates(row)["onednn"] - incumbent) < 0.1, row
    # Now far apart: settled, routed as it stands.
    third = auto(cache, "repeated_gemm", 128, 0.5, **slow)
    assert third.returncode == 0 and measured(third.stderr) == {} and "trying" not in third.stderr, third.stderr
    assert rows(path) == [row]
    # Judged by three processes, close or not: settled too.
    set_row(3, 0.010, 0.012)
    settled = auto(cache, "repeated_gemm", 128, 0.5, **slow)
    assert settled.returncode == 0 and measured(settled.stderr) == {}, settled.stderr
    assert "trying" not in settled.stderr, settled.stderr
    # Each candidate's best: this process's figures, far lower than the earlier ones (made up here,
    # above anything a machine runs), do not replace them, nor the choice they give.
    set_row(2, 4000, 5000)
    kept = auto(cache, "repeated_gemm", 128, 3, **slow)
    assert kept.returncode == 0 and len(trials(kept.stderr, against="onednn")) == 1, kept.stderr
    [row] = rows(path)
    assert row[5:7] + row[9:] == ["onednn", "3", "native=4000.000", "onednn=5000.000"], row


def test_a_slow_candidate_loses_its_trial_early(cache):
    """Fifty times slower in use too: once native's threads have gone quiet, its best call is still
    far behind native's figure from its first turn, so the trial ends there, without native's
    second turn; the class's later calls run natively."""
    r = auto(cache, "repeated_gemm", 128, 3, SOL_TEST_SLOW="onednn")
    assert r.returncode == 0, r.stderr
    [(candidate, _, _, _, choice)] = trials(r.stderr)
    assert candidate == "onednn" and choice == "native", r.stderr
    [m] = [m for m in map(TRIED.match, r.stderr.splitlines()) if m]
    assert m.group(8) == "1" and int(m.group(7)) >= 3, m.group(0)  # native's first turn only
    calls = re.search(r"^sol: (\d+) calls: (.*)$", r.stderr, re.M)
    per_backend = dict((b, int(n)) for n, b in (p.split() for p in calls.group(2).split(", ")))
    assert per_backend.get("onednn") == int(m.group(4)) and per_backend["native"] > int(m.group(7)), calls.group(0)


def test_no_trial_in_a_mixed_program_for_a_class_that_stays_home(cache):
    """measured_calls' second class is measured after the program's own library ran the first:
    measured beside the threads the first class's calls went to, it needs no trial where it stays
    there (or goes to the program's own library), and one against home where it leaves for another
    backend (next tests); its first class, alone, gets one or none (none when a candidate beat
    native's runs on the copies by 2x)."""
    r = auto(cache, "measured_calls", 128)
    got = [m for m in map(MEASURED.match, r.stderr.splitlines()) if m]
    assert len(got) == 2 and "transb=T" in got[0].group(1), r.stderr
    trying = [l for l in r.stderr.splitlines() if l.startswith("sol: trying")]
    second = [l for l in trying if "transb=T" not in l]
    if got[1].group(5) in (got[1].group(6), "native"):  # where the first class's calls went, or the program's library
        assert not second, r.stderr
    else:  # measured away from there, to a backend: tried in use against it
        assert len(second) == 1 and second[0].endswith("measured away from the threads most of the program's "
                                                      "calls run on"), r.stderr
    assert len(trying) - len(second) <= 1, r.stderr
    assert len(rows(profiles(cache)[0])) == 2


@pytest.mark.skipif(not cpu_above_sse3(), reason="this CPU runs Prescott kernels by right")
def test_a_class_measured_away_from_home_is_tried_in_use_against_home(cache):
    """In a mixed program, a class whose measurement sends it away from the library most of the
    program's calls run on (home) stays on home until it beats home in use, beside home's threads:
    on few cores a race's figures depend on whichever pool spun last. Here the OpenBLAS instance
    takes the program's DGEMM, which oneDNN does not run (OPENBLAS_CORETYPE=Prescott leaves native
    out), and so is home; the SGEMM class's race finds oneDNN faster, the instance slowed while
    measured (SOL_TEST_SLOW=openblas:measured: its runs on the copies, and the class's first call,
    which it makes in the race). With oneDNN slow in use (onednn:inuse) the class stays on home;
    with the instance slow in use too, it goes to oneDNN."""
    for knobs, kept in (("openblas:measured,onednn:inuse", "openblas"), ("openblas:measured,openblas:inuse", "onednn")):
        shutil.rmtree(os.path.join(cache, "sol"), True)
        r = auto(cache, "home_and_away", 64, 256, 6, SOL_TEST_SLOW=knobs, OPENBLAS_CORETYPE="Prescott")
        assert r.returncode == 0, r.stderr
        assert [choice for (cls, sym), (rates, choice) in measured(r.stderr).items() if sym == "sgemm_"] == \
               ["onednn"], r.stderr
        assert re.search(r"^sol: trying onednn in use for gemm f32 .*, between two turns of openblas's: measured "
                         r"away from the threads most of the program's calls run on$", r.stderr, re.M), r.stderr
        tried = re.search(r"^sol: tried onednn in use for gemm f32 .*; auto takes (\w+)$", r.stderr, re.M)
        assert tried and tried.group(1) == kept, (knobs, r.stderr)
        [row] = [x for x in rows(profiles(cache)[0]) if " f32 " in x[3]]
        assert row[5] == kept, (knobs, row)
        # No measuring again beside home's threads: the class was measured there.
        assert "measuring gemm f32" not in r.stderr, r.stderr


@pytest.mark.skipif(not cpu_above_sse3(), reason="this CPU runs Prescott kernels by right")
def test_a_class_whose_switch_slows_the_programs_steps_stays_home_charged_for_them(cache):
    """A trial judges the program's steps too (from each call of the class to its next, in each
    turn): a class whose switch to another library slows the program's other calls stays where they
    run, whatever its own calls do, and the profile charges it the steps' difference. Here the
    OpenBLAS instance is home (home_and_away, Prescott kernels), the SGEMM class's race sends it to
    oneDNN (the instance fifty times slower while measured), and onednn:switch makes the DGEMM that
    follows each of oneDNN's calls fifty times as long, as a library whose threads keep the cores
    busy after it returns does. (That its own calls winning does not save it is unit-tested: the
    trial's figures in use are this machine's.)"""
    r = auto(cache, "home_and_away", 64, 256, 3, SOL_TEST_SLOW="openblas:measured,onednn:switch",
             OPENBLAS_CORETYPE="Prescott")
    assert r.returncode == 0, r.stderr
    assert [choice for (cls, sym), (rates, choice) in measured(r.stderr).items() if sym == "sgemm_"] == \
           ["onednn"], r.stderr
    steps = re.search(r"^sol: tried onednn in use .*; a call every ([0-9.]+) ms, ([0-9.]+) on openblas; auto takes "
                      r"(\w+)$", r.stderr, re.M)
    assert steps and float(steps.group(1)) > 1.02 * float(steps.group(2)) and steps.group(3) == "openblas", r.stderr
    [row] = [x for x in rows(profiles(cache)[0]) if " f32 " in x[3]]
    assert row[5] == "openblas", row
    assert row_rates(row)["onednn"] < row_rates(row)["openblas"], row  # charged for the steps it cost


@pytest.mark.skipif(not cpu_above_sse3(), reason="this CPU runs Prescott kernels by right")
def test_a_class_whose_trial_against_home_is_unfinished_stays_home_until_a_later_process_tries_it(cache, tmp_path):
    """A process that ends while a class measured away from home is on trial against home leaves
    the class on home in the profile, the race's rates as they were: the next run routes it home
    from its first call, rather than starting mixed on a choice no call of it confirmed in use, and
    tries the race's choice there in use, home's turn first, however far apart the race's rates.
    One round of home_and_away: the DGEMM makes the OpenBLAS instance home (Prescott kernels leave
    native out), the SGEMM class's race finds oneDNN faster (the instance fifty times slower), and
    the program ends at the trial's first turn."""
    knobs = dict(SOL_TEST_SLOW="openblas", OPENBLAS_CORETYPE="Prescott")
    r = auto(cache, "home_and_away", 64, 256, 0, **knobs)
    assert r.returncode == 0, r.stderr
    assert [choice for (cls, sym), (rates, choice) in measured(r.stderr).items() if sym == "sgemm_"] == \
           ["onednn"], r.stderr
    assert re.search(r"^sol: trying onednn in use for gemm f32 .*: measured away from the threads", r.stderr,
                     re.M), r.stderr
    assert "sol: tried onednn in use" not in r.stderr, r.stderr  # ended at the incumbent's first turn
    [row] = [x for x in rows(profiles(cache)[0]) if " f32 " in x[3]]
    assert row[5] == "openblas", row
    assert row_rates(row)["onednn"] > row_rates(row)["openblas"], row  # the race's figures, as measured
    shown = run([SOL, "tune", "--show"], preload=False, env={"XDG_CACHE_HOME": cache, **ONE_THREAD, **knobs})
    assert re.search(r"^  sgemm .* openblas\* +1 +calm$", shown.stdout, re.M), shown.stdout
    assert "\n* Kept although another candidate raced faster: " in shown.stdout, shown.stdout
    # The next process: no measuring; it tries the class on oneDNN in use, home's turn first, so
    # that its first call runs on home, as its DGEMM does; it ends before the trial.
    trace = tmp_path / "trace"
    again = auto(cache, "home_and_away", 64, 256, 0, SOL_TRACE="1", SOL_TRACE_DIR=str(trace), **knobs)
    assert again.returncode == 0, again.stderr
    assert not measured(again.stderr), again.stderr
    assert re.search(r"^sol: trying onednn in use for gemm f32 .*, between two turns of openblas's: kept there by 1 "
                     r"earlier process whose trial did not end$", again.stderr, re.M), again.stderr
    served = {}
    for p in glob.glob(str(trace / "**" / "sol-*.summary.json"), recursive=True):
        for o in json.load(open(p))["ops"]:
            served[(o["symbol"], o["backend"])] = served.get((o["symbol"], o["backend"]), 0) + o["calls"]
    assert served == {("dgemm_", "openblas"): 1, ("sgemm_", "openblas"): 1}, (served, again.stderr)
    # A process long enough for the trial: oneDNN wins it (the instance is slow in use too), and
    # the row holds the trial's figures, no longer the race's.
    done = auto(cache, "home_and_away", 64, 256, 6, **knobs)
    assert done.returncode == 0, done.stderr
    [(_, _, in_use, home_rate, choice)] = [t for t in trials(done.stderr, against="openblas") if t[0] == "onednn"]
    assert choice == "onednn", done.stderr
    [row] = [x for x in rows(profiles(cache)[0]) if " f32 " in x[3]]
    assert row[5] == "onednn" and row[6] == "3", row
    assert abs(row_rates(row)["onednn"] - in_use) < 0.1 and abs(row_rates(row)["openblas"] - home_rate) < 0.1, \
        (row, done.stderr)


def warmed_classes(stderr):
    """How many classes a process warmed oneDNN up for, or None when it did not."""
    lines = [l for l in stderr.splitlines() if l.startswith("sol: warmed onednn up for ")]
    assert len(lines) <= 1, stderr
    return int(lines[0].split()[5]) if lines else None


def test_oneDNN_is_warmed_up_for_what_auto_will_measure_or_route_there(cache):
    """oneDNN's first dnnl_sgemm in a process costs it about 30 ms (its start-up, the kernels of
    every later shape included). When auto may measure, a 64x64x64 SGEMM runs first on a start-up
    thread (or before the first measurement, which waits for it), so that measuring times oneDNN
    rather than its set-up, unless the profile is settled (no class of it is judged again: a
    program calling its classes again measures nothing; its first measurement, if any, sets oneDNN
    up before it begins); a run that routes from the profile also prepares the classes the profile
    sends there; the openblas backend is set up first (on a CPU its program's OpenBLAS does not
    know, a private instance of it). Without either, nothing runs. Results stay those of the chosen
    library."""
    first = auto(cache, "measured_calls")
    assert first.returncode == 0, first.stderr
    assert warmed_classes(first.stderr) == 1, first.stderr  # the set-up alone: nothing routed yet
    # The openblas backend, a candidate of every measurement, is set up first.
    assert "sol: set openblas up ahead in " in first.stderr, first.stderr
    [path] = profiles(cache)
    with open(path) as f:
        text = f.read()
    plain = run([str(PROGRAMS / "measured_calls")], preload=False, env=ONE_THREAD)
    # Every class to native, measurement off: nothing to prepare.
    set_rows(path, text, "native")
    none = auto(cache, "measured_calls", SOL_TUNE="0")
    assert none.returncode == 0 and warmed_classes(none.stderr) is None, none.stderr
    assert "set openblas up" not in none.stderr, none.stderr
    assert none.stdout == plain.stdout
    # The same, settled (native's rate the best, judged by three processes), measurement on: oneDNN
    # is not set up for a measurement that the program's classes do not need.
    set_rows(path, text, "native", rates=lambda n: 100 if n == "native" else 50)
    settled = auto(cache, "repeated_gemm", 96, 0.6)
    assert settled.returncode == 0 and not measured(settled.stderr), settled.stderr
    assert warmed_classes(settled.stderr) is None, settled.stderr
    assert "up for a measurement" not in settled.stderr, settled.stderr
    # A class the settled profile lacks: its measurement sets oneDNN up first, untimed.
    new = auto(cache, "repeated_gemm", 200, 0.6)
    assert new.returncode == 0 and measured(new.stderr), new.stderr
    assert "sol: set onednn up for a measurement in " in new.stderr, new.stderr
    assert new.stderr.index("up for a measurement") < new.stderr.index("sol: measured "), new.stderr
    # Classes still to be judged again (close rates, one process so far): the next process may
    # measure, and oneDNN is set up for it.
    set_rows(path, text, "native", judged=1, rates=lambda n: 100 if n == "native" else 95)
    unsettled = auto(cache, "repeated_gemm", 96, 3)
    assert unsettled.returncode == 0 and warmed_classes(unsettled.stderr) == 1, unsettled.stderr
    assert "up for a measurement" not in unsettled.stderr, unsettled.stderr
    # Every class to oneDNN, settled (judged by three processes: a choice behind another's rate is
    # otherwise tried again in use): each prepared ahead (no set-up besides: the profile is settled)
    # by a process that lives long enough for the start-up thread (0.2 s: a shorter one is not
    # worth it, and may end before it), and computed there.
    set_rows(path, text, "onednn")
    short = auto(cache, "measured_calls")
    # (Short as it is, on a loaded machine it may live long enough: then it warms every class.)
    assert short.returncode == 0 and warmed_classes(short.stderr) in (None, len(rows(path))), short.stderr
    direct = run([str(PROGRAMS / "measured_calls")], env={"SOL_BACKEND": "onednn", **ONE_THREAD})
    assert short.stdout == direct.stdout
    warmed = auto(cache, "repeated_gemm", 96, 3)
    assert warmed.returncode == 0, warmed.stderr
    assert not measured(warmed.stderr), warmed.stderr  # routed from the profile
    assert warmed_classes(warmed.stderr) == len(rows(path)), warmed.stderr
    direct = run([str(PROGRAMS / "repeated_gemm"), "96", "0"], env={"SOL_BACKEND": "onednn", **ONE_THREAD})
    assert warmed.stdout.split(" after")[0] == direct.stdout.split(" after")[0]


def test_measurement_off(cache):
    r = auto(cache, "measured_calls", SOL_TUNE="0")
    assert r.returncode == 0
    assert measured(r.stderr) == {}
    assert profiles(cache) == []
    assert "canaries intact" in r.stdout


def test_a_corrupt_profile_is_ignored_with_one_line_and_rebuilt(cache):
    auto(cache, "measured_calls")
    [path] = profiles(cache)
    with open(path) as f:
        text = f.read()
    # A last line cut short (a crash of the system while a row was appended) is only dropped.
    with open(path, "w") as f:
        f.write(text + "row\ttorn")
    r = auto(cache, "measured_calls")
    assert not [l for l in sol_lines(r.stderr) if "ignored" in l] and measured(r.stderr) == {}, r.stderr
    # A malformed whole line: the profile is ignored, with one line, and rebuilt.
    with open(path, "w") as f:
        f.write(text + "row\tmalformed\n")
    r = auto(cache, "measured_calls", SOL_LOG="warn")
    ignored = [l for l in sol_lines(r.stderr) if "ignored" in l]
    assert len(ignored) == 1 and path in ignored[0] and "corrupt" in ignored[0], r.stderr
    assert "canaries intact" in r.stdout
    again = auto(cache, "measured_calls")
    assert measured(again.stderr) == {} and not [l for l in sol_lines(again.stderr) if "ignored" in l]


def test_another_cpu_or_native_library_is_measured_again(cache):
    auto(cache, "measured_calls")
    [mine] = profiles(cache)
    other_cpu = auto(cache, "measured_calls", SOL_TEST_CPU_MODEL="Some Other CPU")
    assert measured(other_cpu.stderr)
    assert len(profiles(cache)) == 2
    # The reference BLAS as the program's library: a row of its own in this machine's profile.
    reference = auto(cache, "measured_calls", 512, LD_LIBRARY_PATH=REFERENCE_BLAS_DIR)
    got = measured(reference.stderr)
    assert got, reference.stderr
    natives = {r[1].split(":")[0] for r in rows(mine)}
    assert any("/blas/" in n for n in natives) and len(natives) == 2, natives
    # ...which is far below the CPU's ability: auto leaves it, and says so once.
    for rates, choice in got.values():
        assert choice != "native", rates
    assert len(warnings(reference.stderr)) == 1, reference.stderr


def test_processes_measuring_at_once_keep_every_measurement(cache):
    sizes = [64, 128, 256, 512]
    procs = [subprocess.Popen([str(PROGRAMS / "measured_calls"), str(n)],
                              env=clean_env({"XDG_CACHE_HOME": cache, "SOL_BACKEND": "auto", "SOL_TUNE": "1",
                                             "SOL_TEST_CALM": "1", **ONE_THREAD}),
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for n in sizes]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    [path] = profiles(cache)
    classes = {r[3] for r in rows(path)}
    # Per size, the NT call (beta) and the NN call (aliasing): two classes each.
    assert len(classes) == 2 * len(sizes), classes


@pytest.mark.skipif(not cpu_above_sse3(), reason="this CPU runs Prescott kernels by right")
def test_a_race_while_the_process_starts_is_provisional_and_measured_again_once_calm(cache):
    """A program that calls at once races its first class while its library's thread pool, started
    at its load, still spins: those figures are provisional. The class routes by them, and is
    measured again once the pool is quiet; a later process routes by the calm figures without
    measuring. home_and_away's DGEMM under Prescott kernels has one candidate (the OpenBLAS instance:
    no trial follows to replace its figures). The pool's spin is made about a second long
    (OPENBLAS_THREAD_TIMEOUT=30: 2^30 counter ticks), so that the first call falls inside it and
    later calls after it, however loaded the machine."""
    env = {"OPENBLAS_NUM_THREADS": "2", "OPENBLAS_THREAD_TIMEOUT": "30", "OPENBLAS_CORETYPE": "Prescott",
           "SOL_TEST_CALM": "0"}
    r = auto(cache, "home_and_away", 64, 64, 3, **env)
    assert r.returncode == 0, r.stderr
    dgemm = "gemm f64 transa=N transb=N m=64 n=64 k=64"
    assert re.search(r"^sol: provisional figures for %s: the process is starting" % dgemm, r.stderr, re.M), r.stderr
    assert re.search(r"^sol: measuring %s again, calm: its figures were provisional$" % dgemm, r.stderr, re.M), \
        r.stderr
    assert [m.group(1) for m in map(MEASURED.match, r.stderr.splitlines()) if m].count(dgemm) == 2, r.stderr
    [row] = [x for x in rows(profiles(cache)[0]) if x[3] == dgemm]
    assert row[7] == "calm", row
    later = auto(cache, "home_and_away", 64, 64, 0.5, **env)
    assert later.returncode == 0, later.stderr
    assert dgemm not in [m.group(1) for m in map(MEASURED.match, later.stderr.splitlines()) if m], later.stderr
    shown = run([SOL, "tune", "--show", "--format", "json"], preload=False, env={"XDG_CACHE_HOME": cache, **ONE_THREAD,
                                                                                **env})
    assert any(x["figures"] == "calm" and x["routine"] == "dgemm" for x in json.loads(shown.stdout)["rows"]), \
        shown.stdout


def test_eight_first_runs_at_once_leave_the_profile_one_run_would(cache):
    """Eight processes of one program measuring from an empty profile at once, then one more: every
    class routes where it does after a single first run, and the file holds one row per class. oneDNN
    is fifty times slower, so that where each class goes is known."""
    slow = {"SOL_TEST_SLOW": "onednn"}
    single = os.path.join(cache, "single")
    alone = auto(single, "measured_calls", 128, **slow)
    assert alone.returncode == 0, alone.stderr
    [path] = glob.glob(os.path.join(single, "sol", "profile-*.tsv"))
    want = {r[3]: r[5] for r in rows(path)}
    procs = [subprocess.Popen([str(PROGRAMS / "measured_calls"), "128"],
                              env=clean_env({"XDG_CACHE_HOME": cache, "SOL_BACKEND": "auto", "SOL_TUNE": "1",
                                             "SOL_TEST_CALM": "1", **ONE_THREAD, **slow}),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(8)]
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0 and out == alone.stdout, err
    after = auto(cache, "measured_calls", 128, **slow)
    assert after.returncode == 0 and after.stdout == alone.stdout, after.stderr
    [path] = profiles(cache)
    got = {r[3]: r[5] for r in rows(path)}
    assert got == want == {c: "native" for c in want}, (got, want)


@pytest.mark.skipif(not cpu_above_sse3(), reason="this CPU runs Prescott kernels by right")
def test_misdetected_openblas_is_reported_once_and_routed_around(cache):
    env = {"OPENBLAS_CORETYPE": "Prescott"}
    native = run([str(PROGRAMS / "measured_calls"), "512"], preload=False, env={**env, **ONE_THREAD})
    assert native.returncode == 0
    r = auto(cache, "measured_calls", 512, SOL_LOG="warn", **env)
    assert r.returncode == 0, r.stderr
    lines = warnings(r.stderr)
    assert len(lines) == 1, r.stderr
    assert "OPENBLAS_CORETYPE=" in lines[0] and "Prescott" in lines[0], lines
    assert "canaries intact" in r.stdout
    dbg = auto(cache, "measured_calls", 512, SOL_TEST_CPU_MODEL="fresh profile", **env)
    got = measured(dbg.stderr)
    assert got, dbg.stderr
    for rates, choice in got.values():
        assert choice != "native", rates
    # The first class is measured alone; the next one beside the threads of the library the first
    # went to, which the program's calls now use (not native's, which it left).
    lines = [m for m in map(MEASURED.match, dbg.stderr.splitlines()) if m]
    assert len(lines) >= 2 and lines[0].group(6) is None, dbg.stderr
    assert lines[1].group(6) == lines[0].group(5), (lines[0].group(0), lines[1].group(0))
    # The openblas backend runs the same library with this CPU's kernels: native is neither
    # measured nor called, and no class is tried against it.
    assert all("native" not in rates for rates, _ in got.values()), got
    assert all(m.group(7) == "; native left out: openblas runs its library with this CPU's kernels"
               for m in lines), dbg.stderr
    # Without native's call, the library whose threads the program's calls use made the second
    # class's call, timed as its first sample (measuring costs one whole call fewer).
    assert lines[1].group(8) == lines[0].group(5), lines[1].group(0)
    assert not trials(dbg.stderr) and "turns of native's" not in dbg.stderr, dbg.stderr
    # Without the misdetection, the same machine has nothing to say.
    quiet = auto(cache, "measured_calls", 512, SOL_LOG="warn")
    assert not [l for l in warnings(quiet.stderr) if "OPENBLAS_CORETYPE" in l], quiet.stderr


@pytest.mark.skipif(not cpu_above_sse3(), reason="this CPU runs Prescott kernels by right")
def test_with_measurement_off_a_misdetected_openblas_is_still_routed_around(cache):
    """Measurement off and no profile: where the program's OpenBLAS runs Prescott kernels and SOL's
    openblas backend runs the same library with this CPU's, the built-in order takes the backend
    over native, with the results of that backend run directly. Without the misdetection, every
    call stays native."""
    env = {"OPENBLAS_CORETYPE": "Prescott", **ONE_THREAD}

    def where(r):
        m = re.search(r"^sol: \d+ calls: (.*)$", r.stderr, re.M)
        assert r.returncode == 0 and m, r.stderr
        return dict((k, int(n)) for n, k in (p.split() for p in m.group(1).split(", ")))

    routed = auto(cache, "measured_calls", 512, SOL_TUNE="0", SOL_LOG="info", **env)
    direct = run([str(PROGRAMS / "measured_calls"), "512"], env={"SOL_BACKEND": "openblas", **env})
    assert direct.returncode == 0, direct.stderr
    got = where(routed)
    assert got.get("openblas", 0) >= 2 and "native" not in got, routed.stderr
    assert routed.stdout == direct.stdout and "canaries intact" in routed.stdout
    assert profiles(cache) == []
    quiet = auto(cache, "measured_calls", 512, SOL_TUNE="0", SOL_LOG="info")
    assert set(where(quiet)) == {"native"}, quiet.stderr


@pytest.mark.skipif(not cpu_above_sse3(), reason="this CPU runs Prescott kernels by right")
def test_with_native_left_out_the_runner_up_is_tried_in_use_against_the_choice(cache):
    """With native left out, the candidates were measured beside each other's threads: the best
    other is tried in use against the measured choice, and the class goes to whichever did better
    there. The knob slows oneDNN fifty times while measured, so that it loses the race; its trial
    decides where the class goes, and the results are that backend's."""
    env = {"OPENBLAS_CORETYPE": "Prescott"}
    r = auto(cache, "repeated_gemm", 256, 3, SOL_TEST_SLOW="onednn:measured", **env)
    assert r.returncode == 0, r.stderr
    [((cls, _), (rates, raced))] = measured(r.stderr).items()
    assert "native" not in rates and raced == "openblas", r.stderr
    [(candidate, tried_cls, _, _, choice)] = trials(r.stderr, against="openblas")
    assert (candidate, tried_cls) == ("onednn", cls), r.stderr
    [row] = rows(profiles(cache)[0])
    assert row[5] == choice, row
    same_results(r, "repeated_gemm", 256, 0, backend=choice, **env)


@pytest.mark.skipif(not cpu_above_sse3(), reason="this CPU runs Prescott kernels by right")
def test_a_trials_incumbent_is_judged_by_its_calls_in_use_not_its_race(cache):
    """The incumbent's figure in a trial is its calls' in use, as the candidate's is: its race rate
    may be a quarter's, scaled, or a run away from the other's threads. Here oneDNN wins the race
    (the OpenBLAS instance fifty times slower there) and is fifty times slower in use: the instance,
    tried against it, wins."""
    r = auto(cache, "repeated_gemm", 256, 3, OPENBLAS_CORETYPE="Prescott",
             SOL_TEST_SLOW="openblas:measured,onednn:inuse")
    assert r.returncode == 0, r.stderr
    assert [choice for (cls, sym), (rates, choice) in measured(r.stderr).items()] == ["onednn"], r.stderr
    [(candidate, _, in_use, incumbent, choice)] = trials(r.stderr, against="onednn")
    assert candidate == "openblas" and choice == "openblas", r.stderr
    [row] = rows(profiles(cache)[0])
    assert row[5] == "openblas" and row_rates(row)["onednn"] < row_rates(row)["openblas"], row


@pytest.mark.skipif(not cpu_above_sse3(), reason="this CPU runs Prescott kernels by right")
def test_with_native_left_out_a_slow_candidate_loses_its_trial_against_the_choice(cache):
    """With native left out, the program's call that begins the trial is the incumbent's (the
    OpenBLAS instance's), the first of its first turn. A candidate fifty times slower loses there,
    in the first of the incumbent's turns (the unit tests of auto/trial.hpp check that only
    its calls begun once the instance's workers are quiet may end it)."""
    r = auto(cache, "repeated_gemm", 256, 3, OPENBLAS_CORETYPE="Prescott", SOL_TEST_SLOW="onednn")
    assert r.returncode == 0, r.stderr
    [(candidate, _, _, _, choice)] = trials(r.stderr, against="openblas")
    assert candidate == "onednn" and choice == "openblas", r.stderr
    [m] = [m for m in map(TRIED.match, r.stderr.splitlines()) if m]
    assert m.group(8) == "1", m.group(0)


def test_a_library_that_lost_every_class_is_left_out_of_the_next(cache):
    """A slow native library (the reference BLAS, plain loops) loses each class by 1.5x or more:
    once it lost two, and the program's calls run elsewhere, a new class is measured without it
    (its calls are many times slower) and computed by the backend the program's calls now use
    (its first sample), bit for bit as that backend named directly. The reference BLAS's timed calls
    and oneDNN are made fifty times slower, so that the OpenBLAS backend takes every class by far:
    home is known. A library that holds its own is measured as ever."""
    env = {"LD_LIBRARY_PATH": REFERENCE_BLAS_DIR, "SOL_TEST_SLOW": "native,onednn"}
    r = auto(cache, "gemm_classes", 192, 256, 512, **env)
    assert r.returncode == 0, r.stderr
    lines = [m for m in map(MEASURED.match, r.stderr.splitlines()) if m]
    assert len(lines) == 3, r.stderr
    assert [m.group(5) for m in lines] == ["openblas"] * 3, r.stderr
    assert [m.group(7) for m in lines] == [None, None, "; native left out: it lost each earlier class by 1.5x"], \
        r.stderr
    assert "native" not in rates_of(lines[2].group(4)), r.stderr
    # The call itself was made by home, timed as its first sample.
    assert lines[2].group(8) == "openblas", r.stderr
    direct = run([str(PROGRAMS / "gemm_classes"), "512"],
                 env={"SOL_BACKEND": "openblas", "LD_LIBRARY_PATH": REFERENCE_BLAS_DIR, **ONE_THREAD})
    assert r.stdout.splitlines()[2] == direct.stdout.splitlines()[0], (r.stdout, direct.stdout)
    # The program's own OpenBLAS holds its own against a backend fifty times slower: measured in
    # every class.
    shutil.rmtree(os.path.join(cache, "sol"), True)
    held = auto(cache, "gemm_classes", 192, 256, 512, SOL_TEST_SLOW="onednn")
    assert held.returncode == 0 and len(measured(held.stderr)) == 3 and "left out" not in held.stderr, held.stderr


def numbers(text):
    return [float(x) for x in re.findall(r"[-+]?\d+\.\d+(?:e[-+]?\d+)?", text)]


def test_framework_workloads_under_auto_with_measurement(cache):
    """The shared PyTorch and NumPy workloads under auto, measuring from an empty profile: they run,
    and their results agree with the native run's to float rounding (auto may pick another
    library for some shapes)."""
    from conftest import PYTHON, SOURCE
    workloads = SOURCE.parent / "shared" / "workloads"
    if not workloads.is_dir():
        pytest.skip("../shared/workloads is not beside the checkout")
    env = {"XDG_CACHE_HOME": cache, "SOL_BACKEND": "auto", "SOL_TUNE": "1"}
    for cmd, rel in (([PYTHON, str(workloads / "torch_train.py"), "--iters", "5"], 1e-4),
                     ([PYTHON, str(workloads / "numpy_blas.py")], 1e-5)):
        sol = run(cmd, env=env)
        assert sol.returncode == 0, sol.stderr
        native = run(cmd, preload=False)
        got, want = numbers(sol.stdout.split("loop_s")[0]), numbers(native.stdout.split("loop_s")[0])
        assert len(got) == len(want) > 0, (sol.stdout, native.stdout)
        for g, w in zip(got, want):
            assert abs(g - w) <= rel * max(1.0, abs(w)), (cmd, sol.stdout, native.stdout)
    assert profiles(cache), "nothing was measured"


def test_sol_tune_measures_ahead_and_shows_the_profile(cache):
    env = {"XDG_CACHE_HOME": cache, "SOL_TUNE": "1", **ONE_THREAD}
    r = run([SOL, "tune", "--quick", "--time-limit", "60"], preload=False, env={**env, "SOL_LOG": "debug"})
    assert r.returncode == 0, r.stderr
    assert "sol: tune:" in r.stderr
    # Each shape in a process of its own: its class measured alone, not beside the threads of the
    # shapes before it; and a class tried in use called until its trial was over.
    got = [m for m in map(MEASURED.match, r.stderr.splitlines()) if m]
    assert got and all(m.group(6) is None for m in got), r.stderr
    tried = set(re.findall(r"^sol: tried (\w+) in use for (.+?): ", r.stderr, re.M))
    trying = set(re.findall(r"^sol: trying (\w+) in use for (.+?), between", r.stderr, re.M))
    assert trying <= tried, (trying - tried, r.stderr)
    [path] = profiles(cache)
    assert path in r.stdout
    measured_rows = rows(path)
    assert len(measured_rows) >= 8, r.stdout  # s/d gemm NN/TN/NT at two sizes, gemv
    # A program then routes its first call from the profile: nothing left to measure.
    again = auto(cache, "measured_calls", 256)
    assert measured(again.stderr) == {} or all("transb=T" in c for c, _ in measured(again.stderr))
    shown = run([SOL, "tune", "--show", "--format", "json"], preload=False, env=env)
    assert shown.returncode == 0, shown.stderr
    data = json.loads(shown.stdout)
    assert data["path"] == path and len(data["rows"]) == len(rows(path))
    for row in data["rows"]:
        assert row["choice"] in row["gflops"] and row["gflops"][row["choice"]] > 0
        assert row["routine"] in ("sgemm", "dgemm", "sgemv", "dgemv")
        assert 1 <= row["processes"] <= 3, row
    text = run([SOL, "tune", "--show"], preload=False, env=env)
    assert "sgemm" in text.stdout and "choice" in text.stdout and "processes" in text.stdout
    off = run([SOL, "tune"], preload=False, env={**env, "SOL_TUNE": "0"})
    assert off.returncode == 2 and sol_lines(off.stderr) == [off.stderr.strip()]


def test_sol_tune_from_a_traced_run_measures_exactly_its_classes(cache, tmp_path):
    """sol tune --from RUN: the GEMM and GEMV shape classes a traced NumPy run met (CBLAS, row-major
    GEMMs and a column-major GEMV), each tuned in a process of its own; the program then routes every
    call from its first without measuring."""
    from conftest import PYTHON
    script = tmp_path / "mm.py"
    script.write_text("import numpy as np\n"
                      "a = np.ones((128, 64), np.float32); b = np.ones((64, 96), np.float32)\n"
                      "for _ in range(3): c = a @ b\n"
                      "d = np.ones((200, 300)); f = d @ np.ones((300, 50)); g = d @ np.ones(300)\n"
                      "print(float(c.sum()), float(f.sum()), float(g.sum()))\n")
    trace = tmp_path / "trace"
    traced = run([SOL, "run", "--trace", "--trace-dir", str(trace), "--", PYTHON, str(script)], preload=False,
                 env={"XDG_CACHE_HOME": cache})
    assert traced.returncode == 0, traced.stderr
    env = {"XDG_CACHE_HOME": cache, "SOL_TUNE": "1", **ONE_THREAD}
    tuned = run([SOL, "tune", "--from", str(trace), "--time-limit", "120"], preload=False, env=env)
    assert tuned.returncode == 0, tuned.stderr
    assert re.search(r"^sol: tune: 3 shapes from ", tuned.stderr, re.M), tuned.stderr
    [path] = profiles(cache)
    got = rows(path)
    assert len(got) == 3 and all(r[7] == "tuned" for r in got), got
    assert {r[3].split(" m=")[0] for r in got} == {"gemm f32 row-major transa=N transb=N",
                                                   "gemm f64 row-major transa=N transb=N", "gemv f64 transa=T"}, got
    again = run([PYTHON, str(script)], env={**env, "SOL_BACKEND": "auto", "SOL_LOG": "debug"})
    assert again.returncode == 0 and not measured(again.stderr), again.stderr
    assert again.stdout == traced.stdout
    bad = run([SOL, "tune", "--from", str(tmp_path / "nowhere")], preload=False, env=env)
    assert bad.returncode == 2 and sol_lines(bad.stderr) == [bad.stderr.strip()], bad.stderr


# ---------------------------------------------------------------------------- an accelerator starting

STARTED = "sol: opencl: device started ahead of the first call"
COUNTS = re.compile(r"^sol: (\d+) calls: (\d+) native, (\d+) opencl$", re.M)
MADE = re.compile(r"^device_gemms: (\d+) calls$", re.M)


def until_started(program, env, flag):
    """Runs `program` (device_gemms ...) with until=`flag`, creating `flag` once libsol says the
    device started (or that opencl is unavailable), however long that takes."""
    return run_until(program + ["until=%s" % flag], flag, (STARTED, "sol: backend opencl unavailable"), env=env)


@pytest.fixture
def starting_accelerator(tmp_path):
    """Runs device_gemms under auto with pocl's device taken for an accelerator, its start-up made a
    second longer by the test knob, its calls 75 ms apart until the device is up, and 10 after:
    (run, profile directory). The device's threshold is explicit (so that its costs are not
    measured) and its program cache and the profile are the test's own."""
    config = tmp_path / "sol.toml"
    config.write_text('[backends.opencl]\ncache_dir = "%s"\nmin_flops = 1000000\n[tune]\ndir = "%s"\n'
                      % (tmp_path / "opencl", tmp_path / "tune"))
    runs = []

    def go():
        env = {"SOL_CONFIG": str(config), "SOL_BACKEND": "auto", "SOL_TUNE": "1", "SOL_LOG": "debug", "SOL_TEST_CALM": "1",
               "SOL_TEST_OPENCL_ACCELERATOR": "1", "SOL_TEST_SLOW": "opencl:startup", **ONE_THREAD}
        flag = tmp_path / ("up-%d" % len(runs))
        r = until_started([str(PROGRAMS / "device_gemms"), "96", "96", "96", "10", "paced=75"], env, flag)
        runs.append(r)
        assert r.returncode == 0, r.stderr
        if "backend opencl unavailable" in r.stderr:
            pytest.skip("opencl is not available here (see `sol backends`)")
        return r
    return go, tmp_path / "tune"


def test_no_call_waits_for_an_accelerator_to_start_and_classes_are_measured_once_it_is_up(starting_accelerator):
    """auto starts a device that may be an accelerator on a thread of its own: the program's calls
    route among the CPU's candidates until it is up (a GPU's context and cost measurement took 0.8 s
    of the first call), and a class is measured only then, with the device among its candidates."""
    go, _ = starting_accelerator
    r = go()
    lines = r.stderr.splitlines()
    started = [i for i, l in enumerate(lines) if l.startswith(STARTED)]
    assert len(started) == 1, r.stderr
    returned = [i for i, l in enumerate(lines) if l.startswith("device_gemms: call ")]
    # The start-up takes a second longer than its own work; the calls come every 75 ms and none
    # waits for it.
    assert sum(i < started[0] for i in returned) >= 3, r.stderr
    got = measured(r.stderr)
    assert len(got) == 1, r.stderr
    [(rates, _)] = got.values()
    assert "opencl" in rates, r.stderr
    measured_at = [i for i, l in enumerate(lines) if MEASURED.match(l)]
    assert measured_at[0] > started[0], r.stderr
    # Its calls ran on native and whichever candidate won (which may round differently).
    calls = MADE.search(r.stderr).group(1)
    native = run([str(PROGRAMS / "device_gemms"), "96", "96", "96", calls], preload=False, env=ONE_THREAD)
    assert float(r.stdout.split()[-1]) == pytest.approx(float(native.stdout.split()[-1]), rel=1e-5)


def test_a_class_the_profile_sends_to_a_starting_accelerator_goes_there_once_it_is_up(starting_accelerator):
    """A second process routes from the profile from its first call, except where the profile's
    choice is a device still starting: those calls go where nothing measured would send them, and
    to the device once it is up."""
    go, tune = starting_accelerator
    first = go()
    assert measured(first.stderr), first.stderr
    [path] = glob.glob(str(tune / "profile-*.tsv"))
    with open(path) as f:
        lines = f.read().splitlines()
    for i, l in enumerate(lines):
        if l.startswith("row\t"):
            f = l.split("\t")
            lines[i] = "\t".join(f[:5] + ["opencl", "3", "calm", f[8], "native=100", "onednn=50", "opencl=200"])
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    r = go()
    m = COUNTS.search(r.stderr)
    assert m and int(m.group(2)) >= 3 and int(m.group(3)) >= 10, r.stderr
    assert measured(r.stderr) == {}, r.stderr


def test_a_process_that_never_calls_blas_starts_no_device(tmp_path):
    """Under auto a device starts at the first BLAS call, not when the library is loaded: a process
    that only loads BLAS creates no device context (a child it forked could not use one again). A
    backend SOL_BACKEND names starts as soon as the library is there."""
    config = tmp_path / "sol.toml"
    config.write_text('[backends.opencl]\ncache_dir = "%s"\n[tune]\ndir = "%s"\n' % (tmp_path / "cl", tmp_path / "tune"))
    program = [str(PROGRAMS / "device_gemms"), "96", "96", "96", "0"]
    env = {"SOL_CONFIG": str(config), "SOL_LOG": "debug", "SOL_TEST_OPENCL_ACCELERATOR": "1", **ONE_THREAD}
    named = until_started(program, {**env, "SOL_BACKEND": "opencl"}, tmp_path / "up")
    assert named.returncode == 0, named.stderr
    if "backend opencl unavailable" in named.stderr:
        pytest.skip("opencl is not available here (see `sol backends`)")
    assert STARTED in named.stderr, named.stderr
    # A negative: however loaded the machine, a device that does not start prints nothing.
    under_auto = run(program + ["wait=300"], env={**env, "SOL_BACKEND": "auto"})
    assert under_auto.returncode == 0, under_auto.stderr
    assert "sol: opencl:" not in under_auto.stderr, under_auto.stderr
