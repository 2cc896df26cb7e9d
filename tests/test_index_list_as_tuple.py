"""A list index that holds a slice, a sequence, a tensor, an Ellipsis or None is read as a tuple
of indices, as torch 2.13 still reads it, with its deprecation warning (Note [A list index read
as a tuple] in ops/indexing.py); a list of numbers stays one index. Values and gradients against
finite differences and torch, on ``cpu`` and ``sim:0``; the setitem path too."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import check_op

import asyncgrad as ag

pytestmark = [pytest.mark.parametrize("op_device", ["cpu", "sim:0"], indirect=True),
              pytest.mark.filterwarnings("ignore:Using a non-tuple sequence:UserWarning")]

READ_AS_TUPLE = [
    [slice(None), [2, 3]],
    [[2, 3], slice(None)],
    [[1, 2], [2, 1]],
    [[[1, 2], [3, 0]], [[0, 1], [2, 3]]],
    [Ellipsis, [0, 2]],
    [None, 1],
]


@pytest.mark.parametrize("index", READ_AS_TUPLE, ids=str)
async def test_list_read_as_tuple_against_torch(index):
    out, _ = await check_op(lambda x: x[index], (4, 4), torch_name=False, name=None)
    with ag.no_grad():
        assert out.shape == ag.randn(4, 4)[tuple(index)].shape


def test_the_deprecation_warning_and_a_plain_list(op_device):
    x = ag.arange(16.0, device=op_device).view(4, 4)
    with pytest.warns(UserWarning, match=r"Using a non-tuple sequence for multidimensional indexing is deprecated"):
        rows = x[[slice(None), [2, 3]]]
    assert rows.tolist() == [[2.0, 3.0], [6.0, 7.0], [10.0, 11.0], [14.0, 15.0]]
    assert x[[0, 2]].tolist() == [[0.0, 1.0, 2.0, 3.0], [8.0, 9.0, 10.0, 11.0]]  # numbers only: one index


async def test_setitem_reads_the_list_as_a_tuple(op_device):
    x = ag.ones(3, 4, device=op_device, requires_grad=True)
    y = x * 2
    with pytest.warns(UserWarning, match="Using a non-tuple sequence"):
        y[[slice(None), [1, 3]]] = 0
    await y.sum().backward()
    expected = np.full((3, 4), 2.0)
    expected[:, [1, 3]] = 0
    assert x.grad.tolist() == expected.tolist()
