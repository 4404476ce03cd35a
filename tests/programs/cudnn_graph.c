/* Builds cuDNN operation graphs with the backend API, which cuDNN 9 finalizes on the host (no
 * GPU needed): a grouped, strided, padded convolution forward with an NHWC output, its backward
 * data and filter passes, and a convolution with bias and ReLU fused on its virtual output.
 * Under libsol with SOL_LOG=debug, each finalized graph is logged as the DNN node SOL describes
 * (tests/integration/test_cudnn.py checks them). Then one cudnnBackendExecute without a handle,
 * which cuDNN rejects: traced all the same. Prints "ok" when cuDNN accepted every graph. */
#include <cudnn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

static int failures = 0;
#define CK(x)                                                                      \
  do {                                                                             \
    cudnnStatus_t s_ = (x);                                                        \
    if (s_ != CUDNN_STATUS_SUCCESS) {                                              \
      fprintf(stderr, "%s: %s\n", #x, cudnnGetErrorString(s_));                    \
      ++failures;                                                                  \
    }                                                                              \
  } while (0)

static cudnnBackendDescriptor_t tensor(int64_t uid, const int64_t *dims, const int64_t *strides, bool virt) {
  cudnnBackendDescriptor_t t;
  cudnnDataType_t dt = CUDNN_DATA_FLOAT;
  int64_t align = 16;
  CK(cudnnBackendCreateDescriptor(CUDNN_BACKEND_TENSOR_DESCRIPTOR, &t));
  CK(cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt));
  CK(cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims));
  CK(cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides));
  CK(cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid));
  CK(cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align));
  CK(cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &virt));
  CK(cudnnBackendFinalize(t));
  return t;
}

static cudnnBackendDescriptor_t conv_desc(void) {
  cudnnBackendDescriptor_t c;
  int64_t nsp = 2, pre[] = {1, 2}, post[] = {1, 2}, dil[] = {1, 2}, str[] = {2, 1};
  cudnnDataType_t ct = CUDNN_DATA_FLOAT;
  cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  CK(cudnnBackendCreateDescriptor(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, &c));
  CK(cudnnBackendSetAttribute(c, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &nsp));
  CK(cudnnBackendSetAttribute(c, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &ct));
  CK(cudnnBackendSetAttribute(c, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode));
  CK(cudnnBackendSetAttribute(c, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, nsp, pre));
  CK(cudnnBackendSetAttribute(c, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, nsp, post));
  CK(cudnnBackendSetAttribute(c, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, nsp, dil));
  CK(cudnnBackendSetAttribute(c, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, nsp, str));
  CK(cudnnBackendFinalize(c));
  return c;
}

static cudnnBackendDescriptor_t operation(cudnnBackendDescriptorType_t type, cudnnBackendAttributeName_t first,
                                          cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t w,
                                          cudnnBackendDescriptor_t y, cudnnBackendDescriptor_t conv) {
  /* The attributes of each convolution kind come in the header's order:
   * ALPHA, BETA, CONV_DESC, then its three tensors (FORWARD: W, X, Y; BWD_DATA: W, DX, DY;
   * BWD_FILTER: DW, X, DY). */
  cudnnBackendDescriptor_t op;
  float alpha = 1, beta = 0;
  CK(cudnnBackendCreateDescriptor(type, &op));
  CK(cudnnBackendSetAttribute(op, first, CUDNN_TYPE_FLOAT, 1, &alpha));
  CK(cudnnBackendSetAttribute(op, first + 1, CUDNN_TYPE_FLOAT, 1, &beta));
  CK(cudnnBackendSetAttribute(op, first + 2, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &conv));
  CK(cudnnBackendSetAttribute(op, first + 3, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &w));
  CK(cudnnBackendSetAttribute(op, first + 4, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x));
  CK(cudnnBackendSetAttribute(op, first + 5, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y));
  CK(cudnnBackendFinalize(op));
  return op;
}

static cudnnBackendDescriptor_t pointwise(cudnnPointwiseMode_t mode, cudnnBackendDescriptor_t x,
                                          cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t y) {
  cudnnBackendDescriptor_t pw, op;
  cudnnDataType_t prec = CUDNN_DATA_FLOAT;
  CK(cudnnBackendCreateDescriptor(CUDNN_BACKEND_POINTWISE_DESCRIPTOR, &pw));
  CK(cudnnBackendSetAttribute(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode));
  CK(cudnnBackendSetAttribute(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec));
  CK(cudnnBackendFinalize(pw));
  CK(cudnnBackendCreateDescriptor(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, &op));
  CK(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &pw));
  CK(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x));
  if (b) CK(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b));
  CK(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y));
  CK(cudnnBackendFinalize(op));
  return op;
}

static cudnnBackendDescriptor_t graph(cudnnBackendDescriptor_t *ops, int n) {
  cudnnBackendDescriptor_t g;
  CK(cudnnBackendCreateDescriptor(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, &g));
  CK(cudnnBackendSetAttribute(g, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, n, ops));
  CK(cudnnBackendFinalize(g));
  return g;
}

int main(void) {
  /* x: 8x4x16x16 NCHW; w: 6 output channels, 2 groups (2 input channels each), 3x3;
   * stride (2, 1), padding (1, 2), dilation (1, 2): y is 8x6x8x16, NHWC. */
  int64_t xd[] = {8, 4, 16, 16}, xs[] = {1024, 256, 16, 1};
  int64_t wd[] = {6, 2, 3, 3}, ws[] = {18, 9, 3, 1};
  int64_t yd[] = {8, 6, 8, 16}, ys[] = {768, 1, 96, 6};
  cudnnBackendDescriptor_t x = tensor(1, xd, xs, false), w = tensor(2, wd, ws, false), y = tensor(3, yd, ys, false);
  cudnnBackendDescriptor_t c = conv_desc();
  cudnnBackendDescriptor_t fwd = operation(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
                                           CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, x, w, y, c);
  cudnnBackendDescriptor_t bwd_data = operation(CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
                                                CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA, x, w, y, c);
  cudnnBackendDescriptor_t bwd_filter = operation(CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR,
                                                  CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA, x, w, y, c);
  graph(&fwd, 1);
  graph(&bwd_data, 1);
  graph(&bwd_filter, 1);

  /* conv -> + bias (1x6x1x1) -> relu, the two intermediates virtual. */
  int64_t bd[] = {1, 6, 1, 1}, bs[] = {6, 1, 1, 1};
  cudnnBackendDescriptor_t v1 = tensor(10, yd, ys, true), v2 = tensor(11, yd, ys, true);
  cudnnBackendDescriptor_t bias = tensor(12, bd, bs, false), out = tensor(13, yd, ys, false);
  cudnnBackendDescriptor_t fused[3];
  fused[0] = operation(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
                       CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, x, w, v1, c);
  fused[1] = pointwise(CUDNN_POINTWISE_ADD, v1, bias, v2);
  fused[2] = pointwise(CUDNN_POINTWISE_RELU_FWD, v2, NULL, out);
  graph(fused, 3);

  /* No GPU here: an execution without a handle, which cuDNN refuses. */
  cudnnBackendDescriptor_t plan, pack;
  CK(cudnnBackendCreateDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &plan));
  CK(cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &pack));
  cudnnStatus_t s = cudnnBackendExecute(NULL, plan, pack);
  printf("execute without a handle: %s\n", cudnnGetErrorString(s));
  CK(cudnnBackendDestroyDescriptor(pack));
  CK(cudnnBackendDestroyDescriptor(plan));
  printf(failures ? "failed\n" : "ok\n");
  return failures ? 1 : 0;
}
