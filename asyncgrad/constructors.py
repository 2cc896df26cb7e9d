"""``Tensor.new_*`` (a new tensor taking its dtype and device from ``self``),
``as_tensor`` (sharing memory where it can) and ``is_tensor``, as torch's."""

from __future__ import annotations

from typing import Any

import numpy as np

from asyncgrad import _validate, factories
from asyncgrad.devices import Device
from asyncgrad.devices import device as as_device
from asyncgrad.ops import shape as shape_ops
from asyncgrad.tensor import Tensor


def is_floating_point(input: Any) -> bool:
    """torch's ``is_floating_point(input)``: whether a tensor's dtype is a floating-point one."""
    return _validate.tensor_arg(input, "is_floating_point").dtype.is_floating_point


def is_complex(input: Any) -> bool:
    """torch's ``is_complex(input)``: always False for a tensor (asyncgrad holds no complex data)."""
    return _validate.tensor_arg(input, "is_complex").dtype.is_complex


def _defaults(self: Tensor, dtype: Any, device: Any) -> tuple[Any, Device]:
    return (self.dtype if dtype is None else dtype), (self.device if device is None else as_device(device))


def new_zeros(self: Tensor, *size: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """Zeros of ``size``, of ``self``'s dtype and device unless given."""
    dtype, dev = _defaults(self, dtype, device)
    return factories.zeros(*size, dtype=dtype, device=dev, requires_grad=requires_grad)


def new_ones(self: Tensor, *size: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    dtype, dev = _defaults(self, dtype, device)
    return factories.ones(*size, dtype=dtype, device=dev, requires_grad=requires_grad)


def new_empty(self: Tensor, *size: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    dtype, dev = _defaults(self, dtype, device)
    return factories.empty(*size, dtype=dtype, device=dev, requires_grad=requires_grad)


def new_full(self: Tensor, size: Any, fill_value: Any, *, dtype: Any = None, device: Any = None,
             requires_grad: bool = False) -> Tensor:
    """``fill_value`` in ``self``'s dtype (not the value's own, as ``ag.full`` would pick)."""
    dtype, dev = _defaults(self, dtype, device)
    return factories.full(size, fill_value, dtype=dtype, device=dev, requires_grad=requires_grad)


def new_tensor(self: Tensor, data: Any, *, dtype: Any = None, device: Any = None,
               requires_grad: bool = False) -> Tensor:
    """A copy of ``data`` (never sharing memory, a leaf), in ``self``'s dtype and device unless given."""
    dtype, dev = _defaults(self, dtype, device)
    if isinstance(data, Tensor):
        data = data.detach()
    return factories.tensor(data, dtype=dtype, device=dev, requires_grad=requires_grad)


def as_tensor(data: Any, dtype: Any = None, device: Any = None) -> Tensor:
    """torch's ``as_tensor``: ``data`` itself when it is a tensor of that dtype and device (else a
    converted copy, recorded: its gradient flows back to ``data``), a numpy array of a supported
    dtype read on the cpu without a copy (the tensor shares its memory, as ``from_numpy``), and
    anything else copied as ``ag.tensor`` copies it."""
    want = _validate.dtype_arg(dtype, "as_tensor")
    if isinstance(data, Tensor):
        out = data
        if device is not None and as_device(device) is not data.device:
            out = shape_ops.to_device(out, as_device(device))
        if want is not None and want != out.dtype:
            out = shape_ops.to_dtype(out, want)
        return out
    dev = as_device(device)
    if isinstance(data, np.ndarray) and dev.is_cpu and (want is None or want == data.dtype) and (
            data.dtype.kind in "biuf" and data.dtype.itemsize <= 8):
        return factories.from_numpy(data)
    return factories.tensor(data, dtype=want, device=dev)


def is_tensor(obj: Any) -> bool:
    """torch's ``is_tensor``: whether ``obj`` is a Tensor."""
    return isinstance(obj, Tensor)

