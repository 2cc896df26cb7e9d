"""Dtypes are numpy dtypes; this module holds the names and the default float dtype."""

from __future__ import annotations

import numpy as np

float16 = half = np.dtype(np.float16)
float32 = float = np.dtype(np.float32)
float64 = double = np.dtype(np.float64)
int8 = np.dtype(np.int8)
int16 = short = np.dtype(np.int16)
int32 = int = np.dtype(np.int32)
int64 = long = np.dtype(np.int64)
uint8 = np.dtype(np.uint8)
bool = np.dtype(np.bool_)

_default_float = [float32]

NUMPY_DTYPE_CLASSES = frozenset(type(np.dtype(code)) for code in "?bhilqpBHILQPefdgFDGSUVOMm")
"""The classes of numpy's built-in dtypes. Note [Is it a numpy dtype]: ``dtype.__class__ in
NUMPY_DTYPE_CLASSES`` answers "is this array's dtype numpy's?" (cpu, cuda) on the hot path for
about 100 instructions, where ``isinstance(dtype, np.dtype)`` costs about 1,400 (numpy's dtype
classes have a metaclass, so ``isinstance`` takes the slow ``__instancecheck__`` path; cachegrind,
Python 3.11, numpy 2.4). Other dtypes (a strict array's, a user-defined numpy dtype) then ask
``isinstance``."""


def get_default_dtype() -> np.dtype:
    return _default_float[0]


def set_default_dtype(dtype) -> None:
    """As torch: only float32 and float64 may be the default."""
    dtype = np.dtype(dtype)
    if dtype not in (float32, float64):
        raise TypeError(f"only floating-point types are supported as the default type, got {dtype}")
    _default_float[0] = dtype


def is_floating_point(dtype: np.dtype) -> bool:
    return dtype.kind in "fc"


def to_dtype(dtype) -> np.dtype | None:
    return None if dtype is None else np.dtype(dtype)
