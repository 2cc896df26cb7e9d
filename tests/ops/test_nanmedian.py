"""nanmedian against torch (float64): of all elements and along a dim (values, indices, keepdim),
NaNs ignored, gradients (shared evenly among the elements equal to the median without a dim, at
the index with one), integers, 0-d and empty inputs, and torch's error for an empty dim."""

from __future__ import annotations

import numpy as np
import pytest

import asyncgrad as ag

NAN = float("nan")


def _data(seed=0, shape=(4, 5), nan_share=0.3):
    rng = np.random.RandomState(seed)
    x = rng.randint(0, 4, size=shape).astype(np.float64)  # repeated values: ties
    x[rng.rand(*shape) < nan_share] = NAN
    x.reshape(-1)[::7] = 1.0  # no slice is all NaN (torch's index there is unspecified)
    return x


@pytest.mark.parametrize("seed", [0, 1, 2])
async def test_of_all_elements(torch, seed):
    x = _data(seed)
    t = torch.tensor(x, requires_grad=True)
    a = ag.tensor(x, requires_grad=True)
    expected, got = t.nanmedian(), a.nanmedian()
    assert got.grad_fn.name() == expected.grad_fn.name() == "NanmedianBackward0"
    np.testing.assert_array_equal(got.detach().numpy(), expected.detach().numpy())
    expected.backward()
    await got.backward()
    np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy())


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("keepdim", [False, True])
async def test_along_a_dim(torch, dim, keepdim):
    x = _data(3)
    t = torch.tensor(x, requires_grad=True)
    a = ag.tensor(x, requires_grad=True)
    expected, got = t.nanmedian(dim, keepdim=keepdim), a.nanmedian(dim, keepdim=keepdim)
    assert got.values.grad_fn.name() == expected.values.grad_fn.name() == "NanmedianBackward1"
    np.testing.assert_array_equal(got.values.detach().numpy(), expected.values.detach().numpy())
    np.testing.assert_array_equal(got.indices.numpy(), expected.indices.numpy())
    cotangent = np.random.RandomState(9).randn(*expected.values.shape)
    expected.values.backward(torch.tensor(cotangent))
    await got.values.backward(ag.tensor(cotangent))
    np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy())


async def test_gradient_against_finite_differences():
    x = ag.tensor(np.random.RandomState(5).randn(3, 4), requires_grad=True)
    assert await ag.gradcheck(lambda t: t.nanmedian(1).values, (x,))
    assert await ag.gradcheck(lambda t: t.nanmedian(), (x,))


def test_all_nan_slices_give_nan():
    x = ag.tensor([[NAN, NAN], [1.0, NAN]])
    assert np.isnan(ag.nanmedian(ag.tensor([NAN, NAN])).item())
    values = x.nanmedian(1).values.numpy()
    assert np.isnan(values[0]) and values[1] == 1.0


@pytest.mark.parametrize("case", ["int", "0-d", "0-d dim", "empty"])
def test_other_inputs(torch, case):
    calls = {"int": lambda lib: lib.tensor([[3, 1, 2, 5]]).nanmedian(1),
             "0-d": lambda lib: lib.tensor(3.0).nanmedian(),
             "0-d dim": lambda lib: lib.tensor(3.0).nanmedian(0),
             "empty": lambda lib: lib.tensor([]).nanmedian()}
    expected, got = calls[case](torch), calls[case](ag)
    if isinstance(expected, torch.Tensor):
        np.testing.assert_array_equal(got.numpy(), expected.numpy())
    else:
        np.testing.assert_array_equal(got.values.numpy(), expected.values.numpy())
        np.testing.assert_array_equal(got.indices.numpy(), expected.indices.numpy())


def test_empty_dim_is_refused_in_torchs_words(torch):
    with pytest.raises(IndexError) as expected:
        torch.zeros(2, 0).nanmedian(1)
    with pytest.raises(IndexError) as got:
        ag.zeros(2, 0).nanmedian(1)
    assert str(got.value) == str(expected.value)
