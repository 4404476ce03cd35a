#!/usr/bin/env python3
"""Writes interpose/spec/dnnl.toml from oneDNN's C header.

A maintenance tool, not part of the build: run it when moving to another oneDNN release, then
review the diff of dnnl.toml (the op of new compute entry points is set in OPS below). The
build compiles the generated wrappers against the same header, so a signature that drifts
from the header is a compile error, never a silent ABI mismatch.

    python3 interpose/spec/extract_dnnl.py /usr/include/oneapi/dnnl/dnnl.h > interpose/spec/dnnl.toml
"""
import re
import sys

# Entry points that do work (everything else is API bookkeeping: descriptors, memory, engines).
OPS = {
    "dnnl_primitive_execute": "dnnl_execute",
    "dnnl_sgemm": "gemm",
    "dnnl_gemm_u8s8s32": "gemm",
    "dnnl_gemm_s8s8s32": "gemm",
    "dnnl_gemm_bf16bf16f32": "gemm",
}
# Element type of the compute entry points' A operand.
DTYPES = {"dnnl_sgemm": "f32", "dnnl_gemm_u8s8s32": "u8", "dnnl_gemm_s8s8s32": "s8", "dnnl_gemm_bf16bf16f32": "bf16"}


def declarations(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"^\s*#[^\n]*", " ", text, flags=re.M)
    text = re.sub(r"//[^\n]*", " ", text)
    for m in re.finditer(r"([^;{}#]*?\bDNNL_API\b[^;{}]*?\));", text):
        decl = " ".join(m.group(1).split())
        decl = decl.replace(" DNNL_API ", " ").replace("DNNL_API ", "")
        decl = decl.replace("( ", "(").replace(" )", ")").replace(" *", " *")
        yield decl


def main():
    header = sys.argv[1] if len(sys.argv) > 1 else "/usr/include/oneapi/dnnl/dnnl.h"
    with open(header) as f:
        decls = list(declarations(f.read()))
    print("# oneDNN C API entry points, one per [[fn]]; written by extract_dnnl.py from")
    print("# %s, then reviewed. sig is the C declaration exactly as the header has it;" % header)
    print("# op is the IR operation kind (ir/ops.def): dnnl_api for bookkeeping calls; dtype the")
    print("# element type of a compute entry point.")
    print("# The generated wrappers include the header, so the compiler checks every sig.")
    for d in decls:
        name = re.search(r"(\w+)\s*\(", d).group(1)
        print()
        print("[[fn]]")
        print('sig = "%s"' % d)
        print('op = "%s"' % OPS.get(name, "dnnl_api"))
        if name in DTYPES:
            print('dtype = "%s"' % DTYPES[name])


if __name__ == "__main__":
    main()
