"""Ownership of gradient arrays: when one may be written into or handed on without a copy."""

from __future__ import annotations

import sys

import numpy as np

from asyncgrad.devices.backend import NUMPY, backend_of
from asyncgrad.devices.buffers import owns_slab

_getrefcount = sys.getrefcount
_ndarray = np.ndarray


def owned_by(container: list, position: int) -> bool:
    """Whether the array at ``container[position]`` is seen by nothing but that slot.

    Such an array may be added into in place or handed on without a copy (torch steals a
    gradient the same way when its use count is 1). The array object must have no other
    reference: the count is compared with the one measured, at import, for an object that only
    a list holds, so interpreter versions that count references differently keep this exact.
    And its memory must be its own, which only its backend can tell (``owns_memory``: not a
    view, writable; inside a strict array, a numpy array no other wrapper holds); a numpy
    array, the hot case, is asked inline.
    """
    array = container[position]
    if type(array) is _ndarray:
        base = array.base  # Note [Recycled product buffers] in devices/buffers.py: a slab only this array sees
        return (base is None or owns_slab(base)) and array.flags.writeable and _getrefcount(array) <= _UNSHARED
    backend = backend_of(array)  # NUMPY for what is no device array: a Tensor (create_graph), a numpy scalar
    return backend is not NUMPY and _getrefcount(array) <= _UNSHARED and backend.owns_memory(array)


def _unshared_count(container: list, position: int) -> int:
    array = container[position]
    return _getrefcount(array)


_UNSHARED = _unshared_count([object()], 0)
