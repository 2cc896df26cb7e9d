"""The margin, embedding and likelihood losses and the pairwise distance against finite
differences and PyTorch, on ``cpu`` and ``sim:0``: reductions, broadcast and unbatched forms,
class weights, second order, torch's errors and the loss layers."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import check_gradgrad, check_op, check_raises, has_torch

import asyncgrad as ag
from asyncgrad import nn

pytestmark = pytest.mark.parametrize("op_device", ["cpu", "sim:0"], indirect=True)

REDUCTIONS = ["mean", "sum", "none"]
SIGNS = np.array([[1.0, -1.0, 1.0, -1.0], [-1.0, -1.0, 1.0, 1.0], [1.0, 1.0, -1.0, 1.0]])


def F(lib):
    return lib.F if lib.name == "torch" else ag.nn.functional


@pytest.mark.parametrize("reduction", REDUCTIONS)
async def test_soft_margin_and_hinge_embedding(reduction):
    await check_op(lambda lib, x, y: F(lib).soft_margin_loss(x, y, reduction=reduction), (3, 4), SIGNS,
                   requires_grad=(True, False))
    await check_op(lambda lib, x, y: F(lib).hinge_embedding_loss(x, y, margin=0.5, reduction=reduction), (3, 4),
                   SIGNS, requires_grad=(True, False))


@pytest.mark.parametrize("reduction", REDUCTIONS)
async def test_margin_ranking_broadcasts(reduction):
    await check_op(lambda lib, a, b, y: F(lib).margin_ranking_loss(a, b, y, margin=0.3, reduction=reduction),
                   (3, 4), (1, 4), SIGNS, requires_grad=(True, True, False), fd=False)


@pytest.mark.parametrize("reduction", REDUCTIONS)
async def test_cosine_embedding(reduction):
    target = np.array([1.0, -1.0, 1.0])
    await check_op(lambda lib, a, b, y: F(lib).cosine_embedding_loss(a, b, y, margin=-0.2, reduction=reduction),
                   (3, 5), (3, 5), target, requires_grad=(True, True, False))
    await check_op(lambda lib, a, b, y: F(lib).cosine_embedding_loss(a, b, y), (5,), (5,), np.array(-1.0),
                   requires_grad=(True, True, False), fd=False)


@pytest.mark.parametrize("log_input, full", [(True, False), (False, True), (True, True)])
async def test_poisson_nll(log_input, full):
    target = np.array([[0.0, 1.0, 2.0, 5.0], [3.0, 0.5, 1.5, 7.0]])
    await check_op(lambda lib, x, y: F(lib).poisson_nll_loss(x, y, log_input=log_input, full=full), (2, 4), target,
                   requires_grad=(True, False), low=0.1, high=2.0)


@pytest.mark.parametrize("var_shape", [(3, 4), (3,), (3, 1)])
async def test_gaussian_nll_var_forms(var_shape):
    await check_op(lambda lib, x, y, v: F(lib).gaussian_nll_loss(x, y, v, full=True, reduction="sum"),
                   (3, 4), (3, 4), np.random.default_rng(1).uniform(0.5, 2.0, var_shape))


@pytest.mark.parametrize("p, swap", [(2, False), (1, True), (3, False)])
async def test_triplet_margin_and_pairwise_distance(p, swap):
    await check_op(lambda lib, a, q, n: F(lib).triplet_margin_loss(a, q, n, margin=2.0, p=p, swap=swap),
                   (4, 5), (4, 5), (4, 5))
    await check_op(lambda lib, a, b: F(lib).pairwise_distance(a, b, p=p, keepdim=True), (4, 5), (5,))
    await check_op(lambda lib, a, b: F(lib).triplet_margin_with_distance_loss(
        a, b, b * 2, distance_function=lambda u, v: (u - v).abs().sum(-1), margin=0.5, swap=swap), (3, 4), (3, 4),
        fd=False)


@pytest.mark.parametrize("reduction", REDUCTIONS)
async def test_multilabel_soft_margin_with_weight(reduction):
    target = (np.random.default_rng(2).uniform(size=(3, 4)) > 0.5).astype(np.float64)
    await check_op(lambda lib, x, y, w: F(lib).multilabel_soft_margin_loss(x, y, weight=w, reduction=reduction),
                   (3, 4), target, (4,), requires_grad=(True, False, True))


@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("reduction", REDUCTIONS)
async def test_multi_margin(p, reduction):
    target = np.array([0, 3, 2], dtype=np.int64)
    weight = np.array([0.5, 1.0, 2.0, 0.25])
    await check_op(lambda lib, x: F(lib).multi_margin_loss(x, lib.tensor(target), p=p, margin=0.7,
                                                           weight=lib.tensor(weight), reduction=reduction), (3, 4),
                   fd=False)
    await check_op(lambda lib, x: F(lib).multi_margin_loss(x, lib.tensor(np.array(1)), reduction=reduction), (4,),
                   fd=False)


@pytest.mark.parametrize("reduction", REDUCTIONS)
async def test_multilabel_margin_stops_at_minus_one(reduction):
    target = np.array([[3, 0, -1, 1], [1, 2, 1, -1], [-1, 0, 0, 0]], dtype=np.int64)
    await check_op(lambda lib, x: F(lib).multilabel_margin_loss(x, lib.tensor(target), reduction=reduction), (3, 4),
                   fd=False)
    await check_op(lambda lib, x: F(lib).multilabel_margin_loss(x, lib.tensor(target[0]), reduction=reduction),
                   (4,), fd=False)


async def test_second_order():
    await check_gradgrad(lambda lib, x: F(lib).soft_margin_loss(x, lib.tensor(SIGNS)), (3, 4))
    await check_gradgrad(lambda lib, a, b: F(lib).cosine_embedding_loss(a, b, lib.tensor(np.array([1.0, -1.0, 1.0]))),
                         (3, 5), (3, 5))
    await check_gradgrad(lambda lib, a, q, n: F(lib).triplet_margin_loss(a, q, n, margin=3.0), (4, 5), (4, 5), (4, 5))
    await check_gradgrad(lambda lib, x, v: F(lib).gaussian_nll_loss(x, lib.tensor(np.ones((2, 3))), v), (2, 3),
                         np.full((2, 3), 1.5))


@pytest.mark.parametrize("call, exc, match", [
    (lambda lib: F(lib).multi_margin_loss(lib.zeros(2, 3), lib.tensor(np.array([0, 1]), dtype=None), p=3),
     ValueError, "only p == 1 and p == 2 supported"),
    (lambda lib: F(lib).multi_margin_loss(lib.zeros(2, 3), lib.tensor(np.array([0, 1])),
                                          weight=lib.ones(3).requires_grad_()), RuntimeError,
     "The function 'multi_margin_loss' is not differentiable with respect to argument 'weight'"),
    (lambda lib: F(lib).multi_margin_loss(lib.zeros(2, 3), lib.tensor(np.array([0, 1, 2]))), RuntimeError,
     r"Expected target size \[2\], but got \[3\]. Input has shape \[2, 3\]."),
    (lambda lib: F(lib).margin_ranking_loss(lib.zeros(2), lib.zeros(2, 1), lib.zeros(2)), RuntimeError,
     "margin_ranking_loss : All input tensors should have same dimension"),
    (lambda lib: F(lib).gaussian_nll_loss(lib.zeros(2, 3), lib.zeros(2, 3), lib.ones(4)), ValueError,
     "var is of incorrect size"),
    (lambda lib: F(lib).gaussian_nll_loss(lib.zeros(2, 3), lib.zeros(2, 3), -1.0), ValueError,
     "var has negative entry/entries"),
    (lambda lib: F(lib).triplet_margin_loss(lib.zeros(2, 3), lib.zeros(2, 3), lib.zeros(3)), RuntimeError,
     "anchor 2D, positive 2D, and negative 1D inputs"),
    (lambda lib: F(lib).soft_margin_loss(lib.zeros(2), lib.zeros(2), reduction="avg"), ValueError,
     "avg is not a valid value for reduction"),
])
def test_errors_use_torch_words(call, exc, match):
    check_raises(call, exc, match)


async def test_loss_layers():
    rng = np.random.default_rng(3)
    x, y = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    cases = [
        ("SoftMarginLoss", dict(reduction="sum"), (x, SIGNS)),
        ("HingeEmbeddingLoss", dict(margin=2.0), (x, SIGNS)),
        ("MarginRankingLoss", dict(margin=0.1), (x, y, SIGNS)),
        ("PoissonNLLLoss", dict(log_input=True), (x, np.abs(y))),
        ("GaussianNLLLoss", dict(full=True), (x, y, np.abs(y) + 0.1)),
        ("TripletMarginLoss", dict(margin=1.5, p=1), (x, y, x * 0.5)),
        ("MultiLabelSoftMarginLoss", {}, (x, (y > 0).astype(np.float64))),
        ("CosineEmbeddingLoss", dict(margin=0.1), (x, y, np.array([1.0, -1.0, 1.0]))),
        ("PairwiseDistance", dict(p=1.5, keepdim=True), (x, y)),
        ("CosineSimilarity", dict(dim=0), (x, y)),
    ]
    for name, kw, args in cases:
        out = getattr(nn, name)(**kw)(*(ag.tensor(a) for a in args))
        if has_torch():
            import torch

            expected = getattr(torch.nn, name)(**kw)(*(torch.tensor(a) for a in args))
            np.testing.assert_allclose(out.detach().numpy(), expected.numpy(), rtol=1e-10, atol=1e-12)
    with pytest.raises(ValueError, match="TripletMarginLoss: expected margin to be greater than 0, got -1"):
        nn.TripletMarginLoss(margin=-1)


@pytest.mark.parametrize("reduction", REDUCTIONS)
async def test_linear_cross_entropy(reduction):
    target = np.array([0, 2, 1, 2], dtype=np.int64)
    await check_op(lambda lib, x, w, b: F(lib).linear_cross_entropy(x, w, lib.tensor(target), linear_bias=b,
                                                                    reduction=reduction, label_smoothing=0.1),
                   (4, 5), (3, 5), (3,))
    k_target = np.array([[0, 1], [2, 2]], dtype=np.int64)  # K-dimensional: a (classes, 2, features) weight
    await check_op(lambda lib, x, w: F(lib).linear_cross_entropy(x, w, lib.tensor(k_target), reduction=reduction,
                                                                 ignore_index=1), (2, 4), (3, 2, 4))
