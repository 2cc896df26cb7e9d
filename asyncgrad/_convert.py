"""Python data, numpy arrays and tensors to a fresh array on a device, with torch's errors.

Below ``tensor.py`` (whose constructor reads data through it) and ``factories.py``: it knows a
tensor only through ``_validate.is_tensor``, so the Tensor class never imports upwards.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from asyncgrad import _validate, dtypes
from asyncgrad.devices import Device, device


def to_array(data: Any, dtype: Any, dev: Device, fn: str = "tensor") -> Any:
    """A fresh array on ``dev``: python values take the default float dtype, arrays (and numpy
    scalars, ``np.float64(1.0)``) keep theirs.

    Python data is read by numpy with no dtype first and cast afterwards, so that a value
    numpy cannot read as a number (None, a string, a ragged list) is an error, never a NaN
    that ``np.array([1, None], dtype=float)`` would make of it.
    """
    dtype = _validate.dtype_arg(dtype, fn)
    if _validate.is_tensor(data):
        data = data.device.to_host(data.data)
    elif (not isinstance(data, np.ndarray) and hasattr(data, "__array_namespace__")
          and not hasattr(data, "__cuda_array_interface__")):
        data = _HOST.asarray(data)  # another Array API library's array (array_api_strict's): copied to the host
    if isinstance(data, (np.ndarray, np.generic)) or hasattr(data, "__cuda_array_interface__"):
        _validate.check_array_dtype(data)
        return dev.asarray(data, dtype=dtype, copy=True)
    try:
        host = np.array(data)
    except (ValueError, TypeError, OverflowError):
        host = _with_device_tensors(data)
        if host is None:
            raise _describe(data) from None
    if host.dtype.kind not in "biuf":
        raise _describe(data)
    if dtype is not None:
        host = host.astype(dtype, copy=False)
    elif host.dtype.kind == "f" and not (host.dtype == np.float64 and _has_numpy_double(data)):
        host = host.astype(dtypes.get_default_dtype(), copy=False)
    elif host.dtype.kind in "iu":
        host = host.astype(dtypes.int64, copy=False)
    return host if dev.is_cpu else dev.asarray(host)


_HOST = device("cpu")


def _with_device_tensors(data: Any) -> np.ndarray | None:
    """A nest holding tensors of an accelerator, read with their values copied to the host, as
    torch reads them (numpy reads a cpu tensor itself; an accelerator's refuses it); None when
    the nest holds none, or still is no array of numbers."""
    found: list[bool] = []
    hosted = _host_leaves(data, found)
    if not found:
        return None
    try:
        return np.array(hosted)
    except (ValueError, TypeError, OverflowError):
        return None


def _host_leaves(data: Any, found: list[bool]) -> Any:
    if _validate.is_tensor(data) and not data.device.is_cpu:
        found.append(True)
        return data.device.to_host(data.data)
    if isinstance(data, (list, tuple)):
        return [_host_leaves(item, found) for item in data]
    return data


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
    if isinstance(value, _LEAVES) or _validate.is_tensor(value) or isinstance(value, np.ndarray):
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
