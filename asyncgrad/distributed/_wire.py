"""What crosses the boundary between the caller and a worker: tensors as host numpy arrays.

Note [The wire]: every argument and result of a remote call is *packed* before it leaves its
side: a Tensor becomes a ``WireTensor`` holding a numpy array (a copy for the local backend,
which pickles the whole payload; Ray's object store for the Ray backend), its requires_grad
flag and its device's name; tuples, lists and dicts are packed element by element; anything
else travels as it is (so it must pickle). Nothing is shared across the boundary: the local
backend round-trips every payload through ``pickle``, so a test on the local backend fails
wherever Ray would (an unpicklable argument, an array written by both sides). Unpacking gives
fresh leaf Tensors on the receiving side; arrays that arrive read-only (Ray maps large ones
from its object store) are copied before a Tensor wraps them, as ops write into their inputs
in place only through in-place ops, but optimizers do.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from asyncgrad.devices import device as as_device
from asyncgrad.tensor import Tensor


class WireTensor:
    """A tensor in transit: a host array, whether it requires grad, and its device's name."""

    __slots__ = ("array", "requires_grad", "device")

    def __init__(self, array: np.ndarray, requires_grad: bool, device: str) -> None:
        self.array = array
        self.requires_grad = requires_grad
        self.device = device

    def __reduce__(self) -> tuple:
        return (WireTensor, (self.array, self.requires_grad, self.device))


def host_array(t: Tensor) -> np.ndarray:
    """``t``'s values as a numpy array (through ``.cpu()`` for an accelerator tensor)."""
    if t.device.type != "cpu":
        t = t.detach().cpu()
    return np.asarray(t.data)


def pack(value: Any, on_tensor: Callable[[Tensor], WireTensor] | None = None) -> Any:
    """Replace every Tensor in ``value`` (through tuples, lists and dicts) by a WireTensor."""
    if isinstance(value, Tensor):
        if on_tensor is not None:
            return on_tensor(value)
        return WireTensor(host_array(value), value.requires_grad, str(value.device))
    if isinstance(value, tuple):
        return tuple(pack(v, on_tensor) for v in value)
    if isinstance(value, list):
        return [pack(v, on_tensor) for v in value]
    if isinstance(value, dict):
        return {k: pack(v, on_tensor) for k, v in value.items()}
    return value


def to_tensor(w: WireTensor, requires_grad: bool = False) -> Tensor:
    """A fresh leaf on this side (its device when that is not the cpu)."""
    array = w.array
    if not array.flags.writeable:
        array = array.copy()
    t = Tensor._make(array, as_device("cpu"), False, None, 0, [0])
    if w.device != "cpu":
        t = t.to(as_device(w.device))
    if requires_grad:
        t.requires_grad_(True)
    return t


def unpack(value: Any, on_wire: Callable[[WireTensor], Any] | None = None) -> Any:
    """The inverse of ``pack``: WireTensors become leaves (or whatever ``on_wire`` makes of them)."""
    if isinstance(value, WireTensor):
        return on_wire(value) if on_wire is not None else to_tensor(value)
    if isinstance(value, tuple):
        return tuple(unpack(v, on_wire) for v in value)
    if isinstance(value, list):
        return [unpack(v, on_wire) for v in value]
    if isinstance(value, dict):
        return {k: unpack(v, on_wire) for k, v in value.items()}
    return value
