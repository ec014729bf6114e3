/* <assert.h> for device code: a failed assert() calls CUDA's __assertfail (declared in
 * r3_cuda.h), which prints the condition and stops the kernel, as under nvcc. NDEBUG turns
 * it off. Like the C header, this one may be included again after changing NDEBUG. */
#undef assert
#ifdef NDEBUG
#define assert(condition) ((void)0)
#else
#define assert(condition)                                                                  \
  ((condition) ? (void)0                                                                   \
               : __assertfail(#condition, __FILE__, __LINE__, __PRETTY_FUNCTION__, 1))
#endif
