"""A list index that torch reads as a tuple (Note [Sequence index as tuple] in ops/indexing.py).

torch's treatSequenceAsTuple: a list shorter than 32 that holds a slice, Ellipsis, None, a tensor or
a sequence indexes as the tuple of its items (with torch's deprecation warning); any other list is
one index array. Values and gradients against finite differences and torch, on cpu and sim:0.
"""

import warnings

import numpy as np
import pytest
from helpers import check_op, has_torch

import asyncgrad as ag

pytestmark = pytest.mark.parametrize("op_device", ["cpu", "sim:0"], indirect=True)

# (shape, list index, the tuple index it means)
CASES = [
    ((5, 5, 5), [slice(None), slice(None), [1, 3]], (slice(None), slice(None), [1, 3])),
    ((5, 5, 5), [[1, 3], [2, 4], slice(None)], ([1, 3], [2, 4], slice(None))),
    ((5, 5), [[0, 4], [2, 2]], ([0, 4], [2, 2])),
    ((10,), [[0, 4, 2]], ([0, 4, 2],)),
    ((4, 3), [None, 1], (None, 1)),
    ((4, 3), [Ellipsis, 2], (Ellipsis, 2)),
]


@pytest.mark.parametrize("shape,index,as_tuple", CASES)
async def test_getitem_reads_the_list_as_a_tuple(op_device, shape, index, as_tuple):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # torch's deprecation warning, asserted below
        out, _ = await check_op(lambda x: x[index], shape)
    x = ag.arange(float(np.prod(shape)), device=op_device).reshape(*shape)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        assert x[index].tolist() == x[as_tuple].tolist()
    assert tuple(out.shape) == tuple(x[as_tuple].shape)


@pytest.mark.parametrize("shape,index,as_tuple", CASES)
async def test_setitem_reads_the_list_as_a_tuple(op_device, shape, index, as_tuple):
    a = ag.zeros(*shape, device=op_device)
    b = ag.zeros(*shape, device=op_device)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        a[index] = 2.0
    b[as_tuple] = 2.0
    assert a.tolist() == b.tolist()
    if has_torch():
        import torch

        t = torch.zeros(*shape, dtype=torch.float64)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            t[index] = 2.0
        assert t.tolist() == a.tolist()


def test_the_deprecation_warning_is_torchs(op_device):
    x = ag.zeros(5, 5, device=op_device)
    with pytest.warns(UserWarning, match=r"Using a non-tuple sequence for multidimensional indexing is deprecated"):
        x[[slice(None), [1, 3]]]
    with pytest.warns(UserWarning, match=r"use x\[tuple\(seq\)\] instead of x\[seq\]"):
        x[[slice(None), [1, 3]]] = 1.0


def test_a_list_of_numbers_stays_one_index_array(op_device):
    """No slice, None, Ellipsis, tensor or sequence inside: an index array, and no warning; nor is
    a list of 32 or more items read as a tuple (torch's bound)."""
    x = ag.arange(10.0, device=op_device)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert x[[0, 4, 2]].tolist() == [0.0, 4.0, 2.0]
        y = ag.arange(40.0, device=op_device).reshape(40, 1)
        assert tuple(y[[[i] for i in range(32)]].shape) == (32, 1, 1)
