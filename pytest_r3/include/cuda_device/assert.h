/* <assert.h> for device code: a failed assert() calls CUDA's __assertfail (through
 * r3_cuda.h's __r3_assert_fail, which host functions may call too), which prints the
 * condition and stops the kernel, as under nvcc. NDEBUG turns it off. Like the C header, this one may be included again after changing NDEBUG. */
#undef assert
#ifdef NDEBUG
#define assert(condition) ((void)0)
#else
#define assert(condition)                                                                  \
  ((condition) ? (void)0                                                                   \
               : __r3_assert_fail(#condition, __FILE__, __LINE__, __PRETTY_FUNCTION__))
#endif
