"""Losses (functions and modules), F.normalize and F.cosine_similarity: values and gradients in the
input and the target against finite differences and torch, second order, and torch's errors."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import check_gradgrad, check_op, check_raises

import asyncgrad as ag

DEVICES = pytest.mark.parametrize("op_device", ["cpu", "sim:0"], indirect=True)
RNG = np.random.default_rng(11)
A = RNG.standard_normal((4, 5))
B = RNG.standard_normal((4, 5))
REDUCTIONS = pytest.mark.parametrize("reduction", ["mean", "sum", "none"])


@DEVICES
@REDUCTIONS
async def test_l1_huber_smooth_l1(reduction):
    for fn in (lambda lib, x, t: lib.nn.functional.l1_loss(x, t, reduction=reduction),
               lambda lib, x, t: lib.nn.functional.huber_loss(x, t, reduction=reduction, delta=0.8),
               lambda lib, x, t: lib.nn.functional.smooth_l1_loss(x, t, reduction=reduction, beta=0.6),
               lambda lib, x, t: lib.nn.functional.smooth_l1_loss(x, t, reduction=reduction, beta=0.0)):
        await check_op(fn, A, B)
    await check_gradgrad(lambda lib, x, t: lib.nn.functional.huber_loss(x, t, reduction=reduction), A, B)


@DEVICES
@pytest.mark.parametrize("reduction", ["mean", "sum", "none", "batchmean"])
@pytest.mark.parametrize("log_target", [False, True])
async def test_kl_div(reduction, log_target):
    logp = np.log(RNG.dirichlet(np.ones(5), 4))
    target = np.log(RNG.dirichlet(np.ones(5), 4)) if log_target else RNG.dirichlet(np.ones(5), 4)

    def fn(lib, x, t):
        return lib.nn.functional.kl_div(x, t, reduction=reduction, log_target=log_target)

    with pytest.warns(UserWarning, match="reduction: 'mean' divides") if reduction == "mean" else _nothing():
        await check_op(fn, logp, target)
    if reduction != "mean":
        await check_gradgrad(fn, logp, target)


async def test_kl_div_zero_target_entries_contribute_nothing(torch):
    target = np.array([[0.0, 0.5, 0.5], [1.0, 0.0, 0.0]])
    await check_op(lambda lib, x: lib.nn.functional.kl_div(x, lib.tensor(target), reduction="batchmean"),
                   np.log(np.full((2, 3), 1 / 3)))


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


@DEVICES
@REDUCTIONS
async def test_binary_cross_entropy(reduction):
    x = RNG.uniform(0.05, 0.95, (4, 3))
    t = RNG.uniform(0, 1, (4, 3))
    w = RNG.uniform(0.5, 2, (4, 3))
    await check_op(lambda lib, x, t: lib.nn.functional.binary_cross_entropy(x, t, reduction=reduction), x, t,
                   name="BinaryCrossEntropyBackward0")
    await check_op(lambda lib, x, t: lib.nn.functional.binary_cross_entropy(x, t, lib.tensor(w), reduction=reduction),
                   x, t, name="BinaryCrossEntropyBackward0")
    await check_gradgrad(lambda lib, x, t: lib.nn.functional.binary_cross_entropy(x, t, reduction=reduction), x, t)


async def test_binary_cross_entropy_floors_the_logs_at_minus_100(torch):
    x = np.array([0.0, 1.0, 0.3])
    t = np.array([1.0, 0.0, 0.5])
    out, grads = await check_op(lambda lib, x: lib.nn.functional.binary_cross_entropy(x, lib.tensor(t),
                                                                                      reduction="none"), x, fd=False)
    assert np.isfinite(out.detach().numpy()).all()


@DEVICES
@REDUCTIONS
async def test_binary_cross_entropy_with_logits(reduction):
    x = RNG.standard_normal((4, 3)) * 3
    t = RNG.uniform(0, 1, (4, 3))
    w = RNG.uniform(0.5, 2, (3,))
    pw = RNG.uniform(0.5, 3, (3,))
    for kwargs in ({}, {"weight": w}, {"pos_weight": pw}, {"weight": w, "pos_weight": pw}):
        def fn(lib, x, t, kwargs=kwargs):
            return lib.nn.functional.binary_cross_entropy_with_logits(
                x, t, reduction=reduction, **{k: lib.tensor(v) for k, v in kwargs.items()})

        await check_op(fn, x, t, name="BinaryCrossEntropyWithLogitsBackward0")
        await check_gradgrad(fn, x, t)


TARGETS = np.array([0, 2, 4, 1, 2, 3])


@DEVICES
@REDUCTIONS
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("ignore", [False, True])
async def test_cross_entropy_label_smoothing(reduction, weighted, ignore):
    logits = RNG.standard_normal((6, 5))
    w = RNG.uniform(0.5, 2, 5)
    targets = TARGETS.copy()
    if ignore:
        targets[1] = -100

    def fn(lib, x):
        return lib.nn.functional.cross_entropy(x, lib.tensor(targets), weight=lib.tensor(w) if weighted else None,
                                               reduction=reduction, label_smoothing=0.15)

    await check_op(fn, logits)
    await check_gradgrad(fn, logits)


@DEVICES
async def test_cross_entropy_label_smoothing_kdim_and_probabilities():
    logits = RNG.standard_normal((2, 4, 3))
    targets = np.array([[0, 3, 1], [2, 2, -100]])
    await check_op(lambda lib, x: lib.nn.functional.cross_entropy(x, lib.tensor(targets), label_smoothing=0.2), logits)
    probs = RNG.dirichlet(np.ones(4), (2, 3)).transpose(0, 2, 1)
    await check_op(lambda lib, x, p: lib.nn.functional.cross_entropy(x, p, label_smoothing=0.3), logits, probs)


@DEVICES
async def test_normalize_and_cosine_similarity():
    x = RNG.standard_normal((3, 4))
    y = RNG.standard_normal((3, 4))
    await check_op(lambda lib, x: lib.nn.functional.normalize(x), x)
    await check_op(lambda lib, x: lib.nn.functional.normalize(x, p=3.0, dim=0), x)
    await check_op(lambda lib, x, y: lib.nn.functional.cosine_similarity(x, y), x, y)
    await check_op(lambda lib, x, y: lib.nn.functional.cosine_similarity(x, y, dim=0), x, y)
    await check_gradgrad(lambda lib, x, y: lib.nn.functional.cosine_similarity(x, y), x, y)


async def test_normalize_of_a_zero_row_has_a_finite_gradient(torch):
    x = np.array([[0.0, 0.0, 0.0], [1.0, -2.0, 2.0]])
    await check_op(lambda lib, x: lib.nn.functional.normalize(x), x, fd=False)


# --------------------------------------------------------------------------- modules
@pytest.mark.parametrize("cls, kwargs, make", [
    ("L1Loss", {}, "pair"), ("HuberLoss", {"delta": 0.5}, "pair"), ("SmoothL1Loss", {"beta": 0.5}, "pair"),
    ("KLDivLoss", {"reduction": "batchmean"}, "pair"), ("BCELoss", {}, "prob"),
    ("BCEWithLogitsLoss", {"pos_weight": "pw"}, "logits"), ("NLLLoss", {"weight": "w", "ignore_index": 1}, "class"),
    ("CrossEntropyLoss", {"weight": "w", "label_smoothing": 0.1}, "class"),
])
async def test_loss_modules_match_torch(torch, cls, kwargs, make):
    w = RNG.uniform(0.5, 2, 5)
    extras = {"w": w, "pw": RNG.uniform(0.5, 2, 5)}
    x = RNG.uniform(0.1, 0.9, (6, 5)) if make == "prob" else RNG.standard_normal((6, 5))
    t = TARGETS if make == "class" else RNG.uniform(0, 1, (6, 5))
    ag_kwargs = {k: ag.tensor(extras[v]) if v in ("w", "pw") else v for k, v in kwargs.items()}
    t_kwargs = {k: torch.tensor(extras[v]) if v in ("w", "pw") else v for k, v in kwargs.items()}
    module, reference = getattr(ag.nn, cls)(**ag_kwargs), getattr(torch.nn, cls)(**t_kwargs)
    assert list(module.state_dict()) == list(reference.state_dict())  # class weights are buffers
    xa, xt = ag.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    out, expected = module(xa, ag.tensor(t)), reference(xt, torch.tensor(t))
    np.testing.assert_allclose(out.detach().numpy(), expected.detach().numpy(), rtol=1e-10, atol=1e-12)
    (g,) = await ag.grad(out, [xa])
    (e,) = torch.autograd.grad(expected, [xt])
    np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-10, atol=1e-12)


# --------------------------------------------------------------------------- errors
def test_loss_errors_as_torch():
    check_raises(lambda lib: lib.nn.functional.l1_loss(lib.ones(3), lib.ones(3), reduction="foo"), ValueError,
                 "foo is not a valid value for reduction")
    check_raises(lambda lib: lib.nn.functional.kl_div(lib.ones(3), lib.ones(3), reduction="foo"), ValueError,
                 "foo is not a valid value for reduction")
    check_raises(lambda lib: lib.nn.functional.huber_loss(lib.ones(3), lib.ones(3), delta=-1.0), RuntimeError,
                 "huber_loss does not support non-positive values for delta.")
    check_raises(lambda lib: lib.nn.functional.smooth_l1_loss(lib.ones(3), lib.ones(3), beta=-1.0), RuntimeError,
                 "smooth_l1_loss does not support negative values for beta.")
    check_raises(lambda lib: lib.nn.functional.cross_entropy(lib.ones(2, 3), lib.tensor([0, 1]),
                                                             label_smoothing=1.5), RuntimeError,
                 "label_smoothing must be between 0.0 and 1.0. Got: 1.5")
    check_raises(lambda lib: lib.nn.functional.binary_cross_entropy(lib.ones(3) * 0.5, lib.ones(4)), ValueError,
                 r"Using a target size \(\w+\.Size\(\[4\]\)\) that is different to the input size "
                 r"\(\w+\.Size\(\[3\]\)\) is deprecated. Please ensure they have the same size.")
    check_raises(lambda lib: lib.nn.functional.binary_cross_entropy(lib.ones(3) * 2, lib.ones(3)), RuntimeError,
                 "all elements of input should be between 0 and 1")
    check_raises(lambda lib: lib.nn.functional.binary_cross_entropy_with_logits(lib.ones(3), lib.ones(4)),
                 ValueError,
                 r"Target size \(\w+\.Size\(\[4\]\)\) must be the same as input size \(\w+\.Size\(\[3\]\)\)")
    check_raises(lambda lib: lib.nn.functional.nll_loss(lib.ones(3, 4), lib.tensor([0, 1])), ValueError,
                 r"Expected input batch_size \(3\) to match target batch_size \(2\).")
    with pytest.warns(UserWarning, match="Using a target size"):
        ag.nn.functional.l1_loss(ag.ones(3, 1), ag.ones(3))
