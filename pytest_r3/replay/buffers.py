"""Buffers as they cross between the judge and the worker that runs a candidate: guarded,
or laid out as in production.

A guarded buffer's storage is ``guard | data | guard`` as bytes. Guard bytes and poison are
random and drawn from seeds the judge picks for each run, so a candidate cannot predict
them, and the judge, which never runs candidate code, can regenerate them to check what
came back. A guarded buffer is still not a numpy array as a user's code makes it: where the
guard is, numpy's allocator keeps a chunk header, and a candidate that reads it can tell a
judged run from production. So the runs that decide (timing, and a pass of many calls after
it) use plain buffers (:class:`PlainBuffer`): allocated by numpy exactly as the user's
arrays are, out-of-bounds writes seen in the allocator's own bytes around them.
"""

from __future__ import annotations

import ctypes
import functools
import mmap
import weakref

import numpy as np

from ..model.arguments import GUARD_BYTES
from . import layout


def random_bytes(seed: int, count: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, count, dtype=np.uint8)


def poison_for(like: np.ndarray, seed: int) -> np.ndarray:
    """The poison a buffer shaped like ``like`` holds before a run with ``seed``: random
    bytes. A negative seed (the judge's probe of which buffers a kernel reads) also sets
    every floating-point element's exponent bits, so each is a NaN or an Inf: a kernel that
    reads the buffer only to multiply it by zero (``y = a*x + 0*y``) shows it at any size."""
    poison = random_bytes(abs(seed), like.nbytes).view(like.dtype).reshape(like.shape)
    component = like.dtype.itemsize // (2 if like.dtype.kind == "c" else 1)
    if seed < 0 and like.dtype.kind in "fc" and component in (2, 4, 8):
        info = np.finfo(np.dtype(f"f{component}"))
        exponent = ((1 << info.nexp) - 1) << info.nmant
        poison.reshape(-1).view(f"u{component}")[:] |= exponent
    return poison


def guard_length(dtype: np.dtype) -> int:
    """Guard size in bytes: at least GUARD_BYTES, a whole number of elements."""
    itemsize = np.dtype(dtype).itemsize
    return -(-GUARD_BYTES // itemsize) * itemsize


class GuardedBuffer:
    """An array with random guard bytes before and after it (out-of-bounds writes show).
    ``fenced`` (host memory only): the data ends at a page boundary (rounded up to 16
    bytes, so its start stays aligned; with ``flush``, exactly, its start then misaligned
    as a ``[1:]`` slice's may be) and the page after it is inaccessible, the trailing
    guard's bytes in it, until :meth:`open_floor`: a store past the end faults even where
    it puts back the bytes it read, which no guard could see, and so does a load (a vector
    tail read past ``x``), as both do in production where the array ends at a page with
    nothing mapped above (``np.load(..., mmap_mode='r')[1:]``). ``floored`` (with
    ``fenced``), its mirror: the data starts at a page boundary with inaccessible pages
    below it, the leading guard's bytes in them, until :meth:`open_floor` (see
    floored_seed).

    ``read_only`` (host memory only: the runner asks it on the CPU): a buffer the baseline
    never writes, whose mapping (from its data's first page on: a floor stays inaccessible,
    and so does a ceiling) turns read-only once its first ``fill`` has written the input:
    any write through it faults, however the kernel came by its address (a def-use walk of
    the address, see model/address_use.py, cannot follow control flow). On every run, not
    only the fenced ones: a rewrite that writes an input only where the layout says
    "fenced" (a buffer at a page edge) would be caught nowhere. Unfenced, the data lies
    inside a mapping of its own, at a 16-byte offset the seed draws, never within 16 bytes
    of a page edge (see _inside_region)."""

    def __init__(self, like: np.ndarray, guard_seed: int, fenced: bool = False,
                 read_only: bool = False, floored: bool = False, flush: bool = False
                 ) -> None:
        self.dtype, self.shape = like.dtype, like.shape
        self.guard = guard_length(like.dtype)
        elements = self.guard // like.dtype.itemsize
        # typed, so the array's base is one buffer of its own dtype: a GPU backend copies
        # the guards along and a device write past the end lands in them
        self.floor: tuple[int, int] | None = None  # the inaccessible pages below the data
        self.ceiling: tuple[int, int] | None = None  # and those above it (fenced)
        floored = fenced and floored
        region = _floored_region(like, self.guard) if floored else \
            _fenced_region(like, self.guard) if fenced else None
        inside = None if region is not None or not read_only else \
            _inside_region(like, self.guard, guard_seed)
        if inside is not None:
            region, start = inside
            typed = np.frombuffer(region, dtype=like.dtype, count=like.size + 2 * elements,
                                  offset=start)
        elif region is None:
            typed = np.empty(like.size + 2 * elements, dtype=like.dtype)
        else:
            end = like.nbytes if flush else _rounded(like.nbytes)
            start = _tail(self.guard) - self.guard if floored else \
                len(region) - _tail(self.guard) - self.guard - end
            typed = np.frombuffer(region, dtype=like.dtype, count=like.size + 2 * elements,
                                  offset=start)
        self.storage = typed.view(np.uint8)
        guards = random_bytes(guard_seed, 2 * self.guard)
        self.storage[: self.guard] = guards[: self.guard]
        self.storage[self.guard + like.nbytes:] = guards[self.guard:]
        self.array = typed[elements: elements + like.size].reshape(like.shape)
        self._region = region if read_only else None  # mapped read-only at the first fill
        self._read_only_from = _tail(self.guard) if floored else 0  # above the floor
        self._read_only_to = len(region) - (0 if floored or inside else _tail(self.guard)) \
            if region is not None else 0  # below the ceiling
        self.protected = False
        self.read_only_pages: tuple[int, int] | None = None  # once protected
        self._values: np.ndarray | None = None  # what the last fill copied in
        if inside is not None:
            weakref.finalize(typed, _give_back, region)
        elif region is not None and floored:
            self.floor = _close_floor(region, self.guard)
            weakref.finalize(typed, _give_back, region, True)
        elif region is not None:
            self.ceiling = _close_ceiling(region, self.guard)
            weakref.finalize(typed, _give_back, region)

    def fill(self, values: np.ndarray | None, poison_seed: int | None) -> None:
        """Recorded input values, or random poison (for a buffer the kernel only writes).
        A read-only buffer's mapping is made read-only after its first fill; filled again
        (between launches of a chain), it still holds its input (a write would have
        faulted), so only other values (a stale-output chain's changed inputs, another
        array) are copied in, through a writable mapping made read-only again."""
        if self.protected:  # by identity: nothing allocated (a launch's thread may be
            if values is None or values is self._values:  # a fresh one, see threads)
                return
            start = self._read_only_from
            _protect(self._region, start, self._read_only_to - start,
                     mmap.PROT_READ | mmap.PROT_WRITE)
        if poison_seed is None:
            np.copyto(self.array, values)
            self._values = values
            if self._region is not None:
                start = self._read_only_from
                _protect(self._region, start, self._read_only_to - start, mmap.PROT_READ)
                self.protected = True
                address = ctypes.addressof(ctypes.c_char.from_buffer(self._region))
                self.read_only_pages = (address + start, address + self._read_only_to)
        else:  # through the data only: a floored buffer's guard below is not accessible
            self.array.reshape(-1).view(np.uint8)[:] = \
                poison_for(self.array, poison_seed).reshape(-1).view(np.uint8)

    def open_floor(self) -> None:
        """Make a floored buffer's pages below its data, or a fenced one's above it,
        accessible again, so its storage (guards included) can be sent back after the run."""
        for pages in (self.floor, self.ceiling):
            if pages is not None:
                _libc_mprotect()(pages[0], pages[1] - pages[0],
                                 mmap.PROT_READ | mmap.PROT_WRITE)
        self.floor = self.ceiling = None


def fenced_seed(guard_seed: int) -> bool:
    """Whether a run with ``guard_seed`` has its guarded buffers fenced (odd seeds). The
    judge verifies every case first unfenced, where a write past the end lands in the
    guard and is named with its buffer and size, then fenced, where a write that puts
    back what it read faults; the baseline learns unfenced (see judge)."""
    return bool(guard_seed & 1)


def floored_seed(guard_seed: int) -> bool:
    """Whether a fenced run (odd ``guard_seed``) puts its buffers' starts, rather than their
    ends, against a protected page: every buffer's data then begins at a page boundary with
    an inaccessible page below it (where its leading guard lies), as an ``np.memmap`` of a
    raw file begins, so a read or write before element 0 faults (see fault_site, which
    names the argument). The judge draws the seeds at random: each fenced run is one or
    the other, half and half."""
    return fenced_seed(guard_seed) and bool(guard_seed & 2)  # the run's seed, not a buffer's


def flush_seed(guard_seed: int) -> bool:
    """Whether a fenced run that is not floored ends its buffers exactly at the page end
    (half of them), rather than rounded up to 16 bytes: an over-read of the last 16-byte
    lane faults only there, and a slice of a file mapping can end so in production."""
    return fenced_seed(guard_seed) and not floored_seed(guard_seed) and \
        bool(guard_seed & 4)


def _floored_region(like: np.ndarray, guard: int) -> mmap.mmap | None:
    """A mapping for ``guard | data | guard`` whose data starts at a page boundary, after
    whole pages holding the leading guard at their end (a spare one of the same size where
    there is one, as for the fenced end); None where the element size does not divide 16."""
    if layout.ALIGNMENT % like.dtype.itemsize or _libc_mprotect() is None:
        return None
    below = _tail(guard)
    size = below + -(-(like.nbytes + guard) // layout.PAGE) * layout.PAGE
    spare = _SPARE.get(-size)  # a negative key: a floored mapping, protected otherwise
    if spare:  # its floor, and all of it for a read-only input's, was left protected
        region = spare.pop()
        _protect(region, 0, len(region), mmap.PROT_READ | mmap.PROT_WRITE)
        return region
    return mmap.mmap(-1, size)


def _close_floor(region: mmap.mmap, guard: int) -> tuple[int, int]:
    """Make the pages below a floored buffer's data inaccessible, once its leading guard is
    written there; returns their address range."""
    below = _tail(guard)
    _protect(region, 0, below, 0)  # PROT_NONE
    address = ctypes.addressof(ctypes.c_char.from_buffer(region))
    return address, address + below


def _inside_region(like: np.ndarray, guard: int, guard_seed: int
                   ) -> tuple[mmap.mmap, int] | None:
    """A mapping for ``guard | data | guard`` of a read-only input on an unfenced run, and
    where its storage starts: the data at a 16-byte offset into its page drawn from
    ``guard_seed``, neither it nor its end within 16 bytes of a page edge (a fenced run's
    are), a spare mapping of the same size reused; None where the element size does not
    divide 16 (np.empty then, writable)."""
    if layout.ALIGNMENT % like.dtype.itemsize or _libc_mprotect() is None:
        return None
    slots = layout.PAGE // layout.ALIGNMENT - 4
    offset = layout.ALIGNMENT * (2 + (guard_seed >> 3) % slots)
    for _ in range(4):  # an end at an edge moves the start on (4 tries: one suffices)
        end = (offset + like.nbytes) % layout.PAGE
        if like.nbytes == 0 or layout.ALIGNMENT <= end <= layout.PAGE - layout.ALIGNMENT:
            break
        offset = layout.ALIGNMENT * (2 + (offset // layout.ALIGNMENT + 1) % slots)
    start = -(-guard // layout.PAGE) * layout.PAGE - guard + offset
    size = -(-(start + 2 * guard + like.nbytes) // layout.PAGE) * layout.PAGE
    spare = _SPARE.get(size)
    if spare:
        region = spare.pop()
        _protect(region, 0, len(region), mmap.PROT_READ | mmap.PROT_WRITE)
    else:
        region = mmap.mmap(-1, size)
    return region, start


def _close_ceiling(region: mmap.mmap, guard: int) -> tuple[int, int]:
    """Make the pages after a fenced buffer's data inaccessible, once its trailing guard is
    written there; returns their address range."""
    tail = _tail(guard)
    _protect(region, len(region) - tail, tail, 0)  # PROT_NONE
    address = ctypes.addressof(ctypes.c_char.from_buffer(region)) + len(region)
    return address - tail, address


def _rounded(nbytes: int) -> int:
    return -(-nbytes // layout.ALIGNMENT) * layout.ALIGNMENT


def _tail(guard: int) -> int:
    """The inaccessible pages after a fenced buffer's data: room for its trailing guard."""
    return max(1, -(-guard // layout.PAGE)) * layout.PAGE


def _fenced_region(like: np.ndarray, guard: int) -> mmap.mmap | None:
    """A mapping for ``guard | data | guard`` whose inaccessible tail starts where the data
    ends, rounded up to 16 bytes or not (see flush_seed); a spare one of the same size where
    there is one (a fresh mapping costs a page fault per page, 10 ms for 4 MiB); None where
    the element size does not divide 16."""
    if layout.ALIGNMENT % like.dtype.itemsize or _libc_mprotect() is None:
        return None
    head = -(-(guard + _rounded(like.nbytes)) // layout.PAGE) * layout.PAGE
    spare = _SPARE.get(head + _tail(guard))
    if spare:  # its tail, or all of it (a read-only buffer's), was left read-only
        region = spare.pop()
        _protect(region, 0, len(region), mmap.PROT_READ | mmap.PROT_WRITE)
        return region
    region = mmap.mmap(-1, head + _tail(guard))
    if like.nbytes >= layout.HUGE and hasattr(mmap, "MADV_HUGEPAGE"):
        try:  # as numpy advises its large blocks
            region.madvise(mmap.MADV_HUGEPAGE, 0, head)
        except OSError:
            pass
    return region


_SPARE: dict[int, list[mmap.mmap]] = {}  # fenced mappings no buffer uses, by size
SPARE_BYTES = 256 << 20  # kept at most


def _give_back(region: mmap.mmap, floored: bool = False) -> None:
    if sum(len(r) for kept in _SPARE.values() for r in kept) + len(region) <= SPARE_BYTES:
        _SPARE.setdefault(-len(region) if floored else len(region), []).append(region)


@functools.lru_cache(maxsize=1)
def _libc_mprotect():
    try:
        function = ctypes.CDLL(None, use_errno=True).mprotect
    except (OSError, AttributeError):
        return None
    function.restype = ctypes.c_int
    function.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    return function


def _protect(region: mmap.mmap, start: int, length: int, protection: int) -> None:
    """Set the protection of ``length`` bytes of the mapping from ``start`` (whole pages):
    its tail read-only once its guard bytes are written, all of it for a read-only input
    once filled, writable again to fill a reused one."""
    address = ctypes.addressof(ctypes.c_char.from_buffer(region))
    if _libc_mprotect()(address + start, length, protection):
        raise OSError(ctypes.get_errno(), "mprotect failed on a fenced buffer")


def split_storage(storage: np.ndarray, like: np.ndarray) -> np.ndarray:
    """The data part of a returned storage, as an array shaped like ``like``."""
    guard = guard_length(like.dtype)
    return storage[guard: guard + like.nbytes].view(like.dtype).reshape(like.shape)


def check_guards(storage: np.ndarray, like: np.ndarray, guard_seed: int) -> str | None:
    """None if both guards still hold their random bytes, else what was overwritten."""
    guard = guard_length(like.dtype)
    if storage.dtype != np.uint8 or storage.size != like.nbytes + 2 * guard:
        return f"came back with {storage.size} bytes instead of {like.nbytes + 2 * guard}"
    expected = random_bytes(guard_seed, 2 * guard)
    before = storage[:guard] != expected[:guard]
    after = storage[guard + like.nbytes:] != expected[guard:]
    if before.any():
        return f"wrote {guard - int(np.argmax(before))} byte(s) before the start of the buffer"
    if after.any():
        last = int(np.flatnonzero(after)[-1]) + 1
        return f"wrote up to {last} byte(s) past the end of the buffer"
    return None


# -- the production layout ---------------------------------------------------------------------
WORD = layout.WORD  # glibc's chunk header: a size word before every block malloc returns
_MMAPPED = layout.IS_MMAPPED  # the size word's flag for a block with a mapping of its own


@functools.lru_cache(maxsize=1)
def _usable_size():
    """libc's ``malloc_usable_size``, or None (not glibc: no bytes around are checked)."""
    try:
        function = ctypes.CDLL(None).malloc_usable_size
    except (OSError, AttributeError):
        return None
    function.restype, function.argtypes = ctypes.c_size_t, [ctypes.c_void_p]
    return function


class PlainBuffer:
    """An array allocated as numpy allocates the user's, so nothing around it says
    "judged": a heap block (``np.empty``: the same allocator, alignment, header and
    neighbours) or a fresh mapping laid out as glibc maps a large block (``mapped``: its
    size in bytes; see layout). What the allocator keeps next to the data (the size word
    before it, the unused tail of its block after it) is noted when the buffer is made and
    sent back with the data after the run: a write there is out of bounds, as a write into
    a guard is. ``keep``: spacers allocated with it, alive as long as it is."""

    def __init__(self, like: np.ndarray, array: np.ndarray | None = None,
                 mapped: int | None = None, keep: list | None = None) -> None:
        self.dtype, self.shape = like.dtype, like.shape
        self.array = np.empty(like.shape, dtype=like.dtype) if array is None else array
        self.keep = keep
        self._span = self._mapped_span(mapped) if mapped else self._around_span()
        self._before = self._around()

    def _mapped_span(self, size: int) -> tuple[int, int, int]:
        address = self.array.ctypes.data
        return address - WORD, address + self.array.nbytes, size - 2 * WORD - \
            self.array.nbytes

    def _around_span(self) -> tuple[int, int, int] | None:
        """(address of the size word, address after the data, bytes to the block's end)."""
        usable = _usable_size()
        address = self.array.ctypes.data
        if usable is None or not self.array.flags.owndata or address % 16:
            return None
        head = int.from_bytes(ctypes.string_at(address - WORD, WORD), "little")
        end = usable(address)
        header = 2 * WORD if head & _MMAPPED else WORD  # a mapped block's header is longer
        if end < self.array.nbytes or (head & ~7) != end + header:
            return None  # not a block of glibc's malloc: nothing around it is checked
        return address - WORD, address + self.array.nbytes, end - self.array.nbytes

    def _around(self) -> np.ndarray:
        if self._span is None:
            return np.zeros(0, dtype=np.uint8)
        head, tail, count = self._span
        # the size word's flags change when the block before is freed: only the size counts
        size = int.from_bytes(ctypes.string_at(head, WORD), "little") & ~7
        raw = size.to_bytes(WORD, "little") + ctypes.string_at(tail, count)
        return np.frombuffer(raw, dtype=np.uint8)

    def fill(self, values: np.ndarray | None, poison_seed: int | None) -> None:
        if poison_seed is None:
            np.copyto(self.array, values)
        else:
            self.array.reshape(-1).view(np.uint8)[:] = \
                poison_for(self.array, poison_seed).reshape(-1).view(np.uint8)

    @property
    def storage(self) -> np.ndarray:
        """``data | around as it was made | around now``, as bytes."""
        data = np.ascontiguousarray(self.array).reshape(-1).view(np.uint8)
        return np.concatenate([data, self._before, self._around()])


def plain_buffers(values: list[np.ndarray], seed: int) -> list[PlainBuffer]:
    """Buffers like ``values`` (in that order), allocated as the layout ``seed`` draws:
    which are mapped, in which order, after which spacers (see layout)."""
    drawn = layout.draw(seed, len(values))
    if drawn.adjacent:  # the blocks' headers and tails are checked as a mapped block's are
        return [PlainBuffer(like, array, mapped=span) for like, (array, span)
                in zip(values, layout.adjacent_arrays(values, drawn.order), strict=True)]
    made: dict[int, PlainBuffer] = {}
    for number in drawn.order:
        like = values[number]
        if drawn.mapped[number] and like.nbytes:
            array, size = layout.mapped_array(like)
            made[number] = PlainBuffer(like, array, mapped=size)
        else:
            keep: list = []
            made[number] = PlainBuffer(like, layout.heap_array(like, drawn.spacers[number],
                                                               keep), keep=keep)
    return [made[number] for number in range(len(values))]


def split_plain(storage: np.ndarray, like: np.ndarray) -> np.ndarray:
    """The data part of a plain buffer's returned storage, shaped like ``like``."""
    return storage[: like.nbytes].view(like.dtype).reshape(like.shape)


def check_plain(storage: np.ndarray, like: np.ndarray) -> str | None:
    """None if the allocator's bytes around a plain buffer are as they were before the run,
    else what was overwritten."""
    rest = storage.size - like.nbytes
    if storage.dtype != np.uint8 or rest < 0 or rest % 2:
        return f"came back with {storage.size} bytes for a buffer of {like.nbytes}"
    before, after = storage[like.nbytes: like.nbytes + rest // 2], storage[like.nbytes
                                                                             + rest // 2:]
    changed = np.flatnonzero(before != after)
    if not changed.size:
        return None
    if changed[0] < WORD:
        return (f"wrote {WORD - int(changed[0])} byte(s) before the start of the buffer "
                "(into the allocator's header)")
    return f"wrote up to {int(changed[-1]) - WORD + 1} byte(s) past the end of the buffer"
