"""Tensor factories, in torch's argument order."""

from __future__ import annotations

from typing import Any

import numpy as np

from asyncgrad import _validate, dtypes
from asyncgrad.devices import Device
from asyncgrad.devices import device as as_device
from asyncgrad.tensor import Tensor

_rng = [np.random.default_rng()]


def manual_seed(seed: int) -> None:
    _rng[0] = np.random.default_rng(int(seed))


def to_array(data: Any, dtype: Any, dev: Device, fn: str = "tensor") -> Any:
    """A fresh array on ``dev``: python values take the default float dtype, arrays (and numpy
    scalars, ``np.float64(1.0)``) keep theirs.

    Python data is read by numpy with no dtype first and cast afterwards, so that a value
    numpy cannot read as a number (None, a string, a ragged list) is an error, never a NaN
    that ``np.array([1, None], dtype=float)`` would make of it.
    """
    dtype = _validate.dtype_arg(dtype, fn)
    if isinstance(data, Tensor):
        data = data.device.to_host(data.data)
    if isinstance(data, (np.ndarray, np.generic)) or hasattr(data, "__cuda_array_interface__"):
        _validate.check_array_dtype(data)
        return dev.asarray(data, dtype=dtype, copy=True)
    try:
        host = np.array(data)
    except (ValueError, TypeError, OverflowError):
        raise _describe(data) from None
    if host.dtype.kind not in "biuf":
        raise _describe(data)
    if dtype is not None:
        host = host.astype(dtype, copy=False)
    elif host.dtype.kind == "f" and not (host.dtype == np.float64 and _has_numpy_double(data)):
        host = host.astype(dtypes.get_default_dtype(), copy=False)
    elif host.dtype.kind in "iu":
        host = host.astype(dtypes.int64, copy=False)
    return host if dev.type != "cuda" else dev.asarray(host)


_LEAVES = (bool, int, float, np.number, np.bool_)


def _has_numpy_double(data: Any) -> bool:
    """Whether a nest holds a float64 numpy scalar: torch infers float64 from it, as numpy does,
    where Python floats alone give the default dtype."""
    if isinstance(data, np.float64):
        return True
    if isinstance(data, (list, tuple)):
        return any(_has_numpy_double(item) for item in data)
    return False


def _describe(data: Any) -> Exception:
    """torch's error for Python data that is not a (rectangular) nest of numbers."""
    if isinstance(data, (str, bytes)):
        return TypeError(f"new(): invalid data type '{type(data).__name__}'")
    problem = _walk(data, 0, [], [])
    if problem is not None:
        return problem
    return ValueError("Overflow when unpacking long long")


def _walk(value: Any, depth: int, shape: list, leaf_depth: list) -> Exception | None:
    """The first problem in a nest of sequences: a non-number, a complex, a ragged nest."""
    if isinstance(value, (complex, np.complexfloating)):
        return _validate.complex_error(getattr(value, "dtype", "complex128"))
    if isinstance(value, _LEAVES) or isinstance(value, (Tensor, np.ndarray)):
        if depth < len(shape):
            return TypeError("not a sequence")
        if not leaf_depth:
            leaf_depth.append(depth)
        return None
    if isinstance(value, (str, bytes)):
        return TypeError(f"new(): invalid data type '{type(value).__name__}'")
    if not isinstance(value, (list, tuple)):
        return RuntimeError(f"Could not infer dtype of {_validate.type_label(value)}")
    if leaf_depth and depth >= leaf_depth[0]:
        return TypeError(f"must be real number, not {_validate.type_label(value)}")
    if depth == len(shape):
        shape.append(len(value))
    elif len(value) != shape[depth]:
        return ValueError(f"expected sequence of length {shape[depth]} at dim {depth} (got {len(value)})")
    for item in value:
        problem = _walk(item, depth + 1, shape, leaf_depth)
        if problem is not None:
            return problem
    return None


def _leaf(array: Any, dev: Device, requires_grad: Any, fn: str) -> Tensor:
    """The new leaf; ``requires_grad=None`` passes as False, as torch's factories (not ``tensor``) take it."""
    t = Tensor._make(array, dev, False, None, 0, [0])
    if requires_grad is not False and requires_grad is not None:
        if not _validate.bool_arg(requires_grad, fn, "requires_grad"):
            return t
        if array.dtype.kind != "f":
            # torch words the factories' refusal apart from requires_grad_()'s
            raise RuntimeError("Only Tensors of floating point and complex dtype can require gradients")
        t.requires_grad_(True)
    return t


def tensor(data: Any, dtype=None, device: str | Device | None = None, requires_grad: bool = False) -> Tensor:
    """A new leaf; the data is always copied."""
    if requires_grad is None:
        raise TypeError("tensor(): argument 'requires_grad' must be bool, not NoneType")
    dev = as_device(device)
    return _leaf(to_array(data, dtype, dev), dev, requires_grad, "tensor")


def from_numpy(array: np.ndarray) -> Tensor:
    """A leaf sharing memory with ``array``."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(array).__name__})")
    _validate.check_array_dtype(array)
    return Tensor._make(array, as_device("cpu"), False, None, 0, [0])


def _filled(fill: str, size: tuple, dtype, device, requires_grad: bool, value: Any = None,
            fn: str | None = None) -> Tensor:
    fn = fn or fill
    shape = _validate.new_shape(size, fn)
    dtype = _validate.dtype_arg(dtype, fn) or dtypes.get_default_dtype()
    dev = as_device(device)
    xp = dev.xp
    if fill == "full":
        array = xp.full(shape, value, dtype=dtype)
    else:
        array = getattr(xp, fill)(shape, dtype=dtype)
    return _leaf(array, dev, requires_grad, fn)


def zeros(*size, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    return _filled("zeros", size, dtype, device, requires_grad)


def ones(*size, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    return _filled("ones", size, dtype, device, requires_grad)


def empty(*size, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    return _filled("empty", size, dtype, device, requires_grad)


def _fill_dtype(fill_value: Any) -> np.dtype:
    """torch's dtype for a fill value: bool, int64 for integers, else the default float."""
    if isinstance(fill_value, (bool, np.bool_)):
        return dtypes.bool
    if isinstance(fill_value, (int, np.integer)):
        return dtypes.int64
    return dtypes.get_default_dtype()


def full(size, fill_value, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A plain int ``size`` is taken as ``(size,)`` (torch insists on a tuple)."""
    _validate.number_arg(fill_value, "full", "fill_value", 2)
    if dtype is None:
        dtype = _fill_dtype(fill_value)
    return _filled("full", (size,), dtype, device, requires_grad, fill_value)


def eye(n: int, m: int | None = None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    n = _validate.int_arg(n, "eye", "n", 1)
    if n < 0:
        raise RuntimeError(f"n must be greater or equal to 0, got {n}")
    if m is not None:
        m = _validate.int_arg(m, "eye", "m", 2)
        if m < 0:
            raise RuntimeError(f"m must be greater or equal to 0, got {m}")
    dtype = _validate.dtype_arg(dtype, "eye") or dtypes.get_default_dtype()
    dev = as_device(device)
    return _leaf(dev.xp.eye(n, m, dtype=dtype), dev, requires_grad, "eye")


def arange(start, end=None, step=1, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    if end is None:
        start, end = 0, start
        _validate.number_arg(end, "arange", "end", 1)
    else:
        _validate.number_arg(start, "arange", "start", 1)
        _validate.number_arg(end, "arange", "end", 2)
    _validate.number_arg(step, "arange", "step", 3)
    if not (np.isfinite(start) and np.isfinite(end)):
        raise RuntimeError(f"unsupported range: {start} -> {end}")
    if step == 0:
        raise RuntimeError("step must be nonzero")
    if (end - start) * step < 0:
        raise RuntimeError("upper bound and lower bound inconsistent with step sign")
    if dtype is None:
        is_float = any(isinstance(v, (float, np.floating)) for v in (start, end, step))
        dtype = dtypes.get_default_dtype() if is_float else dtypes.int64
    dtype = _validate.dtype_arg(dtype, "arange")
    dev = as_device(device)
    return _leaf(dev.xp.arange(start, end, step, dtype=dtype), dev, requires_grad, "arange")


def linspace(start, end, steps: int, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    _validate.number_arg(start, "linspace", "start", 1)
    _validate.number_arg(end, "linspace", "end", 2)
    steps = _validate.int_arg(steps, "linspace", "steps", 3)
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    dtype = _validate.dtype_arg(dtype, "linspace") or dtypes.get_default_dtype()
    dev = as_device(device)
    return _leaf(dev.xp.linspace(start, end, steps, dtype=dtype), dev, requires_grad, "linspace")


def _random(kind: str, size: tuple, dtype, device, requires_grad: bool, fn: str | None = None) -> Tensor:
    fn = fn or kind
    shape = _validate.new_shape(size, fn)
    dtype = _validate.dtype_arg(dtype, fn) or dtypes.get_default_dtype()
    dev = as_device(device)
    if requires_grad is not False and requires_grad is not None:
        _validate.bool_arg(requires_grad, fn, "requires_grad")
    host = _rng[0].standard_normal(shape) if kind == "randn" else _rng[0].random(shape)
    return _leaf(dev.asarray(host, dtype=dtype), dev, requires_grad, fn)


def randn(*size, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    return _random("randn", size, dtype, device, requires_grad)


def rand(*size, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    return _random("rand", size, dtype, device, requires_grad)


def randint(low: int, high: int | None = None, size: tuple = (), dtype=None, device=None) -> Tensor:
    """``randint(high, size)`` or ``randint(low, high, size)``; a plain int ``size`` is taken as
    ``(size,)`` (torch insists on a tuple)."""
    if isinstance(high, (tuple, list)) and size == ():
        high, size = None, high
    if high is None:
        low, high = 0, _validate.int_arg(low, "randint", "high", 1)
    else:
        low, high = _validate.int_arg(low, "randint", "low", 1), _validate.int_arg(high, "randint", "high", 2)
    shape = _validate.new_shape((size,), "randint")
    if low >= high:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={low} >= to={high}")
    dtype = _validate.dtype_arg(dtype, "randint") or dtypes.int64
    dev = as_device(device)
    host = _rng[0].integers(low, high, size=shape)
    return _leaf(dev.asarray(host, dtype=dtype), dev, False, "randint")


def _like(t: Tensor, dtype, device, fn: str) -> tuple:
    _validate.tensor_arg(t, fn)
    dtype = _validate.dtype_arg(dtype, fn)
    return t.shape, dtype if dtype is not None else t.dtype, device if device is not None else t.device


def zeros_like(t: Tensor, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    shape, dtype, device = _like(t, dtype, device, "zeros_like")
    return _filled("zeros", shape, dtype, device, requires_grad, fn="zeros_like")


def ones_like(t: Tensor, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    shape, dtype, device = _like(t, dtype, device, "ones_like")
    return _filled("ones", shape, dtype, device, requires_grad, fn="ones_like")


def full_like(t: Tensor, fill_value, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    shape, dtype, device = _like(t, dtype, device, "full_like")
    _validate.number_arg(fill_value, "full_like", "fill_value", 2)
    return _filled("full", shape, dtype, device, requires_grad, fill_value, fn="full_like")


def empty_like(t: Tensor, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    shape, dtype, device = _like(t, dtype, device, "empty_like")
    return _filled("empty", shape, dtype, device, requires_grad, fn="empty_like")


def randn_like(t: Tensor, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    shape, dtype, device = _like(t, dtype, device, "randn_like")
    return _random("randn", shape, dtype, device, requires_grad, "randn_like")


def rand_like(t: Tensor, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    shape, dtype, device = _like(t, dtype, device, "rand_like")
    return _random("rand", shape, dtype, device, requires_grad, "rand_like")
