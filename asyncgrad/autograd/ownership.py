"""Ownership of gradient arrays: when one may be written into or handed on without a copy."""

from __future__ import annotations

import sys

import numpy as np

_getrefcount = sys.getrefcount
_ndarray = np.ndarray


def owned_by(container: list, position: int) -> bool:
    """Whether the array at ``container[position]`` is seen by nothing but that slot.

    Such an array may be added into in place or handed on without a copy (torch steals a
    gradient the same way when its use count is 1). The array must own its memory, be
    writeable, and have no other reference: the count is compared with the one measured,
    at import, for an array that only a list holds, so interpreter versions that count
    references differently keep this exact.
    """
    array = container[position]
    return (type(array) is _ndarray and array.base is None and array.flags.writeable
            and _getrefcount(array) <= _UNSHARED)


def _unshared_count(container: list, position: int) -> int:
    array = container[position]
    return _getrefcount(array)


_UNSHARED = _unshared_count([np.empty(1)], 0)
