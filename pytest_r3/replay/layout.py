"""Where the production-layout buffers of one run land in memory, drawn per run.

A candidate can read its pointers' values: their offset in a page, their alignment, which
one is higher, how far apart they are. In a user's process those depend on how the arrays
were made: a short script's large arrays are each a fresh mapping of their own (glibc maps
blocks of 128 KiB and more), so each starts 16 bytes past a page boundary, one below the
other in the order they were allocated; a long-lived process's come from the heap, at any
16-byte offset, mostly ascending. A harness that always allocates one way (the worker's
order, its heap state) lets a kernel key a wrong or slow path on the other way and pass.

So every production-layout run draws its layout from its seed: each buffer is either a
fresh mapping laid out as glibc lays out a mapped block (its size word, ``IS_MMAPPED``, the
data at offset 16, the mapping's tail unused) or a heap block (``np.empty``, after an
optional spacer so its page offset varies, never 16 as a mapped block's is); the buffers
are allocated in an order the seed picks. The low bits of the seed choose the style and
the order *by construction* (see :func:`seed_for`), so the judge can walk a run of
launches through every style and order, and the two buffer sets that timing trades every
other round are one of each (see :func:`timed_seed`): a kernel slower on either is timed
slow on it.
"""

from __future__ import annotations

import ctypes
import itertools
import math
import mmap
from dataclasses import dataclass

import numpy as np

STYLES = ("mapped", "heap", "mixed")  # every buffer mapped, every one on the heap, or drawn
# the all-heap style lays its blocks end to end in allocation order, each starting where the
# one before ends (what consecutive numpy arrays of a few KiB to about a MiB are in a
# long-lived process); "mixed" keeps the allocator's own heap blocks, after spacers
ADJACENT_STYLE = "heap"
PREV_INUSE = 1  # a heap block's size word: the block before it is in use
CLASS_BITS = 12  # the seed's low bits: which style and order (see seed_for)
PAGE = mmap.PAGESIZE
ALIGNMENT = 16  # what glibc's malloc (and so numpy) aligns every block to
HUGE = 1 << 22  # numpy advises huge pages for blocks of this many bytes and more
WORD = 8
MAPPED_HEADER = 2 * WORD  # glibc's mapped block: prev_size, then size | IS_MMAPPED
IS_MMAPPED = 2
SPACER = 1024  # spacers at least this big: numpy serves smaller blocks from its own cache
MAX_ORDERS = 24  # up to four buffers, every order is walked; more, orders are drawn


# what timing's two buffer sets look like (see timed_seed), as a verdict names them
TIMED_LAYOUTS = ("buffers mapped in parameter order (a short script's fresh large arrays)",
                 "adjacent heap blocks in parameter order (a long-lived process's arrays)")
REVERSED_LAYOUTS = (TIMED_LAYOUTS[0],
                    "adjacent heap blocks in reverse allocation order (a long-lived "
                    "process's arrays, made last to first)")


def timed_layouts(heap_order: str) -> tuple[str, str]:
    """The names of timing's two buffer sets when its heap set is in ``heap_order``."""
    return REVERSED_LAYOUTS if heap_order == "reverse" else TIMED_LAYOUTS


@dataclass(frozen=True)
class Layout:
    """How one run's buffers are allocated: ``order`` (slot numbers, first allocated
    first), whether each slot is ``mapped``, and the spacer (bytes, 0: none) allocated just
    before each heap buffer."""

    order: tuple[int, ...]
    mapped: tuple[bool, ...]
    spacers: tuple[int, ...]
    adjacent: bool = False  # heap blocks end to end in ``order`` (see adjacent_arrays)

    def describe(self) -> str:
        kinds = ["mapped" if m else "heap" for m in self.mapped]
        return ("adjacent heap blocks " if self.adjacent else "") + "allocated in the order " \
            + ", ".join(f"#{n} ({kinds[n]})" for n in self.order)


def seed_for(index: int, high: int) -> int:
    """The seed of class ``index`` (style ``index % 3``, order ``index // 3``) with random
    ``high`` bits: consecutive indices walk through every style, then every order."""
    return (int(high) << CLASS_BITS) | (int(index) % (1 << CLASS_BITS))


def timed_seed(guard_seed: int, which: int, case_index: int, copy: int = 0,
               heap_order: str = "parameter") -> int:
    """The layout of timing's buffer set ``which`` (0 or 1) for one case: set 0 has every
    buffer mapped in parameter order (a short script's fresh large arrays), set 1 every
    buffer in adjacent heap blocks in parameter order (a long-lived process's consecutive
    arrays), or with ``heap_order`` "reverse" in reverse allocation order (the search times
    the first, a claim's confirmation the second: a rewrite slower only there is found
    out before it is locked); timing trades the sets every other round, so both variants
    run on both. Copies keep the style, in other orders."""
    style = 0 if which == 0 else STYLES.index(ADJACENT_STYLE)
    # parameter order: arrays are most often made in the order they are passed; the last
    # order (of up to four buffers, whose orders divide MAX_ORDERS) is the reverse
    order = MAX_ORDERS - 1 if which == 1 and heap_order == "reverse" else 0
    index = style + len(STYLES) * ((order + copy * 5) % MAX_ORDERS)
    return seed_for(index, (guard_seed * 4 + which) * 1_000_003 + case_index)


def draw(seed: int, count: int) -> Layout:
    """The layout ``seed`` picks for ``count`` buffers (see seed_for)."""
    index = seed % (1 << CLASS_BITS)
    rng = np.random.default_rng(seed)
    style = STYLES[index % len(STYLES)]
    orders = math.factorial(count)
    if orders <= MAX_ORDERS:
        number = index // len(STYLES) % orders  # in lexicographic order: the last reverses
        order = next(itertools.islice(itertools.permutations(range(count)), number, None))
    else:
        order = tuple(int(n) for n in rng.permutation(count))
    if style == "mixed":
        mapped = tuple(bool(b) for b in rng.integers(0, 2, count))
    else:
        mapped = (style == "mapped",) * count
    spacers = tuple(int(SPACER + 16 * rng.integers(0, 256)) if rng.integers(0, 2) else 0
                    for _ in range(count))
    if style == ADJACENT_STYLE:
        return Layout(order, mapped, (0,) * count, adjacent=True)
    return Layout(order, mapped, spacers)


# -- the two kinds of block ---------------------------------------------------------------
def mapped_array(like: np.ndarray) -> tuple[np.ndarray, int]:
    """An array in a fresh mapping of its own, as glibc maps a large block: the size word
    (with IS_MMAPPED) 8 bytes before the data, the data 16 bytes past the page boundary,
    numpy's huge-page advice for blocks of 4 MiB and more. Returns (array, block size)."""
    request = max(4 * WORD, (like.nbytes + WORD + 15) & ~15)
    size = -(-(request + WORD) // PAGE) * PAGE
    region = mmap.mmap(-1, size)
    region[WORD:MAPPED_HEADER] = (size | IS_MMAPPED).to_bytes(WORD, "little")
    if like.nbytes >= HUGE and hasattr(mmap, "MADV_HUGEPAGE"):
        try:  # as numpy advises the pages of its large blocks
            region.madvise(mmap.MADV_HUGEPAGE, PAGE, size - PAGE)
        except OSError:
            pass
    array = np.frombuffer(region, dtype=like.dtype, count=like.size, offset=MAPPED_HEADER)
    return array.reshape(like.shape), size


def heap_block_size(nbytes: int) -> int:
    """The size of the heap block glibc's malloc gives a request of ``nbytes``: the data
    plus its size word, rounded up to 16 bytes, 32 at least."""
    return max(4 * WORD, (nbytes + WORD + 15) & ~15)


def adjacent_arrays(likes: list[np.ndarray], order: tuple[int, ...]
                    ) -> list[tuple[np.ndarray, int]]:
    """Arrays like ``likes`` in heap blocks laid end to end in ``order``, as consecutive
    allocations from the top of glibc's heap are: each block's size word (``PREV_INUSE``)
    8 bytes before its data, the next block's data exactly one block size further, a size
    word after the last. They are carved out of one heap allocation, shifted so that none
    starts 16 bytes past a page boundary (which would look mapped). Returns (array, span)
    per buffer in parameter order, span being the bytes from the block's header to the end
    of its usable space plus one word (what a mapped block's size covers, see buffers)."""
    sizes = {number: heap_block_size(likes[number].nbytes) for number in order}
    total = sum(sizes.values())
    container = np.empty(total + 2 * PAGE, dtype=np.uint8)
    start = -container.ctypes.data % 16 + MAPPED_HEADER
    for _ in range(len(order) + 1):
        offsets, at = {}, start
        for number in order:
            offsets[number], at = at, at + sizes[number]
        if all((container.ctypes.data + o) % PAGE != MAPPED_HEADER for o in offsets.values()):
            break
        start += 16
    words = container.view(np.uint8)
    for number, offset in offsets.items():
        words[offset - WORD: offset] = np.frombuffer(
            (sizes[number] | PREV_INUSE).to_bytes(WORD, "little"), dtype=np.uint8)
    rest = (container.size - at) & ~15
    words[at - WORD: at] = np.frombuffer((rest | PREV_INUSE).to_bytes(WORD, "little"),
                                         dtype=np.uint8)
    made = []
    for number, like in enumerate(likes):
        array = np.frombuffer(container, dtype=like.dtype, count=like.size,
                              offset=offsets[number]).reshape(like.shape)
        made.append((array, sizes[number] + WORD))
    return made


def heap_array(like: np.ndarray, spacer: int, keep: list) -> np.ndarray:
    """``np.empty`` from the heap, after a spacer of ``spacer`` bytes (kept alive in
    ``keep``); never 16 bytes past a page boundary, which would look mapped."""
    if spacer:
        keep.append(np.empty(spacer, dtype=np.uint8))
    array = np.empty(like.shape, dtype=like.dtype)
    for extra in range(4):
        if like.nbytes == 0 or array.ctypes.data % PAGE != MAPPED_HEADER:
            break
        keep.append(array)
        keep.append(np.empty(SPACER + 16 * (extra + 1), dtype=np.uint8))
        array = np.empty(like.shape, dtype=like.dtype)
    return array


def prefer_heap() -> None:
    """Serve blocks up to glibc's maximum threshold (32 MiB) from the heap, so a heap
    buffer is one (mapped ones are made by :func:`mapped_array`); a fixed threshold also
    stops glibc moving it with what earlier runs freed. Nothing on another libc."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    mallopt(-3, 32 << 20)  # M_MMAP_THRESHOLD
