#!/usr/bin/env python3
"""Writes interpose/spec/cudnn.toml from cuDNN 9's C headers.

A maintenance tool, not part of the build: run it when moving to another cuDNN release, then
review the diff of cudnn.toml. Unlike oneDNN, only the entry points listed below are wrapped:
the backend (graph) API that PyTorch 2.x reaches through cudnn-frontend, the handle and stream
calls, and the legacy compute entry points cuDNN 9 still exports. Descriptor set-up calls of the
legacy API are not wrapped: the frontend reads legacy descriptors with cuDNN's own getters.
The build compiles the generated wrappers against the same headers, so a signature that drifts
from the header is a compile error.

    python3 interpose/spec/extract_cudnn.py /usr/local/cuda/include > interpose/spec/cudnn.toml
"""
import os
import re
import sys

# name -> IR op (ir/ops.def)
BACKEND = ["cudnnBackendCreateDescriptor", "cudnnBackendDestroyDescriptor", "cudnnBackendInitialize",
           "cudnnBackendFinalize", "cudnnBackendSetAttribute", "cudnnBackendGetAttribute",
           "cudnnBackendExecute", "cudnnBackendPopulateCudaGraph", "cudnnBackendUpdateCudaGraph"]
HANDLE = ["cudnnCreate", "cudnnDestroy", "cudnnSetStream", "cudnnGetStream"]
LEGACY = ["cudnnConvolutionForward", "cudnnConvolutionBackwardData", "cudnnConvolutionBackwardFilter",
          "cudnnConvolutionBackwardBias", "cudnnConvolutionBiasActivationForward",
          "cudnnBatchNormalizationForwardInference", "cudnnBatchNormalizationForwardTraining",
          "cudnnBatchNormalizationForwardTrainingEx", "cudnnBatchNormalizationBackward",
          "cudnnBatchNormalizationBackwardEx", "cudnnNormalizationForwardInference",
          "cudnnNormalizationForwardTraining", "cudnnNormalizationBackward",
          "cudnnSoftmaxForward", "cudnnSoftmaxBackward", "cudnnPoolingForward", "cudnnPoolingBackward",
          "cudnnActivationForward", "cudnnActivationBackward", "cudnnLRNCrossChannelForward",
          "cudnnLRNCrossChannelBackward", "cudnnAddTensor", "cudnnOpTensor", "cudnnReduceTensor",
          "cudnnTransformTensor", "cudnnScaleTensor", "cudnnDropoutForward", "cudnnDropoutBackward",
          "cudnnRNNForward", "cudnnRNNBackwardData_v8", "cudnnRNNBackwardWeights_v8", "cudnnCTCLoss",
          "cudnnCTCLoss_v8", "cudnnSpatialTfGridGeneratorForward", "cudnnSpatialTfGridGeneratorBackward",
          "cudnnSpatialTfSamplerForward", "cudnnSpatialTfSamplerBackward", "cudnnMultiHeadAttnForward",
          "cudnnMultiHeadAttnBackwardData", "cudnnMultiHeadAttnBackwardWeights", "cudnnFusedOpsExecute"]
OPS = {"cudnnBackendExecute": "cudnn_execute"}
OPS.update({n: "cudnn_legacy" for n in LEGACY})
# What the wrappers record of functions with more than 16 parameters (DnnlCall::kMaxArgs): the
# descriptors and buffers the frontend describes the call with.
KEEP = {
    "cudnnConvolutionBiasActivationForward":
        "handle alpha1 xDesc x wDesc w convDesc alpha2 zDesc z biasDesc bias activationDesc yDesc y",
    "cudnnBatchNormalizationForwardTraining":
        "handle mode xDesc x yDesc y bnScaleBiasMeanVarDesc bnScale bnBias exponentialAverageFactor "
        "resultRunningMean resultRunningVariance epsilon resultSaveMean resultSaveInvVariance",
    "cudnnBatchNormalizationForwardTrainingEx":
        "handle mode bnOps xDesc xData yDesc yData bnScaleBiasMeanVarDesc bnScale bnBias resultRunningMean "
        "resultRunningVariance epsilon resultSaveMean resultSaveInvVariance activationDesc",
    "cudnnBatchNormalizationBackward":
        "handle mode xDesc x dyDesc dy dxDesc dx dBnScaleBiasDesc bnScale dBnScaleResult dBnBiasResult epsilon "
        "savedMean savedInvVariance",
    "cudnnBatchNormalizationBackwardEx":
        "handle mode bnOps xDesc xData dyDesc dyData dxDesc dxData dBnScaleBiasDesc bnScaleData dBnScaleData "
        "dBnBiasData epsilon savedMean savedInvVariance",
    "cudnnNormalizationForwardInference": "handle mode normOps xDesc x yDesc y epsilon",
    "cudnnNormalizationForwardTraining": "handle mode normOps xDesc xData yDesc yData epsilon",
    "cudnnNormalizationBackward": "handle mode normOps xDesc xData dxDesc dxData epsilon",
    "cudnnRNNForward": "handle rnnDesc fwdMode xDesc x yDesc y",
    "cudnnRNNBackwardData_v8": "handle rnnDesc yDesc xDesc dx",
    "cudnnMultiHeadAttnForward": "handle attnDesc qDesc queries oDesc out",
    "cudnnMultiHeadAttnBackwardData": "handle attnDesc doDesc dout dqDesc dqueries",
    "cudnnMultiHeadAttnBackwardWeights": "handle attnDesc qDesc queries doDesc dout",
}
HEADERS = ["cudnn_graph_v9.h", "cudnn_ops_v9.h", "cudnn_cnn_v9.h", "cudnn_adv_v9.h"]


def declarations(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"^\s*#[^\n]*", " ", text, flags=re.M)
    text = re.sub(r"//[^\n]*", " ", text)
    for m in re.finditer(r"(?:CUDNN_DEPRECATED\s+)?([\w\s\*]+?)\s*\bCUDNNWINAPI\s+(\w+)\s*\(([^;{}]*?)\)\s*;", text):
        ret, name, params = m.group(1), m.group(2), m.group(3)
        ret = " ".join(ret.split()).replace("CUDNN_DEPRECATED", "").strip()
        out = []
        for p in params.split(","):
            p = " ".join(p.split())
            if not p or p == "void":
                continue
            # "const int dimA[]" -> "const int *dimA": the wrappers declare what the array decays to.
            am = re.match(r"^(.*?)(\w+)\s*\[\s*\w*\s*\]$", p)
            if am:
                p = "%s *%s" % (am.group(1).strip(), am.group(2))
            out.append(p.replace(" *", " *").replace("* ", "*"))
        yield name, "%s %s(%s)" % (ret, name, ", ".join(out))


def main():
    inc = sys.argv[1] if len(sys.argv) > 1 else "/usr/local/cuda/include"
    found = {}
    for h in HEADERS:
        with open(os.path.join(inc, h)) as f:
            for name, sig in declarations(f.read()):
                found[name] = sig
    print("# cuDNN 9 entry points, one per [[fn]]; written by extract_cudnn.py from the cudnn_*_v9.h headers,")
    print("# then reviewed. sig is the C declaration as the header has it (arrays as pointers); op is the")
    print("# IR operation kind (ir/ops.def): cudnn_execute for cudnnBackendExecute, cudnn_legacy")
    print("# for the legacy compute entry points, cudnn_api for bookkeeping. The generated wrappers")
    print("# include <cudnn.h>, so the compiler checks every sig. keep: the parameters the wrapper records")
    print("# (at most 16, in this order) where the function has more; without it, all of them.")
    missing = []
    for name in BACKEND + HANDLE + LEGACY:
        if name not in found:
            missing.append(name)
            continue
        print()
        print("[[fn]]")
        print('sig = "%s"' % found[name])
        print('op = "%s"' % OPS.get(name, "cudnn_api"))
        if name in KEEP:
            print('keep = "%s"' % KEEP[name])
    if missing:
        sys.stderr.write("not declared in this cuDNN: %s\n" % ", ".join(missing))


if __name__ == "__main__":
    main()
