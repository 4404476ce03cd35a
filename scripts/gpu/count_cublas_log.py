"""Counts cuBLAS and cuBLASLt API calls in their own logs (CUBLAS_LOGINFO_DBG=1 with
CUBLAS_LOGDEST_DBG, CUBLASLT_LOG_LEVEL=5 with CUBLASLT_LOG_FILE): the independent counter of
scripts/gpu/cublas_trace.sh. Compares the counts with a SOL trace's summary.json.

    python3 count_cublas_log.py CUBLAS_LOG LT_LOG SUMMARY_JSON...

Prints one line per GEMM entry point seen on either side, "PASS count ..." or "FAIL count ...",
and exits 1 on a mismatch. cuBLAS entry points must match exactly. cublasLtMatmul may be logged
more often than traced: libcublas itself calls cublasLtMatmul for some GEMMs, and such a call,
made while libsol traces the cuBLAS call around it, goes straight to cuBLASLt untraced (the
re-entry guard), while cuBLASLt logs it. That difference is printed as a WARN line; more traced
than logged is a failure. cuBLAS logs "... function cublasStatus_t cublasSgemm_v2(...) called:"
per call, cuBLASLt "[...][cublasLt][pid][Api][cublasLtMatmul] ..." per API call; the names are
matched as words followed by "(" or inside "[...]", whatever else a line holds."""
import collections
import json
import re
import sys


def gemm_names(summary_paths):
    traced = collections.Counter()
    for path in summary_paths:
        with open(path) as f:
            s = json.load(f)
        for op in s["ops"]:
            if op["api"] in ("cublas", "cublaslt") and op["op"] in ("gemm", "gemv"):
                traced[op["symbol"]] += op["calls"]
    return traced


def logged(path, pattern):
    counts = collections.Counter()
    try:
        with open(path, errors="replace") as f:
            for line in f:
                for name in pattern.findall(line):
                    counts[name] += 1
    except FileNotFoundError:
        pass
    return counts


def main():
    cublas_log, lt_log, summaries = sys.argv[1], sys.argv[2], sys.argv[3:]
    traced = gemm_names(summaries)
    # cuBLAS: the function's declaration in the "function ... called" line; cuBLASLt: "[Api][name]".
    counted = logged(cublas_log, re.compile(r"function\s+\w+\s+(cublas(?!Lt)\w*(?:gemm|gemv|Gemm)\w*)\s*\("))
    counted += logged(lt_log, re.compile(r"\[Api\]\s*\[(cublasLtMatmul)\]"))
    names = sorted(set(traced) | set(counted))
    lt = "cublasLtMatmul"
    bad = [n for n in names if traced[n] != counted[n] and not (n == lt and traced[n] < counted[n])]
    for n in names:
        print("  %-32s traced %6d  logged %6d%s" % (n, traced[n], counted[n], "" if traced[n] == counted[n] else "  <--"))
    if not counted:
        print("FAIL count: no GEMM call in the cuBLAS / cuBLASLt logs (%s, %s): logging off or another format"
              % (cublas_log, lt_log))
        return 1
    if counted[lt] > traced[lt]:
        print("WARN count: cuBLASLt logged %d cublasLtMatmul calls, %d traced: the %d others are either cuBLAS's "
              "own calls inside traced cuBLAS GEMMs, or missed" % (counted[lt], traced[lt], counted[lt] - traced[lt]))
    if bad:
        print("FAIL count: traced and logged calls differ for %s" % ", ".join(bad))
        return 1
    print("PASS count: %d cuBLAS/cuBLASLt GEMM calls traced, each entry point as often as its library logged it"
          % sum(traced.values()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
