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
