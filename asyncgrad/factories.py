"""Tensor factories, in torch's argument order."""

from __future__ import annotations

from typing import Any

import numpy as np

from asyncgrad import dtypes
from asyncgrad.devices import Device
from asyncgrad.devices import device as as_device
from asyncgrad.tensor import Tensor

_rng = [np.random.default_rng()]


def manual_seed(seed: int) -> None:
    _rng[0] = np.random.default_rng(seed)


def to_array(data: Any, dtype: Any, dev: Device) -> Any:
    """A fresh array on ``dev``: python values take the default float dtype, arrays (and numpy
    scalars, ``np.float64(1.0)``) keep theirs."""
    dtype = dtypes.to_dtype(dtype)
    if isinstance(data, Tensor):
        data = data.device.to_host(data.data)
    if isinstance(data, (np.ndarray, np.generic)) or hasattr(data, "__cuda_array_interface__"):
        return dev.asarray(data, dtype=dtype, copy=True)
    host = np.array(data, dtype=dtype)
    if dtype is None and host.dtype.kind == "f":
        host = host.astype(dtypes.get_default_dtype())
    elif dtype is None and host.dtype.kind in "iu":
        host = host.astype(dtypes.int64)
    elif host.dtype.kind not in "fiub":
        raise TypeError(f"can't convert {type(data).__name__} of dtype {host.dtype} to a tensor")
    return host if dev.type != "cuda" else dev.asarray(host)


def _shape(size: tuple) -> tuple[int, ...]:
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    return tuple(int(s) for s in size)


def _leaf(array: Any, dev: Device, requires_grad: bool) -> Tensor:
    t = Tensor._make(array, dev, False, None, 0, [0])
    if requires_grad:
        t.requires_grad_(True)
    return t


def tensor(data: Any, dtype=None, device: str | Device | None = None, requires_grad: bool = False) -> Tensor:
    """A new leaf; the data is always copied."""
    dev = as_device(device)
    return _leaf(to_array(data, dtype, dev), dev, requires_grad)


def from_numpy(array: np.ndarray) -> Tensor:
    """A leaf sharing memory with ``array``."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(array).__name__})")
    return Tensor._make(array, as_device("cpu"), False, None, 0, [0])


def _filled(fill: str, size: tuple, dtype, device, requires_grad: bool, value: Any = None) -> Tensor:
    dev = as_device(device)
    dtype = dtypes.to_dtype(dtype) or dtypes.get_default_dtype()
    shape = _shape(size)
    xp = dev.xp
    if fill == "full":
        array = xp.full(shape, value, dtype=dtype)
    else:
        array = getattr(xp, fill)(shape, dtype=dtype)
    return _leaf(array, dev, requires_grad)


def zeros(*size, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    return _filled("zeros", size, dtype, device, requires_grad)


def ones(*size, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    return _filled("ones", size, dtype, device, requires_grad)


def empty(*size, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    return _filled("empty", size, dtype, device, requires_grad)


def full(size, fill_value, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    if dtype is None and not isinstance(fill_value, float):
        dtype = dtypes.bool if isinstance(fill_value, bool) else dtypes.int64
    return _filled("full", (size,), dtype, device, requires_grad, fill_value)


def eye(n: int, m: int | None = None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    dev = as_device(device)
    return _leaf(dev.xp.eye(n, m, dtype=dtypes.to_dtype(dtype) or dtypes.get_default_dtype()), dev, requires_grad)


def arange(start, end=None, step=1, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    if end is None:
        start, end = 0, start
    if dtype is None:
        is_float = any(isinstance(v, float) for v in (start, end, step))
        dtype = dtypes.get_default_dtype() if is_float else dtypes.int64
    dev = as_device(device)
    return _leaf(dev.xp.arange(start, end, step, dtype=dtypes.to_dtype(dtype)), dev, requires_grad)


def linspace(start, end, steps: int, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    dev = as_device(device)
    dtype = dtypes.to_dtype(dtype) or dtypes.get_default_dtype()
    return _leaf(dev.xp.linspace(start, end, steps, dtype=dtype), dev, requires_grad)


def _random(kind: str, size: tuple, dtype, device, requires_grad: bool) -> Tensor:
    dev = as_device(device)
    dtype = dtypes.to_dtype(dtype) or dtypes.get_default_dtype()
    shape = _shape(size)
    host = _rng[0].standard_normal(shape) if kind == "randn" else _rng[0].random(shape)
    return _leaf(dev.asarray(host, dtype=dtype), dev, requires_grad)


def randn(*size, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    return _random("randn", size, dtype, device, requires_grad)


def rand(*size, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    return _random("rand", size, dtype, device, requires_grad)


def randint(low: int, high: int | None = None, size: tuple = (), dtype=None, device=None) -> Tensor:
    if high is None:
        low, high = 0, low
    dev = as_device(device)
    host = _rng[0].integers(low, high, size=_shape((size,)))
    return _leaf(dev.asarray(host, dtype=dtypes.to_dtype(dtype) or dtypes.int64), dev, False)


def _like(t: Tensor, dtype, device) -> tuple:
    return t.shape, dtype or t.dtype, device or t.device


def zeros_like(t: Tensor, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    shape, dtype, device = _like(t, dtype, device)
    return zeros(shape, dtype=dtype, device=device, requires_grad=requires_grad)


def ones_like(t: Tensor, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    shape, dtype, device = _like(t, dtype, device)
    return ones(shape, dtype=dtype, device=device, requires_grad=requires_grad)


def full_like(t: Tensor, fill_value, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    shape, dtype, device = _like(t, dtype, device)
    return full(shape, fill_value, dtype=dtype, device=device, requires_grad=requires_grad)


def empty_like(t: Tensor, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    shape, dtype, device = _like(t, dtype, device)
    return empty(shape, dtype=dtype, device=device, requires_grad=requires_grad)


def randn_like(t: Tensor, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    shape, dtype, device = _like(t, dtype, device)
    return randn(shape, dtype=dtype, device=device, requires_grad=requires_grad)


def rand_like(t: Tensor, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    shape, dtype, device = _like(t, dtype, device)
    return rand(shape, dtype=dtype, device=device, requires_grad=requires_grad)
