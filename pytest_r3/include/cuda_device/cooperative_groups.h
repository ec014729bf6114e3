/* <cooperative_groups.h> for pytest-r3's CUDA build and its emulation: the device-side
 * subset real kernels use, written for pytest-r3 from the documented API (not a copy of
 * NVIDIA's header). Everything maps onto the warp and block intrinsics of r3_cuda.h (or
 * r3_cuda_host.h in emulation), with the instructions nvcc's groups give: a tile's shuffles
 * are shfl.sync with the tile's lanes as mask and its size as width, cg::reduce is a
 * butterfly of shfl.sync.bfly (for 32-bit integers over a warp from sm_80 on, redux.sync).
 *
 *   this_thread_block(): thread_rank, size/num_threads, sync, group_index, thread_index
 *   tiled_partition<N>(parent), N a power of two up to 32: thread_rank, size,
 *     meta_group_rank, meta_group_size, sync, shfl/shfl_down/shfl_up/shfl_xor,
 *     any/all/ballot
 *   reduce(tile, value, plus<T>/less<T>/greater<T>/bit_and/bit_or/bit_xor)
 *
 * Grid-wide and multi-grid groups (this_grid, grid_group, this_multi_grid) and run-time
 * sized partitions are not provided: using them is a one-line "not supported" error.
 */
#if defined(R3_CUDA_TOOLKIT_HEADERS) && !defined(R3_CUDA_EMULATION)
/* the device build against an installed CUDA toolkit: its full cooperative groups */
#include_next <cooperative_groups.h>
#elif !defined(R3_COOPERATIVE_GROUPS_H)
#define R3_COOPERATIVE_GROUPS_H

namespace cooperative_groups {
namespace __r3 {
__device__ __forceinline__ unsigned int block_rank() {
  return (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ unsigned int block_size() {
  return blockDim.x * blockDim.y * blockDim.z;
}
__device__ __forceinline__ unsigned int lane() {
#ifdef R3_CUDA_EMULATION
  return block_rank() & 31u;
#else
  return __nvvm_read_ptx_sreg_laneid();
#endif
}
/* a tile's shuffles: the intrinsic for the types it takes, else word by word (a struct
   of floats shuffles as its 32-bit words, as with nvcc's groups) */
template <typename T, typename Shuffle>
__device__ __forceinline__ T by_words(T value, Shuffle shuffle) {
  unsigned int words[(sizeof(T) + 3) / 4] = {};
  __builtin_memcpy(words, &value, sizeof(T));
#pragma unroll
  for (unsigned int i = 0; i < (sizeof(T) + 3) / 4; ++i) words[i] = shuffle(words[i]);
  __builtin_memcpy(&value, words, sizeof(T));
  return value;
}
#define __R3_CG_SHUFFLE(NAME, INTRINSIC, OFFSET)                                           \
  template <typename T>                                                                    \
  __device__ __forceinline__ T NAME(unsigned int mask, T value, OFFSET offset, int width) { \
    return by_words(value, [&](unsigned int word) {                                        \
      return INTRINSIC(mask, word, offset, width); });                                     \
  }                                                                                        \
  __R3_CG_SHUFFLE_AS(NAME, INTRINSIC, OFFSET, int)                                         \
  __R3_CG_SHUFFLE_AS(NAME, INTRINSIC, OFFSET, unsigned int)                                \
  __R3_CG_SHUFFLE_AS(NAME, INTRINSIC, OFFSET, long long)                                   \
  __R3_CG_SHUFFLE_AS(NAME, INTRINSIC, OFFSET, unsigned long long)                          \
  __R3_CG_SHUFFLE_AS(NAME, INTRINSIC, OFFSET, float)                                       \
  __R3_CG_SHUFFLE_AS(NAME, INTRINSIC, OFFSET, double)
#define __R3_CG_SHUFFLE_AS(NAME, INTRINSIC, OFFSET, T)                                     \
  __device__ __forceinline__ T NAME(unsigned int mask, T value, OFFSET offset, int width) { \
    return INTRINSIC(mask, value, offset, width);                                          \
  }
__R3_CG_SHUFFLE(shfl, __shfl_sync, int)
__R3_CG_SHUFFLE(shfl_down, __shfl_down_sync, unsigned int)
__R3_CG_SHUFFLE(shfl_up, __shfl_up_sync, unsigned int)
__R3_CG_SHUFFLE(shfl_xor, __shfl_xor_sync, int)
#undef __R3_CG_SHUFFLE
#undef __R3_CG_SHUFFLE_AS
} /* namespace __r3 */

class thread_block {
 public:
  __device__ void sync() const { __syncthreads(); }
  __device__ unsigned int thread_rank() const { return __r3::block_rank(); }
  __device__ unsigned int size() const { return __r3::block_size(); }
  __device__ unsigned int num_threads() const { return __r3::block_size(); }
  __device__ dim3 group_index() const { return dim3(blockIdx.x, blockIdx.y, blockIdx.z); }
  __device__ dim3 thread_index() const { return dim3(threadIdx.x, threadIdx.y, threadIdx.z); }
  __device__ dim3 group_dim() const { return dim3(blockDim.x, blockDim.y, blockDim.z); }
  __device__ dim3 dim_threads() const { return group_dim(); }
};

__device__ __forceinline__ thread_block this_thread_block() { return thread_block(); }

template <unsigned int Size, typename Parent = void>
class thread_block_tile {
  static_assert(Size >= 1 && Size <= 32 && (Size & (Size - 1)) == 0,
                "tiled_partition<N>: N must be a power of two up to 32");

 public:
  __device__ thread_block_tile() = default;
  /* a tile is the same lanes whatever it was partitioned from (thread_block_tile<32> and
     thread_block_tile<32, thread_block> convert into each other) */
  template <typename Other>
  __device__ thread_block_tile(const thread_block_tile<Size, Other> &) {}
  static constexpr unsigned int num_threads() { return Size; }
  __device__ unsigned int size() const { return Size; }
  __device__ unsigned int thread_rank() const { return __r3::lane() & (Size - 1); }
  __device__ unsigned int meta_group_rank() const { return __r3::block_rank() / Size; }
  __device__ unsigned int meta_group_size() const {
    return (__r3::block_size() + Size - 1) / Size;
  }
  /* the tile's lanes within its warp */
  __device__ unsigned int mask() const {
    return Size == 32 ? 0xffffffffu
                      : ((1u << (Size & 31)) - 1) << (__r3::lane() & ~(Size - 1));
  }
  __device__ void sync() const { __syncwarp(mask()); }
  template <typename T> __device__ T shfl(T value, unsigned int source) const {
    return __r3::shfl(mask(), value, (int)source, (int)Size);
  }
  template <typename T> __device__ T shfl_down(T value, unsigned int delta) const {
    return __r3::shfl_down(mask(), value, delta, (int)Size);
  }
  template <typename T> __device__ T shfl_up(T value, unsigned int delta) const {
    return __r3::shfl_up(mask(), value, delta, (int)Size);
  }
  template <typename T> __device__ T shfl_xor(T value, unsigned int lane_mask) const {
    return __r3::shfl_xor(mask(), value, (int)lane_mask, (int)Size);
  }
  __device__ int any(int predicate) const { return __any_sync(mask(), predicate); }
  __device__ int all(int predicate) const { return __all_sync(mask(), predicate); }
  /* bit i: the predicate of the tile's thread i */
  __device__ unsigned int ballot(int predicate) const {
    return Size == 32 ? __ballot_sync(mask(), predicate)
                      : __ballot_sync(mask(), predicate) >> (__r3::lane() & ~(Size - 1));
  }
};

template <unsigned int Size, typename Parent>
__device__ __forceinline__ thread_block_tile<Size, Parent> tiled_partition(const Parent &) {
  return thread_block_tile<Size, Parent>();
}

__device__ __forceinline__ void sync(const thread_block &group) { group.sync(); }
template <unsigned int Size, typename Parent>
__device__ __forceinline__ void sync(const thread_block_tile<Size, Parent> &group) {
  group.sync();
}

/* the operations cg::reduce takes */
template <typename T> struct plus {
  __device__ T operator()(T a, T b) const { return a + b; }
};
template <typename T> struct less {  /* the lesser: a reduction with it is a minimum */
  __device__ T operator()(T a, T b) const { return b < a ? b : a; }
};
template <typename T> struct greater {  /* the greater: a maximum */
  __device__ T operator()(T a, T b) const { return a < b ? b : a; }
};
template <typename T> struct bit_and {
  __device__ T operator()(T a, T b) const { return a & b; }
};
template <typename T> struct bit_or {
  __device__ T operator()(T a, T b) const { return a | b; }
};
template <typename T> struct bit_xor {
  __device__ T operator()(T a, T b) const { return a ^ b; }
};

namespace __r3 {
template <unsigned int Size, typename Parent, typename T, typename Op>
__device__ __forceinline__ T butterfly(const thread_block_tile<Size, Parent> &group, T value,
                                       Op op) {
#pragma unroll
  for (unsigned int offset = Size / 2; offset > 0; offset /= 2)
    value = op(value, group.shfl_xor(value, offset));
  return value;
}
template <typename T, typename Op> struct redux {
  template <unsigned int Size, typename Parent>
  __device__ static T run(const thread_block_tile<Size, Parent> &group, T value, Op op) {
    return butterfly(group, value, op);
  }
};
#if !defined(R3_CUDA_EMULATION) && __CUDA_ARCH__ >= 800
/* 32-bit integers over a whole warp: one redux.sync, as nvcc's groups use (smaller tiles
   keep the butterfly, as there) */
#define __R3_CG_REDUX(OP, T, CALL)                                                          \
  template <> struct redux<T, OP<T>> {                                                     \
    template <unsigned int Size, typename Parent>                                          \
    __device__ static T run(const thread_block_tile<Size, Parent> &group, T value,         \
                            OP<T>) {                                                       \
      return Size == 32 ? CALL(group.mask(), value) : butterfly(group, value, OP<T>());     \
    }                                                                                      \
  };
__R3_CG_REDUX(plus, int, __reduce_add_sync)
__R3_CG_REDUX(plus, unsigned int, __reduce_add_sync)
__R3_CG_REDUX(less, int, __reduce_min_sync)
__R3_CG_REDUX(less, unsigned int, __reduce_min_sync)
__R3_CG_REDUX(greater, int, __reduce_max_sync)
__R3_CG_REDUX(greater, unsigned int, __reduce_max_sync)
#undef __R3_CG_REDUX
#endif
} /* namespace __r3 */

template <unsigned int Size, typename Parent, typename T, typename Op>
__device__ __forceinline__ T reduce(const thread_block_tile<Size, Parent> &group, T value,
                                    Op op) {
  return __r3::redux<T, Op>::run(group, value, op);
}

} /* namespace cooperative_groups */
#endif
