"""``Tensor.new`` given a Size makes a tensor of that size (torch's test_setitem builds its values
with ``x.new(x[index].size())``), never a one-element tensor holding the size's numbers."""

from __future__ import annotations

import pytest

import asyncgrad as ag


@pytest.mark.parametrize("size", [[2, 3], [], [0, 4], [5]])
def test_new_of_a_size_has_that_size(torch, size):
    x = ag.randn(2, dtype=ag.float64)
    expected = torch.randn(2, dtype=torch.float64).new(torch.Size(size))
    got = x.new(ag.Size(size))
    assert tuple(got.shape) == tuple(expected.shape) == tuple(size)
    assert got.dtype == x.dtype and got.device == x.device and not got.requires_grad


def test_new_of_a_list_is_still_data():
    x = ag.randn(2, dtype=ag.float64)
    assert x.new([2, 3]).tolist() == [2.0, 3.0]
    assert tuple(x.new(2, 3).shape) == (2, 3)


async def test_setitem_value_of_an_indexed_size(torch):
    """torch's test_setitem: the assigned value's gradient is the indexed part of the output's."""
    x = ag.randn(5, 5, dtype=ag.float64, requires_grad=True)
    y = x.clone()
    value = x.new(x[1].size()).fill_(1.0).requires_grad_(True)
    y[1] = value
    await y.backward(ag.ones(5, 5, dtype=ag.float64))
    assert tuple(value.grad.shape) == (5,)
    assert value.grad.tolist() == [1.0] * 5
