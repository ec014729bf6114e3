"""Guarded buffers between the judge and the worker (replay/buffers.py): random guards and
poison drawn from seeds, regenerated from the seed alone to judge what came back."""

from __future__ import annotations

import ctypes
import hashlib
import subprocess
import sys

import numpy as np
import pytest

from pytest_r3.replay.buffers import (
    GUARD_BYTES,
    GuardedBuffer,
    PlainBuffer,
    check_guards,
    check_plain,
    fenced_seed,
    floored_seed,
    flush_seed,
    guard_length,
    poison_for,
    random_bytes,
    split_plain,
    split_storage,
)

LIKES = {
    "float32": np.linspace(-1, 1, 10, dtype=np.float32),
    "float64": np.linspace(0, 5, 7),
    "int32": np.arange(-6, 6, dtype=np.int32),
    "uint8": np.arange(13, dtype=np.uint8),
    "2-D": np.arange(12, dtype=np.float32).reshape(3, 4),
    "empty": np.zeros(0, dtype=np.float64),
}
KINDS = pytest.mark.parametrize("like", LIKES.values(), ids=LIKES.keys())
# numpy points an empty array at the start of its storage, not at the data part
NONEMPTY = pytest.mark.parametrize("like", [v for v in LIKES.values() if v.size],
                                   ids=[k for k, v in LIKES.items() if v.size])


def _clobber(buffer: GuardedBuffer, index: int) -> None:
    """Flip every bit of element ``index`` through a raw pointer, as a kernel writing
    out[index] would (``index`` may be outside the array): each byte surely changes."""
    size = buffer.array.itemsize
    raw = (ctypes.c_uint8 * size).from_address(buffer.array.ctypes.data + index * size)
    for i in range(size):
        raw[i] ^= 0xFF


def _guards(buffer: GuardedBuffer) -> tuple[np.ndarray, np.ndarray]:
    return buffer.storage[: buffer.guard].copy(), buffer.storage[-buffer.guard:].copy()


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """Byte for byte (so NaN poison compares equal to itself, payload included)."""
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


# -- layout ----------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.uint8, np.int16, np.float32, np.int32, np.float64,
                                   np.complex128, np.dtype("V3"), np.dtype("V12")])
def test_guard_length_is_a_whole_number_of_elements(dtype):
    length = guard_length(dtype)
    assert length % np.dtype(dtype).itemsize == 0
    assert GUARD_BYTES <= length < GUARD_BYTES + np.dtype(dtype).itemsize
    assert GUARD_BYTES >= 4096


@KINDS
def test_a_guarded_buffer_looks_like_the_original(like):
    buffer = GuardedBuffer(like, guard_seed=1)
    assert buffer.array.shape == like.shape and buffer.array.dtype == like.dtype
    assert buffer.array.flags.c_contiguous and buffer.array.flags.writeable
    assert buffer.guard == guard_length(like.dtype)
    assert buffer.storage.dtype == np.uint8
    assert buffer.storage.size == like.nbytes + 2 * buffer.guard
    # the array is the storage's data part, aligned to its elements
    offset = buffer.array.__array_interface__["data"][0] - buffer.storage.ctypes.data
    assert offset == (buffer.guard if like.size else 0) and offset % like.itemsize == 0


# -- random guards ---------------------------------------------------------------------------


def test_guards_are_random_and_differ_between_seeds():
    like = np.zeros(8, np.float32)
    first, second = GuardedBuffer(like, 5), GuardedBuffer(like, 6)
    before, after = _guards(first)
    # not a fixed byte a candidate could recognise
    assert np.unique(before).size > 200 and np.unique(after).size > 200
    assert not np.array_equal(before, after)
    other_before, other_after = _guards(second)
    assert (before != other_before).mean() > 0.9 and (after != other_after).mean() > 0.9


@KINDS
def test_the_same_seed_regenerates_the_same_guards(like):
    seed = 31337
    before, after = _guards(GuardedBuffer(like, seed))
    again_before, again_after = _guards(GuardedBuffer(like.copy(), seed))
    np.testing.assert_array_equal(before, again_before)
    np.testing.assert_array_equal(after, again_after)
    # the guards are the seed's bytes: before then after
    guard = guard_length(like.dtype)
    np.testing.assert_array_equal(np.concatenate([before, after]),
                                  random_bytes(seed, 2 * guard))


def test_guards_and_poison_are_the_same_in_another_process():
    """The judge, in its own process, regenerates what the worker's buffer held."""
    script = ("import hashlib, numpy as np\n"
              "from pytest_r3.replay.buffers import GuardedBuffer, poison_for\n"
              "like = np.zeros((5, 7), np.float64)\n"
              "b = GuardedBuffer(like, 424242)\n"
              "b.fill(None, 77)\n"
              "print(hashlib.sha256(b.storage.tobytes()"
              " + poison_for(like, 78).tobytes()).hexdigest())\n")
    child = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                           check=True)
    like = np.zeros((5, 7), np.float64)
    buffer = GuardedBuffer(like, 424242)
    buffer.fill(None, 77)
    here = hashlib.sha256(buffer.storage.tobytes() + poison_for(like, 78).tobytes()).hexdigest()
    assert child.stdout.strip() == here


# -- checking guards -------------------------------------------------------------------------


@KINDS
def test_intact_guards_pass(like):
    buffer = GuardedBuffer(like, 3)
    buffer.fill(like, None)
    buffer.array[...] = like[::-1] if like.ndim == 1 else like  # every in-bounds write is fine
    assert check_guards(buffer.storage, like, 3) is None
    assert check_guards(buffer.storage.copy(), like.copy(), 3) is None  # a returned copy
    # the judge checks against its own seed: the guards are not just any bytes
    assert check_guards(buffer.storage, like, 4) is not None


@NONEMPTY
def test_a_write_just_past_the_end_is_named(like):
    buffer = GuardedBuffer(like, 7)
    buffer.fill(like, None)
    _clobber(buffer, like.size)  # out[n]
    assert check_guards(buffer.storage, like, 7) == \
        f"wrote up to {like.itemsize} byte(s) past the end of the buffer"


@NONEMPTY
def test_a_write_before_the_start_is_named(like):
    buffer = GuardedBuffer(like, 8)
    buffer.fill(like, None)
    _clobber(buffer, -2)  # out[-2]
    assert check_guards(buffer.storage, like, 8) == \
        f"wrote {2 * like.itemsize} byte(s) before the start of the buffer"


def test_a_write_through_an_empty_buffer_is_caught():
    like = np.zeros(0, np.float32)
    buffer = GuardedBuffer(like, 18)
    assert check_guards(buffer.storage, like, 18) is None
    _clobber(buffer, 0)  # out[0] with n == 0
    assert check_guards(buffer.storage, like, 18) is not None


def test_far_writes_inside_the_guards_are_caught():
    like = np.zeros(10, np.float32)
    buffer = GuardedBuffer(like, 9)
    last = like.size + buffer.guard // like.itemsize - 1  # the guard's last element
    _clobber(buffer, last)
    assert check_guards(buffer.storage, like, 9) == \
        f"wrote up to {buffer.guard} byte(s) past the end of the buffer"
    _clobber(buffer, last)  # put it back
    assert check_guards(buffer.storage, like, 9) is None
    _clobber(buffer, -buffer.guard // like.itemsize)  # the first guard's first element
    assert check_guards(buffer.storage, like, 9) == \
        f"wrote {buffer.guard} byte(s) before the start of the buffer"


def test_a_write_before_the_start_is_reported_first():
    like = np.zeros(4, np.int32)
    buffer = GuardedBuffer(like, 10)
    _clobber(buffer, 4)
    _clobber(buffer, -1)
    assert check_guards(buffer.storage, like, 10) == \
        "wrote 4 byte(s) before the start of the buffer"


def test_a_write_of_the_old_fixed_guard_byte_is_caught():
    """A candidate that writes 0xA5 past the end (the old fixed guard) is not invisible."""
    like = np.zeros(10, dtype=np.uint8)
    buffer = GuardedBuffer(like, 11)
    ctypes.memset(buffer.array.ctypes.data + like.nbytes, 0xA5, 64)
    problem = check_guards(buffer.storage, like, 11)
    assert problem is not None and "past the end of the buffer" in problem


def test_a_storage_of_the_wrong_size_or_kind_is_rejected():
    like = np.zeros((2, 5), np.float32)
    storage = GuardedBuffer(like, 12).storage
    size = like.nbytes + 2 * guard_length(like.dtype)
    assert check_guards(storage[:-4], like, 12) == \
        f"came back with {size - 4} bytes instead of {size}"
    assert check_guards(np.concatenate([storage, storage[:1]]), like, 12) == \
        f"came back with {size + 1} bytes instead of {size}"
    assert check_guards(storage[:100], like, 12) == f"came back with 100 bytes instead of {size}"
    # the right number of bytes, but not as bytes
    problem = check_guards(storage.view(np.float32), like, 12)
    assert problem is not None and problem.startswith("came back with")
    # a storage for another dtype of the same element count does not fit either
    assert check_guards(storage, like.astype(np.float64), 12) is not None


# -- filling ---------------------------------------------------------------------------------


@KINDS
def test_fill_without_a_seed_copies_the_values(like):
    buffer = GuardedBuffer(like, 13)
    buffer.fill(like, None)
    assert _same_bits(buffer.array, like)
    assert check_guards(buffer.storage, like, 13) is None
    # a strided view is copied element by element
    if like.ndim == 2:
        values = np.asfortranarray(like)
        buffer.fill(values, None)
        np.testing.assert_array_equal(buffer.array, like)


@KINDS
def test_fill_with_a_seed_poisons_with_exactly_poison_for(like):
    buffer = GuardedBuffer(like, 14)
    buffer.fill(like, 99)
    assert _same_bits(buffer.array, poison_for(like, 99))  # NaN payloads too
    assert check_guards(buffer.storage, like, 14) is None  # the guards are left alone
    buffer.fill(None, 99)  # no values needed for a buffer the kernel only writes
    assert _same_bits(buffer.array, poison_for(like, 99))
    buffer.fill(None, 98)
    if like.size:
        assert not _same_bits(buffer.array, poison_for(like, 99))
    assert _same_bits(buffer.array, poison_for(like, 98))


def test_poison_is_random_and_differs_between_seeds():
    like = np.zeros(1000, np.float32)
    first, second = poison_for(like, 1), poison_for(like, 2)
    assert first.dtype == like.dtype and first.shape == like.shape
    assert np.unique(first.view(np.uint8)).size > 200  # not a pattern
    assert (first.view(np.uint32) == second.view(np.uint32)).mean() < 0.01
    assert _same_bits(poison_for(like, 1), first)  # the same seed: the same poison
    assert _same_bits(poison_for(np.ones(1000, np.float32), 1), first)  # whatever the values


@KINDS
def test_a_probe_seed_makes_every_float_element_nan_or_inf_in_both_layouts(like):
    """The judge's probe (a negative seed): each float element non-finite, so a kernel that
    reads a buffer only to multiply it by zero is seen reading it; other types stay random
    bytes. Guarded and production-layout buffers hold the same poison."""
    probe = poison_for(like, -12)
    if like.dtype.kind == "f":
        assert not np.isfinite(probe).any()
    else:
        assert _same_bits(probe, poison_for(like, 12))
    guarded, plain = GuardedBuffer(like, 3), PlainBuffer(like)
    guarded.fill(None, -12)
    plain.fill(None, -12)
    assert _same_bits(guarded.array, probe) and _same_bits(plain.array, probe)


# -- reading back ----------------------------------------------------------------------------


@KINDS
def test_split_storage_gives_back_the_data(like):
    buffer = GuardedBuffer(like, 16)
    buffer.fill(like, None)
    returned = buffer.storage.copy()  # what the worker sends back
    data = split_storage(returned, like)
    assert data.dtype == like.dtype and data.shape == like.shape
    assert _same_bits(data, like)
    # a view of the storage, not a copy
    assert np.shares_memory(data, returned) or like.size == 0


def test_a_kernel_write_shows_in_the_split_storage_and_nowhere_else():
    like = np.zeros((3, 4), np.int32)
    buffer = GuardedBuffer(like, 17)
    buffer.fill(None, 5)
    buffer.array[1, 2] = 42
    data = split_storage(buffer.storage.copy(), like)
    expected = poison_for(like, 5)
    expected[1, 2] = 42
    np.testing.assert_array_equal(data, expected)
    assert check_guards(buffer.storage, like, 17) is None


# -- the production layout ---------------------------------------------------------------------
def _allocated_by_malloc(array: np.ndarray) -> bool:
    """Whether the 8 bytes before ``array``'s data are glibc's size word for its block, the
    test a kernel can make to tell a user's array from a guarded one."""
    usable = ctypes.CDLL(None).malloc_usable_size
    usable.restype, usable.argtypes = ctypes.c_size_t, [ctypes.c_void_p]
    word = int.from_bytes(ctypes.string_at(array.ctypes.data - 8, 8), "little") & ~7
    return word - usable(array.ctypes.data) in (8, 16) and array.ctypes.data % 16 == 0


@pytest.mark.parametrize("n", [1, 5, 37, 1000, 100_000, 1_000_000])
def test_a_plain_buffer_looks_like_a_numpy_array_from_inside(n):
    """What a kernel can read around its pointer is what it reads around a user's array:
    the allocator's size word for its block before it, 16-byte alignment, no guard."""
    like = np.linspace(-1, 1, n, dtype=np.float32)
    assert _allocated_by_malloc(np.empty_like(like))  # what a user's array shows
    assert _allocated_by_malloc(PlainBuffer(like).array)
    guarded = GuardedBuffer(like, 7)  # its word before is guard: what gave the harness away
    assert ctypes.string_at(guarded.array.ctypes.data - 8, 8) == \
        random_bytes(7, 2 * guarded.guard)[guarded.guard - 8: guarded.guard].tobytes()


def test_a_plain_buffer_comes_back_as_filled_and_clean():
    like = np.arange(37, dtype=np.float32)
    plain = PlainBuffer(like)
    plain.fill(like, None)
    assert check_plain(plain.storage, like) is None
    assert np.array_equal(split_plain(plain.storage, like), like)
    plain.fill(None, 5)
    assert split_plain(plain.storage, like).tobytes() == random_bytes(5, like.nbytes).tobytes()


@pytest.mark.parametrize("n", [37, 1000, 100_000])
def test_writes_next_to_a_plain_buffer_are_seen(n):
    like = np.zeros(n, dtype=np.float32)
    past = PlainBuffer(like)
    ctypes.memset(past.array.ctypes.data + like.nbytes, 0x5A, 3)  # the unused tail
    assert check_plain(past.storage, like) == "wrote up to 3 byte(s) past the end of the buffer"
    before = PlainBuffer(like)
    size = before.array.ctypes.data - 8
    original = ctypes.c_uint64.from_address(size).value
    ctypes.c_uint64.from_address(size).value = original + 64  # the allocator's size word
    problem = check_plain(before.storage, like)
    ctypes.c_uint64.from_address(size).value = original
    assert problem and "before the start of the buffer" in problem


# -- where production-layout buffers land (replay/layout.py) ---------------------------------


def test_the_late_pass_walks_every_allocation_style_and_order():
    """Consecutive classes give every style (all mapped, all heap, mixed) with every order
    of three buffers: a kernel keyed on one layout of its pointers meets it, and others."""
    from pytest_r3.replay import layout

    seen = {(layout.draw(layout.seed_for(index, 99), 3).mapped,
             layout.draw(layout.seed_for(index, 99), 3).order) for index in range(18)}
    orders = {order for _, order in seen}
    assert len(orders) == 6
    assert {mapped for mapped, _ in seen} >= {(True,) * 3, (False,) * 3}
    assert ((True,) * 3, (0, 1, 2)) in seen and ((False,) * 3, (2, 1, 0)) in seen


def test_mapped_buffers_look_like_fresh_large_arrays_and_heap_ones_do_not():
    """A mapped buffer starts 16 bytes past a page boundary, below the one mapped before it,
    with glibc's size word before it; a heap buffer never starts 16 past a page. A write
    into the mapping's unused tail or the size word is out of bounds."""
    from pytest_r3.replay import layout
    from pytest_r3.replay.buffers import plain_buffers

    layout.prefer_heap()
    values = [np.zeros(70_000, dtype=np.float32), np.ones(70_000, dtype=np.float32)]
    mapped = plain_buffers(values, layout.seed_for(0, 5))  # all mapped, parameter order
    addresses = [b.array.ctypes.data for b in mapped]
    assert [a % 4096 for a in addresses] == [16, 16]
    assert addresses[0] > addresses[1]
    head = int.from_bytes(ctypes.string_at(addresses[0] - 8, 8), "little")
    assert head & 2 and (head & ~7) % 4096 == 0 and (head & ~7) >= values[0].nbytes + 16
    for index in range(1, 40, 3):  # every heap style draw
        for buffer in plain_buffers(values, layout.seed_for(index, index)):
            assert buffer.array.ctypes.data % 4096 != 16
    for where, words in ((values[0].nbytes + 4, "past the end"), (-3, "before the start")):
        (buffer,) = plain_buffers(values[:1], layout.seed_for(0, 7))
        ctypes.memset(buffer.array.ctypes.data + where, 0x5A, 1)
        assert words in check_plain(buffer.storage, values[0])


FENCED_WRITE_BACK = """
import ctypes, numpy as np
from pytest_r3.replay.buffers import GuardedBuffer
first = GuardedBuffer(np.zeros({n}, np.float32), 3, fenced=True)
del first  # its mapping is reused: fenced again
buffer = GuardedBuffer(np.zeros({n}, np.float32), 7, fenced=True)
end = buffer.array.ctypes.data + buffer.array.nbytes
ctypes.memmove(end - 4, end - 4, 4)          # the last element, rewritten: fine
print("inside", flush=True)
ctypes.memmove(end + 24, end + 24, 8)        # past the end, its own bytes put back
print("past the end", flush=True)
"""


@pytest.mark.parametrize("n", [1002, 1000, 3])
def test_a_fenced_buffer_faults_on_a_write_back_past_its_end(n):
    """The data ends where an inaccessible page begins (rounded up to 16 bytes): a store that
    puts back the bytes it read past the end, which no guard sees, faults."""
    done = subprocess.run([sys.executable, "-c", FENCED_WRITE_BACK.format(n=n)],
                          capture_output=True, text=True, timeout=60)
    assert done.stdout.split("\n")[:1] == ["inside"] and "past the end" not in done.stdout
    assert done.returncode == -11


FENCED_READ_PAST = """
import ctypes, numpy as np
from pytest_r3.replay.buffers import GuardedBuffer
buffer = GuardedBuffer(np.zeros({n}, np.float32), 7, fenced=True, flush={flush},
                       read_only={read_only})
buffer.fill(np.ones({n}, np.float32), None)
end = buffer.array.ctypes.data + buffer.array.nbytes
ctypes.string_at(end - 4, 4)                 # the last element: fine
print("inside", flush=True)
ctypes.string_at(end - 4, 64)                # a sixteen-float load from it
print("past the end", flush=True)
"""


@pytest.mark.parametrize("n, flush", [(1002, False), (1001, True), (37, True)])
def test_a_fenced_buffer_faults_on_a_read_past_its_end(n, flush):
    """The page after a fenced buffer is inaccessible: a vector load that runs past the
    end faults, as where nothing is mapped after an array in production (a slice of a file
    mapping); ``flush``, the data ends exactly at the page end."""
    script = FENCED_READ_PAST.format(n=n, flush=flush, read_only=False)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60)
    assert done.stdout.split("\n")[:1] == ["inside"] and "past the end" not in done.stdout
    assert done.returncode == -11


@pytest.mark.parametrize("n, flush", [(1002, False), (1001, True)])
def test_a_fenced_buffer_gives_back_its_guards_once_its_ceiling_is_open(n, flush):
    """Rounded: the data starts 16-byte aligned and ends 8 bytes below the page end; flush:
    it ends at the page end, its start misaligned as a[1:]'s; either way the trailing guard,
    in the inaccessible page, comes back whole once the page is open again."""
    like = np.arange(n, dtype=np.float32)
    buffer = GuardedBuffer(like, 7, fenced=True, flush=flush)
    buffer.fill(like, None)
    start = buffer.array.ctypes.data
    end = start + buffer.array.nbytes
    gap = 0 if flush else -n * 4 % 16
    assert (end + gap) % 4096 == 0 and start % 16 == (-n * 4 % 16 if flush else 0)
    low, high = buffer.ceiling
    assert low == end + gap and (high - low) % 4096 == 0
    buffer.open_floor()
    assert buffer.ceiling is None and check_guards(buffer.storage, like, 7) is None
    ctypes.memset(end, 0x5A, 1)  # past the end, once open: the guard says so
    assert "past the end" in check_guards(buffer.storage, like, 7)


def test_a_fenced_read_only_input_keeps_its_ceiling_closed():
    """Filling a read-only input makes its data read-only and leaves the page above it
    inaccessible (not readable, as a read-only mapping of the whole region would make it)."""
    script = FENCED_READ_PAST.format(n=1001, flush=True, read_only=True)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60)
    assert done.stdout.split("\n")[:1] == ["inside"] and "past the end" not in done.stdout
    assert done.returncode == -11


UNFENCED_READ_ONLY = """
import ctypes, numpy as np
from pytest_r3.replay.buffers import GuardedBuffer
like = np.arange({n}, dtype=np.float32)
first = GuardedBuffer(like, 3 << 3, read_only=True)
first.fill(like, None)
del first  # its mapping, left read-only, is reused: writable again for the guards
for seed in range(40):  # no start or end within 16 bytes of a page edge, whatever the seed
    other = GuardedBuffer(like, seed << 3, read_only=True)
    start, end = other.array.ctypes.data, other.array.ctypes.data + other.array.nbytes
    assert 16 <= start % 4096 <= 4080 and 16 <= end % 4096 <= 4080, (start, end)
    assert start % 16 == 0
buffer = GuardedBuffer(like, 7 << 3, read_only=True)
buffer.fill(like, None)
assert buffer.array.tolist() == like.tolist()
buffer.fill(like[::-1], None)  # a stale-output chain's changed input: copied in
assert buffer.array.tolist() == like[::-1].tolist() and buffer.protected
print("read", flush=True)
ctypes.memmove(buffer.array.ctypes.data + 8, buffer.array.ctypes.data + 8, 4)
print("written back", flush=True)
"""


@pytest.mark.parametrize("n", [1000, 1020, 3])
def test_an_unfenced_read_only_input_faults_on_any_write(n):
    """On every run, not only the fenced one, an input the baseline never writes lies in
    pages mapped read-only: a rewrite that writes it only where no buffer is at a page edge
    (or on the main thread) faults all the same; its data is never at a page edge."""
    done = subprocess.run([sys.executable, "-c", UNFENCED_READ_ONLY.format(n=n)],
                          capture_output=True, text=True, timeout=60)
    assert done.stdout.split("\n")[:1] == ["read"], done.stdout + done.stderr
    assert "written back" not in done.stdout and done.returncode == -11


def test_an_unfenced_read_only_input_gives_back_its_guards():
    like = np.arange(1000, dtype=np.float32)
    buffer = GuardedBuffer(like, 5 << 3, read_only=True)
    buffer.fill(like, None)
    assert buffer.protected and check_guards(buffer.storage, like, 5 << 3) is None
    assert np.array_equal(split_storage(buffer.storage, like), like)


def test_a_run_seed_ends_half_of_the_unfloored_fenced_runs_flush():
    seeds = range(4000)
    flush = [seed for seed in seeds if flush_seed(seed)]
    assert all(fenced_seed(seed) and not floored_seed(seed) for seed in flush)
    assert len(flush) == sum(fenced_seed(s) and not floored_seed(s) for s in seeds) // 2


def test_a_reused_fenced_mapping_gets_the_new_runs_guards():
    like = np.arange(1000, dtype=np.float32)
    first = GuardedBuffer(like, 3, fenced=True)
    address = first.array.ctypes.data
    del first
    again = GuardedBuffer(like, 9, fenced=True)
    again.fill(like, None)
    assert again.array.ctypes.data == address
    again.open_floor()  # its trailing guard lies in the inaccessible page
    assert check_guards(again.storage, like, 9) is None


READ_ONLY_WRITE = """
import ctypes, numpy as np
from pytest_r3.replay.buffers import GuardedBuffer
like = np.arange({n}, dtype=np.float32)
first = GuardedBuffer(like, 3, fenced=True, read_only=True)
first.fill(like, None)
del first  # its mapping, left read-only, is reused
output = GuardedBuffer(like, 5, fenced=True)
output.fill(like, None)
ctypes.memmove(output.array.ctypes.data, output.array.ctypes.data + 4, 4)
print("written", flush=True)
buffer = GuardedBuffer(like, 7, fenced=True, read_only=True)
buffer.fill(like, None)
buffer.fill(like, None)  # a chain's refill between launches: nothing to write
assert buffer.array.tolist() == like.tolist() and ctypes.c_float.from_address(
    buffer.array.ctypes.data + 8).value == 2.0
print("read", flush=True)
ctypes.memmove(buffer.array.ctypes.data + 8, buffer.array.ctypes.data + 8, 4)
print("written back", flush=True)
"""

FLOORED_READ_BEFORE = """
import ctypes, numpy as np
from pytest_r3.replay.buffers import GuardedBuffer
first = GuardedBuffer(np.zeros({n}, np.float32), 3, fenced=True, floored=True)
del first  # its mapping is reused: floored again
buffer = GuardedBuffer(np.zeros({n}, np.float32), 7, fenced=True, floored=True)
start = buffer.array.ctypes.data
ctypes.string_at(start, 4)                   # the first element: fine
print("inside", flush=True)
ctypes.string_at(start - 4, 4)               # the element before it: a fault
print("before the start", flush=True)
"""


@pytest.mark.parametrize("n", [1000, 3])
def test_a_fenced_read_only_input_faults_on_any_write(n):
    """An input the baseline never writes lies in pages mapped read-only on the fenced run:
    reading it works, writing one element back with its own value faults (no check of the
    values could see it); its mapping, reused, is writable again."""
    done = subprocess.run([sys.executable, "-c", READ_ONLY_WRITE.format(n=n)],
                          capture_output=True, text=True, timeout=60)
    assert done.stdout.split("\n")[:2] == ["written", "read"], done.stdout + done.stderr
    assert "written back" not in done.stdout
    assert done.returncode == -11


@pytest.mark.parametrize("n", [1000, 3])
def test_a_floored_buffer_faults_on_a_read_before_its_start(n):
    """The data starts at a page boundary with an inaccessible page below, as an np.memmap
    of a raw file does: a read of the element before the first faults."""
    done = subprocess.run([sys.executable, "-c", FLOORED_READ_BEFORE.format(n=n)],
                          capture_output=True, text=True, timeout=60)
    assert done.stdout.split("\n")[:1] == ["inside"] and "before the start" not in done.stdout
    assert done.returncode == -11


def test_a_floored_buffer_gives_back_its_guards_once_its_floor_is_open():
    like = np.arange(1002, dtype=np.float32)
    buffer = GuardedBuffer(like, 7, fenced=True, floored=True)
    buffer.fill(like, None)
    assert buffer.array.ctypes.data % 4096 == 0 and buffer.floor is not None
    low, high = buffer.floor
    assert high == buffer.array.ctypes.data and (high - low) % 4096 == 0
    buffer.open_floor()
    assert buffer.floor is None and check_guards(buffer.storage, like, 7) is None
    assert np.array_equal(split_storage(buffer.storage, like), like)
    buffer.array[-1] = 0.5  # a write inside is no guard's business
    ctypes.memset(buffer.array.ctypes.data - 2, 0x5A, 1)  # below, once the floor is open
    assert "before the start" in check_guards(buffer.storage, like, 7)


def test_a_run_seed_floors_about_half_of_the_fenced_runs_and_none_other():
    seeds = range(4000)
    floored = [seed for seed in seeds if floored_seed(seed)]
    assert all(fenced_seed(seed) for seed in floored)
    assert len(floored) == sum(fenced_seed(seed) for seed in seeds) // 2


FLOORED_READ_ONLY = """
import ctypes, numpy as np
from pytest_r3.replay.buffers import GuardedBuffer
like = np.arange(1000, dtype=np.float32)
first = GuardedBuffer(like, 3, fenced=True, read_only=True, floored=True)
first.fill(like, None)
first.open_floor()
del first  # its mapping, left read-only, is reused: writable again
output = GuardedBuffer(like, 5, fenced=True, floored=True)
output.fill(like, None)
ctypes.memmove(output.array.ctypes.data, output.array.ctypes.data + 4, 4)
print("written", flush=True)
buffer = GuardedBuffer(like, 7, fenced=True, read_only=True, floored=True)
buffer.fill(like, None)
assert buffer.array.tolist() == like.tolist()
print("read", flush=True)
{last}
print("past", flush=True)
"""


@pytest.mark.parametrize("access", ["ctypes.string_at(buffer.array.ctypes.data - 4, 4)",
                                    "ctypes.memmove(buffer.array.ctypes.data + 8, "
                                    "buffer.array.ctypes.data + 8, 4)"])
def test_a_floored_read_only_input_keeps_its_floor_and_faults_on_a_write(access):
    """Both layers at once: below the data nothing is accessible, the data itself is
    read-only; a mapping reused afterwards is writable again."""
    done = subprocess.run([sys.executable, "-c", FLOORED_READ_ONLY.format(last=access)],
                          capture_output=True, text=True, timeout=60)
    assert done.stdout.split("\n")[:2] == ["written", "read"], done.stdout + done.stderr
    assert "past" not in done.stdout and done.returncode == -11
