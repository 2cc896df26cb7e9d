"""Input buffers: where a node's incoming gradients gather, by input_nr, until it is ready.

A buffer is a plain list (one slot per input of the node) so the per-node path allocates
as little as possible; these functions are its operations.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from asyncgrad.autograd.graph import Node
    from asyncgrad.devices import Device

_getrefcount = sys.getrefcount
_ndarray = np.ndarray


def new_buffer(node: Node, position: int, grad: Any) -> list:
    size = len(node._input_meta)
    if size == 1:
        return [grad]
    buffer = [None] * size
    buffer[position] = grad
    return buffer


def accumulate(buffer: list, position: int, grad: Any) -> None:
    """Add ``grad`` into slot ``position``.

    In place when nothing else can see the old array: a numpy array that owns its memory,
    is writeable and is referenced only by this buffer (torch steals the same way when the
    use count is 1); otherwise out of place, which is also the recorded path for Tensors.
    """
    if grad is None:
        return
    old = buffer[position]
    if old is None:
        buffer[position] = grad
    elif (type(old) is _ndarray and old.base is None and _getrefcount(old) <= 3 and old.flags.writeable
          and old.dtype == grad.dtype and old.shape == grad.shape):
        old += grad
    else:
        buffer[position] = old + grad


def buffer_device(node: Node, cpu: Device) -> Device:
    """Which device's queue runs ``node``: the first non-CPU device among its inputs."""
    metas = node._input_meta
    if len(metas) == 1:
        return metas[0][2]
    for meta in metas:
        if not meta[2].is_cpu:
            return meta[2]
    return cpu
