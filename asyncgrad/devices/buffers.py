"""Recycled buffers for the cpu's large gradient products and convolution's columns.

Note [Recycled product buffers]: a product of at least ``MIN_BYTES`` on the cpu is written
(``matmul(out=...)``) into a ``_Slab`` this cache keeps, of exactly the product's size, handed out
as a plain ndarray view over all of it, so a training step's weight gradients reuse mapped pages
instead of faulting in fresh ones (Note [Heap trimming and page faults] in devices/allocator.py).
Convolution's im2col columns (``copy``: windows.py copies its strided window views through
``recycled_copy``) are the same kind of buffer: large, made and dropped every step.
What must hold: a slab whose reference count is the cache's alone is seen by nothing and may be
handed out again (numpy stops a view's base chain at a change of type, so a view of the view holds
the view); ``owns_slab`` tells gradient stealing (devices/ownership.py) that the view is its slab's
only user; slabs in use and free stay within ``LIMIT_BYTES`` (free ones evicted least recently
used first, ``empty_cache()`` hands them all back); a slab is picked under a lock, since products
run on kernel threads too. The reasoning and the measurements: docs/design/cpu-memory.md.
"""

from __future__ import annotations

import sys
import threading
from collections import OrderedDict
from typing import Any

import numpy as np

MIN_BYTES = 256 << 10
"""Products smaller than this are made the plain way: glibc reuses their memory well (W3's 128 KB
activation gradients faulted 0 times a step), and the cache's pick would cost more than it saves."""

LIMIT_BYTES = 256 << 20
"""The most memory the cache's slabs (in use and free) may hold."""

_getrefcount = sys.getrefcount


class _Slab(np.ndarray):
    """A cached product buffer's memory (bytes); never handed out itself, only views of it."""


def _refs(slabs: list, position: int) -> int:
    """References to the slab at ``slabs[position]``, counted the one way both users count them."""
    slab = slabs[position]
    return _getrefcount(slab)


def _free_count() -> int:
    slabs = [_Slab((1,), np.uint8)]
    return _refs(slabs, 0)


_FREE = _free_count()
"""A slab's count when only the cache holds it, measured at import (as devices/ownership.py's)."""


def _slab_count(base: Any) -> int:
    return _getrefcount(base)  # counted as owns_slab counts


def _viewed_count() -> int:
    slabs = [_Slab((8,), np.uint8)]
    view = np.ndarray((1,), np.float64, buffer=slabs[0])
    base = view.base  # as a caller of owns_slab holds it
    return _slab_count(base)


_OWNED_BY_VIEW = _viewed_count()
"""A slab's count, seen from ``owns_slab``, when the cache and one view alone hold it."""


class BufferCache:
    """Slabs by size in bytes, each size's list oldest first (Note [Recycled product buffers])."""

    def __init__(self) -> None:
        self._slabs: OrderedDict[int, list[_Slab]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def matmul(self, a: Any, b: Any) -> Any:
        """``a @ b`` for two numpy matrices, into a recycled slab when the product is large."""
        if a.ndim != 2 or b.ndim != 2:
            return a @ b
        dtype = a.dtype if a.dtype == b.dtype else np.result_type(a, b)
        shape = (a.shape[0], b.shape[1])
        nbytes = shape[0] * shape[1] * dtype.itemsize
        if nbytes < MIN_BYTES or a.shape[1] != b.shape[0]:
            return a @ b  # small, or numpy words the mismatch
        out = self._take(shape, dtype, nbytes)
        if out is None:
            return a @ b
        return np.matmul(a, b, out=out)

    def copy(self, array: Any) -> Any:
        """A C-order copy of a numpy array, into a recycled slab when it is large."""
        nbytes = array.size * array.dtype.itemsize
        out = self._take(tuple(array.shape), array.dtype, nbytes) if nbytes >= MIN_BYTES else None
        if out is None:
            return array.copy(order="C")
        np.copyto(out, array)
        return out

    def _take(self, shape: tuple[int, ...], dtype: np.dtype, nbytes: int) -> np.ndarray | None:
        with self._lock:
            slabs = self._slabs.get(nbytes)
            if slabs is not None:
                for i in range(len(slabs)):
                    if _refs(slabs, i) == _FREE:
                        slab = slabs.pop(i)
                        slabs.append(slab)  # most recently handed out last
                        self._slabs.move_to_end(nbytes)
                        return np.ndarray(shape, dtype, buffer=slab)
            if self._bytes + nbytes > LIMIT_BYTES and not self._evict(self._bytes + nbytes - LIMIT_BYTES):
                return None
            slab = _Slab((nbytes,), np.uint8)
            self._slabs.setdefault(nbytes, []).append(slab)
            self._slabs.move_to_end(nbytes)
            self._bytes += nbytes
            return np.ndarray(shape, dtype, buffer=slab)

    def _evict(self, wanted: int) -> bool:
        """Drop free slabs, sizes least recently used first, until ``wanted`` bytes are gone."""
        for nbytes in list(self._slabs):
            slabs = self._slabs[nbytes]
            i = 0
            while i < len(slabs):
                if _refs(slabs, i) == _FREE:
                    del slabs[i]
                    self._bytes -= nbytes
                    wanted -= nbytes
                    if wanted <= 0:
                        break
                else:
                    i += 1
            if not slabs:
                del self._slabs[nbytes]
            if wanted <= 0:
                return True
        return False

    def empty(self) -> int:
        """Hand every free slab back to the C heap; returns the bytes freed."""
        with self._lock:
            before = self._bytes
            self._evict(self._bytes + 1)
            return before - self._bytes

    def cached_bytes(self) -> tuple[int, int]:
        """(bytes the slabs hold, bytes of those no array uses)."""
        with self._lock:
            free = 0
            for nbytes, slabs in self._slabs.items():
                free += nbytes * sum(1 for i in range(len(slabs)) if _refs(slabs, i) == _FREE)
            return self._bytes, free


CACHE = BufferCache()


def owns_slab(base: Any) -> bool:
    """Whether ``base`` (a view's ``.base``) is a slab that only that view and the cache hold."""
    return base.__class__ is _Slab and _getrefcount(base) == _OWNED_BY_VIEW


def empty_cache() -> int:
    """Free every cached cpu product buffer that no tensor uses (Note [Recycled product buffers]
    in devices/buffers.py); returns the number of bytes handed back. Buffers in use stay."""
    return CACHE.empty()
