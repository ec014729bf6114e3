/* pytest-r3: declarations of the cuBLASLt host API (no code), for files and common headers
 * that include <cublasLt.h> for their host side. Written from the documented API. */
#ifndef R3_CUBLASLT_H
#define R3_CUBLASLT_H
#include "cublas_api.h"
#include <cuda_bf16.h> /* as CUDA's, through its fp8 types */
typedef struct cublasLtContext *cublasLtHandle_t;
typedef struct cublasLtMatmulDescOpaque_t *cublasLtMatmulDesc_t;
typedef struct cublasLtMatrixLayoutOpaque_t *cublasLtMatrixLayout_t;
typedef struct cublasLtMatmulPreferenceOpaque_t *cublasLtMatmulPreference_t;
typedef struct { unsigned long long data[8]; } cublasLtMatmulAlgo_t;
typedef struct {
  cublasLtMatmulAlgo_t algo; size_t workspaceSize; cublasStatus_t state; float wavesCount;
  int reserved[4];
} cublasLtMatmulHeuristicResult_t;
typedef enum {
  CUBLASLT_MATMUL_DESC_TRANSA = 3, CUBLASLT_MATMUL_DESC_TRANSB = 4,
  CUBLASLT_MATMUL_DESC_EPILOGUE = 7, CUBLASLT_MATMUL_DESC_BIAS_POINTER = 8,
  CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER = 10, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD = 11,
  CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE = 26
} cublasLtMatmulDescAttributes_t;
typedef enum {
  CUBLASLT_EPILOGUE_DEFAULT = 1, CUBLASLT_EPILOGUE_RELU = 2, CUBLASLT_EPILOGUE_BIAS = 4,
  CUBLASLT_EPILOGUE_GELU = 32, CUBLASLT_EPILOGUE_GELU_AUX = 160,
  CUBLASLT_EPILOGUE_GELU_BIAS = 36, CUBLASLT_EPILOGUE_GELU_AUX_BIAS = 164,
  CUBLASLT_EPILOGUE_DGELU = 192, CUBLASLT_EPILOGUE_BGRADA = 256, CUBLASLT_EPILOGUE_BGRADB = 512
} cublasLtEpilogue_t;
typedef enum {
  CUBLASLT_MATMUL_PREF_SEARCH_MODE = 0, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1
} cublasLtMatmulPreferenceAttributes_t;
typedef enum { CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT = 5,
               CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET = 6 }
    cublasLtMatrixLayoutAttribute_t;
__host__ cublasStatus_t cublasLtCreate(cublasLtHandle_t *handle);
__host__ cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle);
__host__ cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *desc,
                                                 cublasComputeType_t compute,
                                                 cudaDataType_t scale_type);
__host__ cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc);
__host__ cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc,
                                                       cublasLtMatmulDescAttributes_t attr,
                                                       const void *value, size_t bytes);
__host__ cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *layout,
                                                   cudaDataType type, unsigned long long rows,
                                                   unsigned long long cols, long long ld);
__host__ cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout);
__host__ cublasStatus_t cublasLtMatrixLayoutSetAttribute(
    cublasLtMatrixLayout_t layout, cublasLtMatrixLayoutAttribute_t attr, const void *value,
    size_t bytes);
__host__ cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *pref);
__host__ cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref);
__host__ cublasStatus_t cublasLtMatmulPreferenceSetAttribute(
    cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr,
    const void *value, size_t bytes);
__host__ cublasStatus_t cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a,
    cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
    cublasLtMatmulPreference_t pref, int requested, cublasLtMatmulHeuristicResult_t *results,
    int *returned);
__host__ cublasStatus_t cublasLtMatmul(
    cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void *alpha, const void *a,
    cublasLtMatrixLayout_t a_layout, const void *b, cublasLtMatrixLayout_t b_layout,
    const void *beta, const void *c, cublasLtMatrixLayout_t c_layout, void *d,
    cublasLtMatrixLayout_t d_layout, const cublasLtMatmulAlgo_t *algo, void *workspace,
    size_t workspace_bytes, cudaStream_t stream);
#endif
