/* pytest-r3: declarations of the cuBLAS host API (no code), so that a file or common header
 * that includes <cublas_v2.h> for its host side still builds its kernels. Written from the
 * documented API: the handle, status, operation and math-mode types and the calls host code
 * commonly makes. Host code that calls them is set aside before the build. */
#ifndef R3_CUBLAS_API_H
#define R3_CUBLAS_API_H
#include <cuda_runtime.h>
#include <library_types.h>
#include <cuda_fp16.h>
typedef struct cublasContext *cublasHandle_t;
typedef enum {
  CUBLAS_STATUS_SUCCESS = 0, CUBLAS_STATUS_NOT_INITIALIZED = 1,
  CUBLAS_STATUS_ALLOC_FAILED = 3, CUBLAS_STATUS_INVALID_VALUE = 7,
  CUBLAS_STATUS_ARCH_MISMATCH = 8, CUBLAS_STATUS_MAPPING_ERROR = 11,
  CUBLAS_STATUS_EXECUTION_FAILED = 13, CUBLAS_STATUS_INTERNAL_ERROR = 14,
  CUBLAS_STATUS_NOT_SUPPORTED = 15, CUBLAS_STATUS_LICENSE_ERROR = 16
} cublasStatus_t;
typedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1, CUBLAS_OP_C = 2 } cublasOperation_t;
typedef enum { CUBLAS_FILL_MODE_LOWER = 0, CUBLAS_FILL_MODE_UPPER = 1 } cublasFillMode_t;
typedef enum { CUBLAS_POINTER_MODE_HOST = 0, CUBLAS_POINTER_MODE_DEVICE = 1 }
    cublasPointerMode_t;
typedef enum {
  CUBLAS_DEFAULT_MATH = 0, CUBLAS_TENSOR_OP_MATH = 1, CUBLAS_PEDANTIC_MATH = 2,
  CUBLAS_TF32_TENSOR_OP_MATH = 3, CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION = 16
} cublasMath_t;
typedef enum {
  CUBLAS_COMPUTE_16F = 64, CUBLAS_COMPUTE_16F_PEDANTIC = 65, CUBLAS_COMPUTE_32F = 68,
  CUBLAS_COMPUTE_32F_PEDANTIC = 69, CUBLAS_COMPUTE_32F_FAST_16F = 74,
  CUBLAS_COMPUTE_32F_FAST_16BF = 75, CUBLAS_COMPUTE_32F_FAST_TF32 = 77,
  CUBLAS_COMPUTE_64F = 70, CUBLAS_COMPUTE_64F_PEDANTIC = 71, CUBLAS_COMPUTE_32I = 72,
  CUBLAS_COMPUTE_32I_PEDANTIC = 73
} cublasComputeType_t;
typedef enum { CUBLAS_GEMM_DEFAULT = -1, CUBLAS_GEMM_DEFAULT_TENSOR_OP = 99 } cublasGemmAlgo_t;
__host__ cublasStatus_t cublasCreate(cublasHandle_t *handle);
__host__ cublasStatus_t cublasDestroy(cublasHandle_t handle);
__host__ cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream);
__host__ cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode);
__host__ cublasStatus_t cublasSetPointerMode(cublasHandle_t handle, cublasPointerMode_t mode);
__host__ cublasStatus_t cublasSetWorkspace(cublasHandle_t handle, void *workspace,
                                           size_t bytes);
__host__ const char *cublasGetStatusString(cublasStatus_t status);
__host__ cublasStatus_t cublasSgemm(cublasHandle_t handle, cublasOperation_t a_op,
                                    cublasOperation_t b_op, int m, int n, int k,
                                    const float *alpha, const float *a, int lda,
                                    const float *b, int ldb, const float *beta, float *c,
                                    int ldc);
__host__ cublasStatus_t cublasDgemm(cublasHandle_t handle, cublasOperation_t a_op,
                                    cublasOperation_t b_op, int m, int n, int k,
                                    const double *alpha, const double *a, int lda,
                                    const double *b, int ldb, const double *beta, double *c,
                                    int ldc);
__host__ cublasStatus_t cublasSgemmStridedBatched(
    cublasHandle_t handle, cublasOperation_t a_op, cublasOperation_t b_op, int m, int n,
    int k, const float *alpha, const float *a, int lda, long long stride_a, const float *b,
    int ldb, long long stride_b, const float *beta, float *c, int ldc, long long stride_c,
    int batches);
__host__ cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t a_op,
                                     cublasOperation_t b_op, int m, int n, int k,
                                     const void *alpha, const void *a, cudaDataType a_type,
                                     int lda, const void *b, cudaDataType b_type, int ldb,
                                     const void *beta, void *c, cudaDataType c_type, int ldc,
                                     cublasComputeType_t compute, cublasGemmAlgo_t algo);
__host__ cublasStatus_t cublasGemmStridedBatchedEx(
    cublasHandle_t handle, cublasOperation_t a_op, cublasOperation_t b_op, int m, int n,
    int k, const void *alpha, const void *a, cudaDataType a_type, int lda, long long stride_a,
    const void *b, cudaDataType b_type, int ldb, long long stride_b, const void *beta,
    void *c, cudaDataType c_type, int ldc, long long stride_c, int batches,
    cublasComputeType_t compute, cublasGemmAlgo_t algo);
__host__ cublasStatus_t cublasSaxpy(cublasHandle_t handle, int n, const float *alpha,
                                    const float *x, int incx, float *y, int incy);
__host__ cublasStatus_t cublasSdot(cublasHandle_t handle, int n, const float *x, int incx,
                                   const float *y, int incy, float *result);
__host__ cublasStatus_t cublasSnrm2(cublasHandle_t handle, int n, const float *x, int incx,
                                    float *result);
__host__ cublasStatus_t cublasSscal(cublasHandle_t handle, int n, const float *alpha,
                                    float *x, int incx);
__host__ cublasStatus_t cublasSgemv(cublasHandle_t handle, cublasOperation_t op, int m, int n,
                                    const float *alpha, const float *a, int lda,
                                    const float *x, int incx, const float *beta, float *y,
                                    int incy);
#endif
