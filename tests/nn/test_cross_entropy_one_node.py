"""cross_entropy with class indices over a (N, C) or (C,) input is one NllLossBackward0 node (Note
[cross_entropy is one node] in ops/nn.py): the same values and gradients, bit for bit, as log_softmax
then nll_loss, and torch's within rounding, first and second order; the other forms take the general
path (log_softmax's node, then the loss's)."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import check_gradgrad, check_op

import asyncgrad as ag

F = ag.nn.functional
RNG = np.random.default_rng(30)
WEIGHTS = RNG.uniform(0.5, 2.0, 5)
TARGETS = np.array([1, 0, 4, 1, 3, 2])  # the class 1 twice: ignore_index=1 drops two rows
REDUCTIONS = pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
WEIGHTED = pytest.mark.parametrize("weighted", [False, True])
IGNORE = pytest.mark.parametrize("ignore_index", [-100, 1])


def _target(batched: bool, dtype: type = np.int64) -> np.ndarray:
    return (TARGETS if batched else np.array(TARGETS[0])).astype(dtype)


def _loss(batched: bool, reduction: str, weighted: bool, ignore_index: int, dtype: type = np.int64):
    def fn(lib, x):
        weight = lib.tensor(WEIGHTS) if weighted else None
        return lib.nn.functional.cross_entropy(x, lib.tensor(_target(batched, dtype)), weight=weight,
                                               ignore_index=ignore_index, reduction=reduction)
    return fn


async def _fused_and_general(x: np.ndarray, reduction: str, weighted: bool, ignore_index: int, dtype: type,
                             g: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """The loss and the logits' gradient through cross_entropy and through log_softmax then nll_loss."""
    target = ag.tensor(_target(x.ndim == 2, dtype))
    weight = ag.tensor(WEIGHTS) if weighted else None
    results = []
    for fused in (True, False):
        logits = ag.tensor(x, requires_grad=True)
        if fused:
            loss = F.cross_entropy(logits, target, weight=weight, ignore_index=ignore_index, reduction=reduction)
            assert loss.grad_fn.name() == "NllLossBackward0"
            assert loss.grad_fn.next_functions[0][0].name() == "AccumulateGrad"  # the logits' own sink: one node
        else:
            logp = logits.log_softmax(x.ndim - 1)
            loss = F.nll_loss(logp, target, weight=weight, ignore_index=ignore_index, reduction=reduction)
            assert loss.grad_fn.next_functions[0][0].name() == "LogSoftmaxBackward0"
        await loss.backward(ag.tensor(g))
        results.append((loss.detach().numpy(), logits.grad.numpy()))
    return results


@REDUCTIONS
@WEIGHTED
@IGNORE
@pytest.mark.parametrize("batched", [True, False])
@pytest.mark.parametrize("target_dtype", [np.int64, np.uint8])
async def test_one_node_equals_log_softmax_then_nll_loss_bit_for_bit(reduction, weighted, ignore_index, batched,
                                                                     target_dtype):
    x = RNG.standard_normal((6, 5) if batched else (5,)) * 3
    g = RNG.standard_normal(6 if batched and reduction == "none" else ())
    with np.errstate(invalid="ignore", divide="ignore"):  # the unbatched row ignored under "mean": 0/0, as torch
        (loss, grad), (loss_ref, grad_ref) = await _fused_and_general(x, reduction, weighted, ignore_index,
                                                                      target_dtype, g)
    assert np.array_equal(loss, loss_ref, equal_nan=True)
    assert np.array_equal(grad, grad_ref, equal_nan=True)


@pytest.mark.parametrize("op_device", ["cpu", "sim:0"], indirect=True)
@REDUCTIONS
@WEIGHTED
@IGNORE
async def test_one_node_against_torch_and_finite_differences(reduction, weighted, ignore_index):
    await check_op(_loss(True, reduction, weighted, ignore_index), (6, 5), name="NllLossBackward0")
    if ignore_index == -100:  # an ignored unbatched target under "mean" is 0/0
        await check_op(_loss(False, reduction, weighted, ignore_index), (5,), name="NllLossBackward0")


@REDUCTIONS
@WEIGHTED
async def test_one_node_second_order(reduction, weighted):
    """create_graph records torch's LogSoftmaxBackward0 from the logits: the Hessian of the loss is torch's."""
    await check_gradgrad(_loss(True, reduction, weighted, 1), (6, 5))
    await check_gradgrad(_loss(False, reduction, weighted, -100), (5,))


async def test_one_node_second_order_records_log_softmax():
    logits = ag.tensor(RNG.standard_normal((6, 5)), requires_grad=True)
    loss = F.cross_entropy(logits, ag.tensor(TARGETS))
    (grad,) = await ag.grad(loss, logits, create_graph=True)
    names, stack, seen = set(), [grad.grad_fn], set()
    while stack:
        fn = stack.pop()
        if fn is None or fn in seen:
            continue
        seen.add(fn)
        names.add(fn.name())
        stack.extend(f for f, _ in fn.next_functions)
    assert "LogSoftmaxBackward0" in names


async def test_one_node_releases_what_it_saved():
    logits = ag.tensor(RNG.standard_normal((6, 5)), requires_grad=True)
    loss = F.cross_entropy(logits, ag.tensor(TARGETS))
    node = loss.grad_fn
    assert node.logp is not None and node.coef is not None
    await loss.backward(retain_graph=True)
    first = logits.grad.numpy().copy()
    await loss.backward()
    assert np.array_equal(logits.grad.numpy(), 2 * first)
    assert node.logp is None and node.coef is None  # they go with the saved tensors
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        await loss.backward()


async def test_no_grad_gives_the_same_plain_value():
    x = RNG.standard_normal((6, 5))
    expected = F.cross_entropy(ag.tensor(x, requires_grad=True), ag.tensor(TARGETS))
    with ag.no_grad():
        value = F.cross_entropy(ag.tensor(x, requires_grad=True), ag.tensor(TARGETS))
    assert value.grad_fn is None and not value.requires_grad
    assert np.array_equal(value.numpy(), expected.detach().numpy())


@REDUCTIONS
async def test_other_forms_take_the_general_path(reduction):
    """K-dim inputs, probabilities as target and label smoothing: log_softmax's node, then the loss's."""
    probs = RNG.dirichlet(np.ones(5), 6)
    cases = [
        (lambda lib, x: lib.nn.functional.cross_entropy(x, lib.tensor(TARGETS), label_smoothing=0.1,
                                                        reduction=reduction), (6, 5)),
        (lambda lib, x: lib.nn.functional.cross_entropy(x, lib.tensor(probs), reduction=reduction), (6, 5)),
        (lambda lib, x: lib.nn.functional.cross_entropy(x, lib.tensor(TARGETS[:4].reshape(2, 2)), reduction=reduction),
         (2, 5, 2)),
    ]
    for fn, shape in cases:
        out, _ = await check_op(fn, shape)
        names, stack = set(), [out.grad_fn]
        while stack:
            node = stack.pop()
            if node is not None:
                names.add(node.name())
                stack.extend(f for f, _ in node.next_functions)
        assert "LogSoftmaxBackward0" in names


async def test_saved_tensor_hooks_take_the_general_path():
    """Under saved-tensor hooks the hooks see what they saw before: log_softmax's result, saved by its node."""
    packed = []
    logits = ag.tensor(RNG.standard_normal((6, 5)), requires_grad=True)
    with ag.autograd.graph.saved_tensors_hooks(lambda t: packed.append(t) or t, lambda t: t):
        loss = F.cross_entropy(logits, ag.tensor(TARGETS))
    assert loss.grad_fn.next_functions[0][0].name() == "LogSoftmaxBackward0"
    assert packed
    await loss.backward()
    plain_logits = ag.tensor(logits.detach().numpy(), requires_grad=True)
    await F.cross_entropy(plain_logits, ag.tensor(TARGETS)).backward()
    assert np.array_equal(logits.grad.numpy(), plain_logits.grad.numpy())


async def test_second_order_after_the_logits_changed_in_place(torch):
    """The recorded backward starts from the edge the forward recorded: the logits changed in place
    after the loss (their grad_fn is now the in-place op's) leave the Hessian torch's."""
    w_np, x_np, y = RNG.standard_normal((4, 3)), RNG.standard_normal((2, 4)), np.array([0, 2])
    w = ag.tensor(w_np, requires_grad=True)
    logits = ag.tensor(x_np) @ w
    loss = F.cross_entropy(logits, ag.tensor(y))
    logits.mul_(2.0)
    (g,) = await ag.grad(loss, w, create_graph=True)
    (gg,) = await ag.grad((g * g).sum(), w)
    tw = torch.tensor(w_np, requires_grad=True)
    tlogits = torch.tensor(x_np) @ tw
    tloss = torch.nn.functional.cross_entropy(tlogits, torch.tensor(y))
    tlogits.mul_(2.0)
    (tg,) = torch.autograd.grad(tloss, tw, create_graph=True)
    (tgg,) = torch.autograd.grad((tg * tg).sum(), tw)
    np.testing.assert_allclose(g.detach().numpy(), tg.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(gg.numpy(), tgg.numpy(), rtol=1e-12)
