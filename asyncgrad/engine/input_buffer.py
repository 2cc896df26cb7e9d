"""Input buffers: where a node's incoming gradients gather, by input_nr, until it is ready.

A buffer is a plain list (one slot per input of the node) so the per-node path allocates
as little as possible; these functions are its operations.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from asyncgrad.devices.ownership import owned_by

if TYPE_CHECKING:
    from asyncgrad.devices import Device
    from asyncgrad.graph.node import Node

def new_buffer(node: Node, position: int, grad: Any) -> list:
    size = len(node._input_meta)
    if size == 1:  # as ``route`` builds it itself (Note [One-input buffers inlined] in engine.py)
        return [grad]
    buffer = [None] * size
    buffer[position] = grad
    return buffer


def accumulate(buffer: list, position: int, grad: Any) -> None:
    """Add ``grad`` into slot ``position``.

    In place when nothing else can see the old array (``owned_by``); otherwise out of
    place, which is also the recorded path for Tensors.
    """
    if grad is None:
        return
    if buffer[position] is None:
        buffer[position] = grad
    elif owned_by(buffer, position) and buffer[position].dtype == grad.dtype and buffer[position].shape == grad.shape:
        buffer[position] += grad
    else:
        buffer[position] = buffer[position] + grad


def buffer_device(node: Node, cpu: Device) -> Device:
    """Which device's queue runs ``node``: the first non-CPU device among its inputs."""
    metas = node._input_meta
    if len(metas) == 1:
        return metas[0][2]
    for meta in metas:
        if not meta[2].is_cpu:
            return meta[2]
    return cpu
