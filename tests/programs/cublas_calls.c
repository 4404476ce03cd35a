/* cuBLAS and cuBLASLt calls a machine without a GPU can make: handle creation fails and the
 * GEMMs on the failed handles return an error without touching memory, while cuBLASLt's
 * descriptors are host objects that work anywhere. Prints every status, so that a run under
 * libsol must print the same; the trace must describe the GEMMs from their arguments and
 * descriptors alone.
 *
 * On a machine with a GPU the handles are created and the GEMMs (on null operands) are skipped:
 * "device present" is printed instead. */
#include <cublasLt.h>
#include <cublas_v2.h>
#include <stdio.h>

int main(void) {
  cublasHandle_t h = NULL;
  cublasStatus_t st = cublasCreate_v2(&h);
  printf("cublasCreate_v2 %d\n", (int)st);
  const int device = st == CUBLAS_STATUS_SUCCESS;

  float alpha = 2, beta = 0;
  if (!device) {
    st = cublasSgemm_v2(h, CUBLAS_OP_T, CUBLAS_OP_N, 64, 32, 128, &alpha, NULL, 128, NULL, 128, &beta, NULL, 64);
    printf("cublasSgemm_v2 %d\n", (int)st);
    st = cublasGemmStridedBatchedEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 16, 8, 4, &alpha, NULL, CUDA_R_16F, 16, 64, NULL,
                                    CUDA_R_16F, 4, 32, &beta, NULL, CUDA_R_16F, 16, 128, 3, CUBLAS_COMPUTE_32F,
                                    CUBLAS_GEMM_DEFAULT);
    printf("cublasGemmStridedBatchedEx %d\n", (int)st);
  }

  /* D (64 x 32) = A^T (A is 128 x 64) * B (128 x 32) + bias, 4 times, f32. */
  cublasLtMatrixLayout_t a = NULL, b = NULL, c = NULL;
  printf("cublasLtMatrixLayoutCreate %d", (int)cublasLtMatrixLayoutCreate(&a, CUDA_R_32F, 128, 64, 128));
  printf(" %d", (int)cublasLtMatrixLayoutCreate(&b, CUDA_R_32F, 128, 32, 128));
  printf(" %d\n", (int)cublasLtMatrixLayoutCreate(&c, CUDA_R_32F, 64, 32, 64));
  int32_t batch = 4;
  int64_t stride_a = 128 * 64, stride_b = 128 * 32, stride_c = 64 * 32;
  printf("cublasLtMatrixLayoutSetAttribute %d", (int)cublasLtMatrixLayoutSetAttribute(
                                                     a, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof batch));
  printf(" %d", (int)cublasLtMatrixLayoutSetAttribute(b, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof batch));
  printf(" %d", (int)cublasLtMatrixLayoutSetAttribute(c, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof batch));
  printf(" %d", (int)cublasLtMatrixLayoutSetAttribute(a, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride_a,
                                                      sizeof stride_a));
  printf(" %d", (int)cublasLtMatrixLayoutSetAttribute(b, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride_b,
                                                      sizeof stride_b));
  printf(" %d\n", (int)cublasLtMatrixLayoutSetAttribute(c, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride_c,
                                                        sizeof stride_c));
  cublasLtMatmulDesc_t desc = NULL;
  printf("cublasLtMatmulDescCreate %d\n", (int)cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasOperation_t t = CUBLAS_OP_T;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
  printf("cublasLtMatmulDescSetAttribute %d",
         (int)cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof t));
  printf(" %d\n", (int)cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue));

  cublasLtHandle_t lt = NULL;
  st = cublasLtCreate(&lt);
  printf("cublasLtCreate %d\n", (int)st);
  if (!device) {
    st = cublasLtMatmul(lt, desc, &alpha, NULL, a, NULL, b, &beta, NULL, c, NULL, c, NULL, NULL, 0, 0);
    printf("cublasLtMatmul %d\n", (int)st);
  } else {
    printf("device present\n");
  }

  cublasLtMatmulDescDestroy(desc);
  cublasLtMatrixLayoutDestroy(a);
  cublasLtMatrixLayoutDestroy(b);
  cublasLtMatrixLayoutDestroy(c);
  if (lt) cublasLtDestroy(lt);
  if (h) cublasDestroy_v2(h);
  return 0;
}
