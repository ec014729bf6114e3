"""Guarded buffers as they cross between the judge and the worker that runs a candidate.

A buffer's storage is ``guard | data | guard`` as bytes. Guard bytes and poison are random
and drawn from seeds the judge picks for each run, so a candidate cannot recognise them,
and the judge, which never runs candidate code, can regenerate them to check what came back.
"""

from __future__ import annotations

import numpy as np

from ..model.arguments import GUARD_BYTES


def random_bytes(seed: int, count: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, count, dtype=np.uint8)


def poison_for(like: np.ndarray, seed: int) -> np.ndarray:
    """The poison a buffer shaped like ``like`` holds before a run with ``seed``."""
    return random_bytes(seed, like.nbytes).view(like.dtype).reshape(like.shape)


def guard_length(dtype: np.dtype) -> int:
    """Guard size in bytes: at least GUARD_BYTES, a whole number of elements."""
    itemsize = np.dtype(dtype).itemsize
    return -(-GUARD_BYTES // itemsize) * itemsize


class GuardedBuffer:
    """An array with random guard bytes before and after it (out-of-bounds writes show)."""

    def __init__(self, like: np.ndarray, guard_seed: int) -> None:
        self.dtype, self.shape = like.dtype, like.shape
        self.guard = guard_length(like.dtype)
        elements = self.guard // like.dtype.itemsize
        # typed, so the array's base is one buffer of its own dtype: a GPU backend copies
        # the guards along and a device write past the end lands in them
        typed = np.empty(like.size + 2 * elements, dtype=like.dtype)
        self.storage = typed.view(np.uint8)
        guards = random_bytes(guard_seed, 2 * self.guard)
        self.storage[: self.guard] = guards[: self.guard]
        self.storage[self.guard + like.nbytes:] = guards[self.guard:]
        self.array = typed[elements: elements + like.size].reshape(like.shape)

    def fill(self, values: np.ndarray | None, poison_seed: int | None) -> None:
        """Recorded input values, or random poison (for a buffer the kernel only writes)."""
        if poison_seed is None:
            np.copyto(self.array, values)
        else:
            size = self.storage.size - 2 * self.guard
            self.storage[self.guard: self.guard + size] = random_bytes(poison_seed, size)


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
