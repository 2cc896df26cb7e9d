"""PyTorch's own sample inputs that asyncgrad once got silently wrong, and the forms beside them.

Each case runs on asyncgrad and on torch in float64 and compares the forward values (and shape)
and the gradient of every input for one fixed random cotangent:

* ``cosine_similarity`` of inputs of shapes (1, 2, 3) and (2, 1, 3) along ``dim=-2``: the norms are
  taken after broadcasting, never over a size-1 dim of one input;
* ``pad(x, (-1, 1, -2, 1), mode="circular")``: a negative amount crops first and the other side
  wraps around what is left (and reflect/replicate beside it);
* ``gather`` of a 0-d input with a 1-element index: the result has the index's shape (1,);
* ``index_fill`` along ``dim=-1`` with a repeated index and a 0-d tensor value: the value's
  gradient counts each filled position once.
"""

from __future__ import annotations

import numpy as np
import pytest

import asyncgrad as ag


def _run(fn_ag, fn_torch, arrays, torch, index=None):
    """Forward and gradients of every float input on both libraries, compared."""
    t_in = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in arrays]
    a_in = [ag.tensor(np.asarray(a, dtype=np.float64), requires_grad=True) for a in arrays]
    expected = fn_torch(*t_in)
    actual = fn_ag(*a_in)
    assert tuple(actual.shape) == tuple(expected.shape)
    np.testing.assert_allclose(actual.detach().numpy(), expected.detach().numpy(), rtol=1e-12, atol=1e-12)
    cotangent = np.asarray(np.random.RandomState(7).randn(*expected.shape), dtype=np.float64)
    expected.backward(torch.tensor(cotangent))
    return a_in, t_in, ag.tensor(cotangent), actual


async def _check(fn_ag, fn_torch, arrays, torch):
    a_in, t_in, cotangent, actual = _run(fn_ag, fn_torch, arrays, torch)
    await actual.backward(cotangent)
    for i, (a, t) in enumerate(zip(a_in, t_in)):
        assert a.grad is not None, f"input {i} got no gradient"
        np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), rtol=1e-10, atol=1e-12, err_msg=f"input {i}")


RNG = np.random.RandomState(0)

COSINE = [  # (x1 shape, x2 shape, dim): torch's broadcasting samples first, then the dims beside them
    ((1, 2, 3), (2, 1, 3), -2),
    ((1, 2, 3), (2, 1, 3), -1),
    ((1, 2, 3), (2, 1, 3), 0),
    ((2, 3), (2, 1, 3), -1),
    ((2, 3), (2, 1, 3), -2),
    ((2, 3), (2, 1, 3), 0),
    ((3,), (4, 3), 1),
    ((4, 1), (1, 5), 0),
    ((4, 5), (4, 5), 1),
]


@pytest.mark.parametrize("s1,s2,dim", COSINE)
async def test_cosine_similarity_norms_after_broadcast(torch, s1, s2, dim):
    a, b = RNG.randn(*s1), RNG.randn(*s2)
    await _check(lambda x, y: ag.nn.functional.cosine_similarity(x, y, dim=dim),
                 lambda x, y: torch.nn.functional.cosine_similarity(x, y, dim=dim), [a, b], torch)


async def test_cosine_similarity_of_the_sample_values(torch):
    """The values the sample gives: torch's cosines stay in [-1, 1]."""
    a = np.array([[[1.0, 2.0, 3.0], [2.0, 1.0, 3.0]]])
    b = np.array([[[2.0, 1.0, 3.0]], [[1.0, 2.0, 3.0]]])
    out = ag.nn.functional.cosine_similarity(ag.tensor(a), ag.tensor(b), dim=-2).numpy()
    assert np.all(np.abs(out) <= 1.0 + 1e-12)
    await _check(lambda x, y: ag.nn.functional.cosine_similarity(x, y, dim=-2),
                 lambda x, y: torch.nn.functional.cosine_similarity(x, y, dim=-2), [a, b], torch)


async def test_cosine_similarity_below_eps_keeps_the_norms_gradient(torch):
    """torch clamps the norms in place under no_grad: the value is eps, the gradient the norm's."""
    a = np.array([[1e-10, -2e-10, 0.5e-10], [1.0, 2.0, 3.0]])
    b = RNG.randn(2, 3)
    await _check(lambda x, y: ag.nn.functional.cosine_similarity(x, y, dim=1),
                 lambda x, y: torch.nn.functional.cosine_similarity(x, y, dim=1), [a, b], torch)


PADS = [(-1, 1, -2, 1), (1, -1, 2, -2), (-2, -1, 0, 0), (2, 2, -1, 3), (-1, -1, -1, -1), (1, 2, 3, 4), (0, -3, 2, 0)]


@pytest.mark.parametrize("mode", ["circular", "reflect", "replicate"])
@pytest.mark.parametrize("pad", PADS)
async def test_pad_negative_amounts_crop(torch, mode, pad):
    x = RNG.randn(2, 3, 5, 6)
    await _check(lambda t: ag.nn.functional.pad(t, pad, mode=mode),
                 lambda t: torch.nn.functional.pad(t, pad, mode=mode), [x], torch)


@pytest.mark.parametrize("shape,pad", [((1, 2, 5), (-1, 1)), ((1, 2, 5), (2, -3)), ((2, 5), (-2, 2)),
                                       ((1, 1, 3, 4, 5), (-1, 2, 1, -1, -1, 1))])
async def test_pad_circular_other_ranks(torch, shape, pad):
    x = RNG.randn(*shape)
    await _check(lambda t: ag.nn.functional.pad(t, pad, mode="circular"),
                 lambda t: torch.nn.functional.pad(t, pad, mode="circular"), [x], torch)


def test_pad_circular_wraps_what_is_left():
    x = ag.arange(5.0).reshape(1, 1, 5)
    assert ag.nn.functional.pad(x, (-1, 1), mode="circular").tolist() == [[[1.0, 2.0, 3.0, 4.0, 1.0]]]


@pytest.mark.parametrize("index,dim", [([0], 0), ([0], -1), (0, 0), ([0, 0, 0], 0)])
async def test_gather_of_a_0d_input_has_the_index_shape(torch, index, dim):
    await _check(lambda t: ag.gather(t, dim, ag.tensor(index)),
                 lambda t: torch.gather(t, dim, torch.tensor(index)), [np.float64(3.5)], torch)


@pytest.mark.parametrize("index,dim", [([[1, 0, 1]], 0), ([[0, 2], [1, 1]], 1), ([[0, 2], [1, 1]], -1)])
async def test_gather_beside_it(torch, index, dim):
    await _check(lambda t: ag.gather(t, dim, ag.tensor(index)),
                 lambda t: torch.gather(t, dim, torch.tensor(index)), [RNG.randn(2, 3)], torch)


@pytest.mark.parametrize("shape,dim,index", [
    ((3, 5), -1, [4, 3, 3, 4, 0]),   # torch's sample: repeated index, 0-d tensor value
    ((3, 5), 1, [4, 3, 3, 4, 0]),
    ((4, 5), 0, [1, 1, 3]),
    ((4, 5), -2, [3, 3, 0]),
    ((2, 3, 4), 1, [2, 2]),
    ((5,), 0, [0, 0, 0]),
    ((), 0, [0, 0]),
])
async def test_index_fill_value_gradient_counts_each_position_once(torch, shape, dim, index):
    x, value = RNG.randn(*shape), np.float64(1.25)
    await _check(lambda t, v: t.index_fill(dim, ag.tensor(index), v),
                 lambda t, v: t.index_fill(dim, torch.tensor(index), v), [x, value], torch)


async def test_index_fill_with_a_number(torch):
    await _check(lambda t: t.index_fill(-1, ag.tensor([4, 3, 3, 4, 0]), -2.0),
                 lambda t: t.index_fill(-1, torch.tensor([4, 3, 3, 4, 0]), -2.0), [RNG.randn(3, 5)], torch)


@pytest.mark.parametrize("op,index_shape", [("gather", (0,)), ("gather", (2, 0)), ("scatter", (0,)),
                                            ("scatter_add", (0,))])
async def test_empty_index_of_any_dtype(torch, op, index_shape):
    """torch checks the dtype and dims of an index with elements only (gather's OpInfo samples)."""
    calls = {"gather": lambda lib, x, i: lib.gather(x, 0, i),
             "scatter": lambda lib, x, i: x.scatter(0, i, 1.0),
             "scatter_add": lambda lib, x, i: x.scatter_add(0, i, lib.zeros(index_shape, dtype=x.dtype))}
    await _check(lambda x: calls[op](ag, x, ag.zeros(index_shape)),
                 lambda x: calls[op](torch, x, torch.zeros(index_shape, dtype=torch.float32)), [RNG.randn(5)], torch)
