"""The backend primitive ``relu`` (Note [Maximum against a row of zeros]): bit for bit numpy's
``maximum(x, 0)`` for every float dtype, with and without a remainder past the last whole row,
on non-contiguous and integer arrays, and through ``ag.relu`` on ``cpu`` and ``sim:0``."""

from __future__ import annotations

import numpy as np
import pytest

import asyncgrad as ag
from asyncgrad.devices import backend as backend_module

SPECIALS = [1.5, -0.0, 0.0, np.inf, -np.inf, np.nan, -np.nan, -2.0, 3.0, -1e-30]


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("size", [backend_module._ZERO_ROW * 3, backend_module._ZERO_ROW * 2 + 7, 10])
def test_relu_is_maximum_bit_for_bit(dtype, size):
    rng = np.random.default_rng(size)
    values = rng.standard_normal(size).astype(dtype)
    values[:len(SPECIALS)] = SPECIALS
    values[-len(SPECIALS):] = SPECIALS  # in the remainder too, where there is one
    backend = ag.device("cpu").backend
    for array in (values.reshape(-1, 1) if size % 2 else values.reshape(2, -1), values[::2]):
        out = backend.relu(array)
        expected = np.maximum(array, 0)
        assert out.shape == array.shape and out.dtype == array.dtype
        assert np.array_equal(out.view(f"u{out.itemsize}"), expected.view(f"u{out.itemsize}"))  # bits, NaN and -0.0
        assert not np.shares_memory(out, array)


def test_relu_of_integers_and_zero_rows_unchanged():
    backend = ag.device("cpu").backend
    ints = np.arange(-3000, 3000, dtype=np.int32)
    assert np.array_equal(backend.relu(ints), np.maximum(ints, 0))
    assert not backend_module._zero_row(np.dtype(np.float32)).any()
    with pytest.raises(ValueError):
        backend_module._zero_row(np.dtype(np.float32))[0] = 1.0  # read-only: shared by every call


@pytest.mark.parametrize("op_device", ["cpu", "sim:0"])
def test_relu_through_the_op(op_device):
    host = np.linspace(-5, 5, backend_module._ZERO_ROW * 2 + 3)
    out = ag.relu(ag.tensor(host, device=op_device))
    assert np.array_equal(out.cpu().numpy(), np.maximum(host, 0))
