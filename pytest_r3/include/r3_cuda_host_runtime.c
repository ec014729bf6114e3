/* r3_cuda_host_runtime.c: runs an emulated CUDA kernel's grid on the CPU (x86-64).
 *
 * pytest-r3 compiles this file once per process and links it into every kernel compiled
 * against r3_cuda_host.h, next to a generated `__r3_cuda_thread_body(void **args)` that
 * calls the kernel with its arguments. Blocks run one after another. Inside a block:
 *
 * - plain mode (the kernel has no barrier, shuffle or vote): the threads are a loop;
 * - fiber mode: each thread is a fiber with its own stack, switched by hand (glibc's
 *   swapcontext makes a system call per switch). A fiber runs until it reaches a barrier
 *   or a warp operation, then hands over to the next ready fiber; when every fiber waits,
 *   the scheduler releases a warp whose live lanes all wait, or the block's barrier when
 *   every thread waits there. Anything else (threads that exited while others wait at
 *   __syncthreads, threads at different barriers, a warp waiting on lanes that sit at a
 *   block barrier) is a deadlock on a GPU and an error here, naming the kernel and block.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#if !defined(__x86_64__)
#error "CUDA emulation's fiber switch is written for x86-64 only"
#endif

/* lanes per warp: 32 for CUDA, 64 for HIP's wavefronts (R3_WARP_SIZE=64); a mask holds a
 * bit per lane */
#ifndef R3_WARP_SIZE
#define R3_WARP_SIZE 32
#endif
#define R3_WARP R3_WARP_SIZE
typedef unsigned long long r3_mask;

typedef struct { unsigned int x, y, z; } r3_uint3;
typedef struct { r3_uint3 thread_idx, block_idx, block_dim, grid_dim; } r3_state;

/* what Python passes to __r3_cuda_launch (keep in step with backends/cuda/emulation_launch.py) */
typedef struct {
  unsigned int grid[3];
  unsigned int block[3];
  unsigned long long shared_bytes;
  int fibers;
  int stack_bytes;
  const char *kernel;
  void **args;
  char *error;
  int error_size;
  int racecheck;                       /* check shared memory for races (see below) */
  const unsigned long long *ranges;    /* (address, bytes) of each static __shared__ */
  const char *const *range_names;
  int range_count;
} r3_launch_t;

enum { READY, AT_BARRIER, AT_WARP, DONE };
enum { OP_SYNC, OP_COUNT, OP_AND, OP_OR };

enum { WARP_SHUFFLE, WARP_VOTE, WARP_MATCH };

typedef struct {
  void *sp;
  int status;
  int line;
  int predicate;
  r3_uint3 idx;
  /* the warp operation this lane waits at, and its answer once the group is released */
  int op, kind, lane, width;
  r3_mask mask;
  unsigned long long value, result;
  int all_same;
} r3_fiber;

#define R3_MAX_THREADS 1024
#define R3_WARPS (R3_MAX_THREADS / R3_WARP)

static r3_state state;
static const r3_launch_t *launch;
static char *dynamic_shared;
static int failed;

static r3_fiber fibers[R3_MAX_THREADS];
static int threads;        /* threads per block */
static int live;           /* fibers not DONE */
static int current = -1;   /* running fiber, -1: the scheduler */
static void *scheduler_sp;
static char *stacks;
static size_t stacks_bytes, stack_bytes, stacks_stride; /* stride: their guard pages' */
static int barrier_result;
#define R3_PRINTF_CAP (1 << 20)  /* device printf bytes per launch: CUDA's default buffer */
static size_t printed;           /* device printf bytes this launch */
static int printf_cut;           /* some were dropped */
static unsigned int epoch;                 /* barrier intervals, for the race check */
static unsigned int warp_epoch[R3_WARPS];  /* warp operations, likewise */

extern void __r3_cuda_thread_body(void **args);
extern void __r3_cuda_reset_shared(void); /* fills the kernel's __shared__ with 0xff */

const r3_state *__r3_cuda_state(void) { return &state; }
void *__r3_cuda_dynamic_shared(void) { return dynamic_shared; }

static void fail(const char *format, ...) {
  if (failed) return;
  failed = 1;
  int used = snprintf(launch->error, launch->error_size, "kernel '%s' block (%u, %u, %u): ",
                      launch->kernel, state.block_idx.x, state.block_idx.y,
                      state.block_idx.z);
  if (used < 0 || used >= launch->error_size) return;
  va_list args;
  va_start(args, format);
  vsnprintf(launch->error + used, launch->error_size - used, format, args);
  va_end(args);
}

/* -- fibers -------------------------------------------------------------------------- */
/* Saves the callee-saved registers and the stack pointer in *from, continues at to. */
__attribute__((naked, noinline)) static void r3_switch(void **from, void *to) {
  __asm__ volatile(
      "pushq %rbp\n\tpushq %rbx\n\tpushq %r12\n\tpushq %r13\n\tpushq %r14\n\tpushq %r15\n\t"
      "subq $8, %rsp\n\tstmxcsr (%rsp)\n\tfnstcw 4(%rsp)\n\t"
      "movq %rsp, (%rdi)\n\tmovq %rsi, %rsp\n\t"
      "ldmxcsr (%rsp)\n\tfldcw 4(%rsp)\n\taddq $8, %rsp\n\t"
      "popq %r15\n\tpopq %r14\n\tpopq %r13\n\tpopq %r12\n\tpopq %rbx\n\tpopq %rbp\n\tret\n");
}

static int next_ready(int from) {
  for (int i = from; i < threads; ++i)
    if (fibers[i].status == READY) return i;
  return -1;
}

/* the running fiber stops; the next ready one after it (or the scheduler) continues */
static void yield(void) {
  int me = current, next = next_ready(me + 1);
  current = next;
  if (next >= 0) {
    state.thread_idx = fibers[next].idx;
    r3_switch(&fibers[me].sp, fibers[next].sp);
  } else {
    r3_switch(&fibers[me].sp, scheduler_sp);
  }
}

static void fiber_main(void) {
  __r3_cuda_thread_body(launch->args);
  fibers[current].status = DONE;
  --live;
  yield(); /* never comes back */
  __builtin_trap();
}

static int ensure_stacks(int count) {
  size_t wanted = (size_t)count * stack_bytes;
  if (stacks && stacks_bytes >= wanted && stacks_stride == stack_bytes) return 1;
  if (stacks) munmap(stacks, stacks_bytes);
  stacks = mmap(NULL, wanted, PROT_READ | PROT_WRITE,
                MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (stacks == MAP_FAILED) {
    stacks = NULL;
    stacks_bytes = 0;
    return 0;
  }
  stacks_bytes = wanted;
  stacks_stride = stack_bytes;
  /* a page without access at the low end of each stack: an overflow faults at once */
  for (int i = 0; i < count; ++i) mprotect(stacks + (size_t)i * stack_bytes, 4096, PROT_NONE);
  return 1;
}

static void start_fiber(int i) {
  void **top = (void **)(stacks + (size_t)(i + 1) * stack_bytes);
  *--top = NULL;                    /* fiber_main's return address: it never returns */
  *--top = (void *)fiber_main;      /* where r3_switch's ret goes */
  for (int r = 0; r < 6; ++r) *--top = NULL;
  --top;                            /* the saved MXCSR and x87 control word: the caller's */
  unsigned int *control = (unsigned int *)top;
  __asm__ volatile("stmxcsr (%0)\n\tfnstcw 4(%0)" : : "r"(control) : "memory");
  fibers[i].sp = top;
  fibers[i].status = READY;
}

static int describe_thread(char *out, size_t size, int i) {
  return snprintf(out, size, "thread (%u, %u, %u)", fibers[i].idx.x, fibers[i].idx.y,
                  fibers[i].idx.z);
}

/* the answers of the lanes in `group` (bits, lane 0 = fiber `first`), released together */
static void answer(int first, r3_mask group) {
  for (int l = 0; l < R3_WARP; ++l) {
    if (!(group >> l & 1)) continue;
    r3_fiber *f = &fibers[first + l];
    r3_mask members = group & f->mask, hits = 0;
    for (int j = 0; j < R3_WARP; ++j)
      if (members >> j & 1) {
        unsigned long long other = fibers[first + j].value;
        if (f->op == WARP_MATCH ? other == f->value : other != 0) hits |= (r3_mask)1 << j;
      }
    if (f->op == WARP_SHUFFLE) {
      int width = f->width, base = l & ~(width - 1), src;
      switch (f->kind) {
      case 0: src = base + (f->lane & (width - 1)); break;
      case 1: src = (l - base) >= f->lane ? l - f->lane : l; break;
      case 2: src = (l - base) + f->lane < width ? l + f->lane : l; break;
      default: src = l ^ f->lane; if (src >= base + width) src = l; break;
      }
      /* a lane outside the group (exited, masked out, past the block) keeps its value */
      f->result = (src >= 0 && src < R3_WARP && (group >> src & 1)) ? fibers[first + src].value
                                                                : f->value;
    } else if (f->op == WARP_VOTE) {
      f->result = f->kind == 0 ? hits : f->kind == 1 ? hits == members
                : f->kind == 2 ? hits != 0 : 0;
    } else { /* match: any (kind 0) or all (kind 1) */
      f->all_same = hits == members;
      f->result = f->kind == 0 ? hits : (f->all_same ? members : 0);
    }
  }
  for (int l = 0; l < R3_WARP; ++l)
    if (group >> l & 1) fibers[first + l].status = READY;
  ++warp_epoch[first / R3_WARP];
}

/* releases the lanes of each warp that wait at a warp operation together: all its live
 * lanes, or a group named by the lanes' common mask whose other named lanes have exited */
static int release_warps(void) {
  int released = 0;
  for (int first = 0; first < threads; first += R3_WARP) {
    int last = first + R3_WARP < threads ? first + R3_WARP : threads;
    r3_mask live = 0, waiting = 0;
    for (int i = first; i < last; ++i) {
      if (fibers[i].status == DONE) continue;
      live |= (r3_mask)1 << (i - first);
      if (fibers[i].status == AT_WARP) waiting |= (r3_mask)1 << (i - first);
    }
    if (!waiting) continue;
    if (waiting == live) {
      answer(first, waiting);
      released = 1;
      continue;
    }
    for (r3_mask left = waiting; left;) {
      int l = __builtin_ctzll(left);
      r3_mask mask = fibers[first + l].mask, group = waiting & mask;
      int same = (live & mask) == group && (group >> l & 1);
      for (int j = 0; j < R3_WARP && same; ++j)
        if ((group >> j & 1) && fibers[first + j].mask != mask) same = 0;
      if (same) {
        answer(first, group);
        waiting &= ~group;
        released = 1;
      }
      left &= ~(group | ((r3_mask)1 << l));
    }
  }
  return released;
}

static int release_barrier(void) {
  int waiting = 0, first_waiting = -1, first_done = -1, other_line = -1;
  for (int i = 0; i < threads; ++i) {
    if (fibers[i].status == AT_BARRIER) {
      if (first_waiting < 0) first_waiting = i;
      else if (fibers[i].line != fibers[first_waiting].line && other_line < 0) other_line = i;
      ++waiting;
    } else if (fibers[i].status == DONE && first_done < 0) {
      first_done = i;
    }
  }
  char who[64], other[64];
  if (waiting == live && first_done >= 0) {
    describe_thread(who, sizeof who, first_done);
    describe_thread(other, sizeof other, first_waiting);
    fail("divergent __syncthreads: %d of %d threads wait at the barrier on line %d while "
         "the others have exited (%s returned, %s waits). Every thread of a block must "
         "reach each __syncthreads; on a GPU this hangs or corrupts shared memory. Move "
         "the barrier out of the condition, or let all threads run to it.",
         waiting, threads, fibers[first_waiting].line, who, other);
    return 0;
  }
  if (waiting == live && other_line >= 0) {
    describe_thread(who, sizeof who, first_waiting);
    describe_thread(other, sizeof other, other_line);
    fail("threads wait at different __syncthreads calls (%s on line %d, %s on line %d): a "
         "barrier inside a condition that differs between threads",
         who, fibers[first_waiting].line, other, fibers[other_line].line);
    return 0;
  }
  if (waiting != live) {
    int warp_waiter = -1;
    for (int i = 0; i < threads && warp_waiter < 0; ++i)
      if (fibers[i].status == AT_WARP) warp_waiter = i;
    describe_thread(who, sizeof who, warp_waiter);
    if (first_waiting >= 0) {
      describe_thread(other, sizeof other, first_waiting);
      fail("deadlock: %s waits at a warp shuffle/vote for lanes that wait at "
           "__syncthreads (line %d, %s): a warp operation inside a condition that differs "
           "within the warp", who, fibers[first_waiting].line, other);
    } else {
      fail("deadlock: %s waits at a warp shuffle/vote that other lanes of its warp never "
           "reach", who);
    }
    return 0;
  }
  int count = 0;
  for (int i = 0; i < threads; ++i) {
    count += fibers[i].predicate;
    fibers[i].status = READY;
  }
  barrier_result = count;
  ++epoch;
  return 1;
}

static void run_block_fibers(void) {
  live = threads;
  for (int i = 0; i < threads; ++i) start_fiber(i);
  for (;;) {
    int first = next_ready(0);
    if (first >= 0) {
      current = first;
      state.thread_idx = fibers[first].idx;
      r3_switch(&scheduler_sp, fibers[first].sp);
      current = -1;
    }
    if (failed || live == 0) return;
    if (release_warps()) continue;
    if (!release_barrier()) return;
  }
}

/* -- race check ------------------------------------------------------------------------
 * With PYTEST_R3_CUDA_RACECHECK=1 every load and store of the kernel calls
 * __r3_cuda_access. For each 4-byte word of shared memory the last writer and reader and
 * the barrier interval ("epoch") they acted in are kept; two threads touching one word in the
 * same interval, one of them writing, is a race (no __syncthreads orders them), unless both
 * are lanes of one warp and a warp operation came between. Epochs only grow during a launch,
 * so nothing is cleared between blocks. */
#define R3_MANY 0xffffffffu
typedef struct {
  unsigned int writer, write_epoch, write_warp_epoch;
  unsigned int reader, read_epoch, read_warp_epoch;
} r3_shadow;

static r3_shadow *shadow;
static size_t shadow_words;

static int linear_thread(void) {
  return (int)(state.thread_idx.x + state.block_dim.x * (state.thread_idx.y +
                                                          state.block_dim.y * state.thread_idx.z));
}

static void describe_linear(char *out, size_t size, unsigned int id) {
  unsigned int x = state.block_dim.x, y = state.block_dim.y;
  snprintf(out, size, "thread (%u, %u, %u)", id % x, id / x % y, id / (x * y));
}

static int ordered(unsigned int other, unsigned int other_epoch, unsigned int other_warp_epoch,
                   unsigned int me) {
  if (other == 0 || other == me || other_epoch != epoch) return 1;
  if (other == R3_MANY) return 0;
  unsigned int warp = (me - 1) / R3_WARP;
  return (other - 1) / R3_WARP == warp && other_warp_epoch != warp_epoch[warp];
}

static void report_race(const char *mine, const char *theirs, unsigned int other,
                        const char *name, size_t offset, unsigned int me) {
  char one[64], two[64];
  describe_linear(one, sizeof one, me - 1);
  if (other == R3_MANY)
    snprintf(two, sizeof two, "other threads");
  else
    describe_linear(two, sizeof two, other - 1);
  fail("shared-memory race on %s (byte %zu): %s %s it after %s %s it, with no __syncthreads "
       "between them", name, offset, one, mine, two, theirs);
}

void __r3_cuda_access(void *address, unsigned long long bytes, int write) {
  if (!launch->racecheck || failed) return;
  unsigned long long a = (unsigned long long)address;
  size_t base = 0;
  const char *name = NULL;
  unsigned long long start = 0, size = 0;
  for (int r = 0; r <= launch->range_count; ++r) {
    int dynamic = r == launch->range_count;
    start = dynamic ? (unsigned long long)dynamic_shared : launch->ranges[2 * r];
    size = dynamic ? launch->shared_bytes : launch->ranges[2 * r + 1];
    if (start && a >= start && a < start + size) {
      name = dynamic ? "extern __shared__ memory" : launch->range_names[r];
      break;
    }
    base += (size + 3) / 4;
  }
  if (!name) return;
  unsigned int me = (unsigned int)linear_thread() + 1, warp = (me - 1) / R3_WARP;
  size_t first = (a - start) / 4, last = (a + bytes - 1 - start) / 4;
  if (last >= (size + 3) / 4) last = (size + 3) / 4 - 1;
  for (size_t w = first; w <= last && base + w < shadow_words; ++w) {
    r3_shadow *s = &shadow[base + w];
    if (write) {
      if (!ordered(s->writer, s->write_epoch, s->write_warp_epoch, me)) {
        report_race("writes", "wrote", s->writer, name, w * 4, me);
        return;
      }
      if (!ordered(s->reader, s->read_epoch, s->read_warp_epoch, me)) {
        report_race("writes", "read", s->reader, name, w * 4, me);
        return;
      }
      s->writer = me;
      s->write_epoch = epoch;
      s->write_warp_epoch = warp_epoch[warp];
    } else {
      if (!ordered(s->writer, s->write_epoch, s->write_warp_epoch, me)) {
        report_race("reads", "wrote", s->writer, name, w * 4, me);
        return;
      }
      if (s->read_epoch != epoch || s->reader == 0) s->reader = me;
      else if (s->reader != me) s->reader = R3_MANY;
      s->read_epoch = epoch;
      s->read_warp_epoch = warp_epoch[warp];
    }
  }
}

static int start_racecheck(void) {
  size_t words = (launch->shared_bytes + 3) / 4;
  for (int r = 0; r < launch->range_count; ++r) words += (launch->ranges[2 * r + 1] + 3) / 4;
  shadow_words = words;
  shadow = calloc(words ? words : 1, sizeof *shadow);
  epoch = 0;
  for (int w = 0; w < R3_WARPS; ++w) warp_epoch[w] = 0;
  return shadow != NULL;
}

/* -- services the kernel calls ----------------------------------------------------------- */
int __r3_cuda_barrier(int predicate, int op, int line) {
  if (current < 0) {
    fail("__syncthreads reached outside a fiber (pytest-r3 chose plain mode for a kernel "
         "with barriers; please report this)");
    return 0;
  }
  r3_fiber *me = &fibers[current];
  me->predicate = predicate;
  me->line = line;
  me->status = AT_BARRIER;
  yield();
  switch (op) {
  case OP_COUNT: return barrier_result;
  case OP_AND: return barrier_result == threads;
  case OP_OR: return barrier_result > 0;
  default: return 0;
  }
}

/* waits at a warp operation until the scheduler releases this lane's group, then answers */
static r3_fiber *warp_wait(int op, int kind, unsigned long long value, int lane, int width,
                           r3_mask mask) {
  r3_fiber *me = &fibers[current];
  me->op = op;
  me->kind = kind;
  me->value = value;
  me->lane = lane;
  me->width = (width <= 0 || width > R3_WARP || (width & (width - 1))) ? R3_WARP : width;
  me->mask = mask;
  me->status = AT_WARP;
  yield();
  return me;
}

unsigned long long __r3_cuda_shuffle(unsigned long long value, int kind, int lane, int width,
                                     r3_mask mask) {
  if (current < 0) {
    fail("a warp shuffle ran outside a fiber (please report this)");
    return value;
  }
  return warp_wait(WARP_SHUFFLE, kind, value, lane, width, mask)->result;
}

/* kind 0: __ballot_sync, 1: __all_sync, 2: __any_sync, 3: __syncwarp */
r3_mask __r3_cuda_vote(int predicate, int kind, r3_mask mask) {
  if (current < 0) {
    fail("a warp vote ran outside a fiber (please report this)");
    return 0;
  }
  return (r3_mask)warp_wait(WARP_VOTE, kind, predicate != 0, 0, R3_WARP, mask)->result;
}

/* __match_any_sync (kind 0): the lanes holding this lane's value; __match_all_sync (1): all
 * members if they all hold the same value (*predicate = 1), else 0 */
r3_mask __r3_cuda_match(unsigned long long value, int kind, r3_mask mask,
                             int *predicate) {
  if (current < 0) {
    fail("a warp match ran outside a fiber (please report this)");
    return 0;
  }
  r3_fiber *me = warp_wait(WARP_MATCH, kind, value, 0, R3_WARP, mask);
  if (kind == 1 && predicate) *predicate = me->all_same;
  return (r3_mask)me->result;
}

r3_mask __r3_cuda_activemask(void) {
  if (current < 0) return ~(r3_mask)0 >> (64 - R3_WARP);
  int first = current / R3_WARP * R3_WARP;
  r3_mask mask = 0;
  for (int i = first; i < first + R3_WARP && i < threads; ++i)
    if (fibers[i].status != DONE) mask |= (r3_mask)1 << (i - first);
  return mask;
}

int __r3_cuda_printf(const char *format, ...) {
  for (const char *p = format; *p; ++p) {
    if (*p != '%') continue;
    ++p;
    while (*p && strchr("-+ #0123456789.*hlLqjzt", *p)) ++p;
    if (*p == 'n') {
      fail("printf with %%n is not supported on the device");
      return -1;
    }
    if (!*p) break;
  }
  /* at most R3_PRINTF_CAP bytes per launch, as a GPU's printf buffer keeps: a kernel asking
   * for "%20000000d" in every thread cannot fill the disk through the worker's log */
  static char text[R3_PRINTF_CAP + 1];
  size_t room = R3_PRINTF_CAP - printed;
  va_list args;
  va_start(args, format);
  int wanted = vsnprintf(text, room + 1, format, args);
  va_end(args);
  if (wanted < 0) return wanted;
  size_t kept = (size_t)wanted < room ? (size_t)wanted : room;
  fwrite(text, 1, kept, stdout);
  printed += kept;
  printf_cut |= kept < (size_t)wanted;
  return wanted;
}

static void stop_fiber(void) {
  if (current >= 0) {
    /* this fiber stops for good: the scheduler returns at once since failed is set */
    fibers[current].status = DONE;
    --live;
    r3_switch(&fibers[current].sp, scheduler_sp);
  }
  /* unreachable: pytest-r3 runs every kernel that can trap in fiber mode */
  fflush(stdout);
  abort();
}

void __r3_cuda_trap(int line) {
  fail("__trap() called on line %d by thread (%u, %u, %u)", line, state.thread_idx.x,
       state.thread_idx.y, state.thread_idx.z);
  stop_fiber();
}

void __r3_cuda_assert_fail(const char *condition, const char *file, int line) {
  fail("assertion `%s` failed at %s:%d in thread (%u, %u, %u)", condition, file, line,
       state.thread_idx.x, state.thread_idx.y, state.thread_idx.z);
  stop_fiber();
}

/* unmaps the fiber stacks (the launcher calls it before its code is freed) */
void __r3_cuda_release(void) {
  if (stacks) munmap(stacks, stacks_bytes);
  stacks = NULL;
  stacks_bytes = 0;
}

/* -- the launch ---------------------------------------------------------------------------- */
int __r3_cuda_launch(const r3_launch_t *l) {
  launch = l;
  failed = 0;
  current = -1;
  printed = 0;
  printf_cut = 0;
  state.grid_dim = (r3_uint3){l->grid[0], l->grid[1], l->grid[2]};
  state.block_dim = (r3_uint3){l->block[0], l->block[1], l->block[2]};
  threads = (int)(l->block[0] * l->block[1] * l->block[2]);
  if (threads > R3_MAX_THREADS) {
    fail("a block of %d threads exceeds %d", threads, R3_MAX_THREADS);
    return 1;
  }
  void *shared = NULL;
  if (l->shared_bytes) {
    shared = aligned_alloc(256, (l->shared_bytes + 255) / 256 * 256);
    if (!shared) {
      fail("cannot allocate %llu bytes of dynamic shared memory", l->shared_bytes);
      return 1;
    }
  }
  dynamic_shared = shared;
  if (l->racecheck && !start_racecheck()) {
    fail("cannot allocate the race check's shadow memory");
    free(shared);
    return 1;
  }
  if (l->fibers) {
    stack_bytes = (size_t)l->stack_bytes;
    if (!ensure_stacks(threads)) {
      fail("cannot map %d fiber stacks of %zu bytes", threads, stack_bytes);
      free(shared);
      return 1;
    }
    for (int i = 0; i < threads; ++i) {
      fibers[i].idx.x = (unsigned)i % l->block[0];
      fibers[i].idx.y = (unsigned)i / l->block[0] % l->block[1];
      fibers[i].idx.z = (unsigned)i / (l->block[0] * l->block[1]);
    }
  }
  for (unsigned int bz = 0; bz < l->grid[2] && !failed; ++bz)
    for (unsigned int by = 0; by < l->grid[1] && !failed; ++by)
      for (unsigned int bx = 0; bx < l->grid[0] && !failed; ++bx) {
        state.block_idx = (r3_uint3){bx, by, bz};
        ++epoch; /* accesses of different blocks never race: shared memory is per block */
        __r3_cuda_reset_shared();
        if (dynamic_shared) memset(dynamic_shared, 0xff, l->shared_bytes);
        if (l->fibers) {
          run_block_fibers();
          continue;
        }
        for (unsigned int tz = 0; tz < l->block[2]; ++tz)
          for (unsigned int ty = 0; ty < l->block[1]; ++ty)
            for (unsigned int tx = 0; tx < l->block[0]; ++tx) {
              state.thread_idx = (r3_uint3){tx, ty, tz};
              __r3_cuda_thread_body(l->args);
            }
      }
  if (printf_cut)
    printf("\n[pytest-r3: device printf output of kernel '%s' cut at %d bytes in this launch, "
           "as a GPU's printf buffer (cudaLimitPrintfFifoSize, 1 MiB by default) would]\n",
           l->kernel, R3_PRINTF_CAP);
  fflush(stdout);
  dynamic_shared = NULL;
  free(shared);
  free(shadow);
  shadow = NULL;
  shadow_words = 0;
  return failed;
}
