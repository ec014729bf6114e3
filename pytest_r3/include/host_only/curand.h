/* pytest-r3: declarations of the cuRAND host API (no code), for host code that fills
 * buffers with cuRAND generators. The device API (<curand_kernel.h>) is not provided. */
#ifndef R3_CURAND_H
#define R3_CURAND_H
#include <cuda_runtime.h>
typedef struct curandGenerator_st *curandGenerator_t;
typedef enum { CURAND_STATUS_SUCCESS = 0, CURAND_STATUS_NOT_INITIALIZED = 101,
               CURAND_STATUS_ALLOCATION_FAILED = 102, CURAND_STATUS_LAUNCH_FAILURE = 201 }
    curandStatus_t;
typedef enum {
  CURAND_RNG_PSEUDO_DEFAULT = 100, CURAND_RNG_PSEUDO_XORWOW = 101,
  CURAND_RNG_PSEUDO_MRG32K3A = 121, CURAND_RNG_PSEUDO_MTGP32 = 141,
  CURAND_RNG_PSEUDO_MT19937 = 142, CURAND_RNG_PSEUDO_PHILOX4_32_10 = 161,
  CURAND_RNG_QUASI_DEFAULT = 200, CURAND_RNG_QUASI_SOBOL32 = 201
} curandRngType_t;
__host__ curandStatus_t curandCreateGenerator(curandGenerator_t *generator,
                                              curandRngType_t type);
__host__ curandStatus_t curandCreateGeneratorHost(curandGenerator_t *generator,
                                                  curandRngType_t type);
__host__ curandStatus_t curandDestroyGenerator(curandGenerator_t generator);
__host__ curandStatus_t curandSetPseudoRandomGeneratorSeed(curandGenerator_t generator,
                                                           unsigned long long seed);
__host__ curandStatus_t curandSetStream(curandGenerator_t generator, cudaStream_t stream);
__host__ curandStatus_t curandGenerate(curandGenerator_t generator, unsigned int *out,
                                       size_t n);
__host__ curandStatus_t curandGenerateUniform(curandGenerator_t generator, float *out,
                                              size_t n);
__host__ curandStatus_t curandGenerateUniformDouble(curandGenerator_t generator, double *out,
                                                    size_t n);
__host__ curandStatus_t curandGenerateNormal(curandGenerator_t generator, float *out,
                                             size_t n, float mean, float stddev);
__host__ curandStatus_t curandGenerateNormalDouble(curandGenerator_t generator, double *out,
                                                   size_t n, double mean, double stddev);
#endif
