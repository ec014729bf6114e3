/* assert() for CUDA emulation: a failed device assertion stops the launch with a KernelFault
 * naming the condition, file, line and thread (as a GPU reports it), never the process. */
#undef assert
#ifdef NDEBUG
#define assert(condition) ((void)0)
#else
#define assert(condition)                                                                  \
  ((condition) ? (void)0 : __r3_cuda_assert_fail(#condition, __FILE__, __LINE__))
#endif
