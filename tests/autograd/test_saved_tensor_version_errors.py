"""A saved tensor changed in place raises torch's error in the same programs as torch (issue 10).

Each program runs on torch and on asyncgrad (cpu and the simulated device): either both raise
the same error with the same text, or both compute the same gradients. The cases are the
fuzzer's (benchmarks/fuzz.py seeds 402, 526, 872, 1119, 1274, 2826: an input of ``clamp``
changed in place; seeds 297, 829: ``x *= x``), the torch behaviours beside them (a bound tensor
of ``clamp``, an operand that is a ``detach()`` of self), and the node the error names.
"""

from __future__ import annotations

import re
from typing import Any, Callable

import numpy as np
import pytest

import asyncgrad as ag

DEVICES = ["cpu", "sim:0"]
X = np.array([0.5, -2.0, 1.5, 1.0, np.nan])  # inside, below, above, on the bound, NaN
W = np.array([2.0, -1.0, 0.5, 3.0, 1.5])


class Side:
    """What a program needs of torch or asyncgrad: tensors on the device, and backward."""

    def __init__(self, lib: Any, device: str) -> None:
        self.lib, self.device = lib, device

    def t(self, value: np.ndarray, requires_grad: bool = False) -> Any:
        if self.lib is ag:
            return ag.tensor(value, device=self.device, requires_grad=requires_grad)
        return self.lib.tensor(value, requires_grad=requires_grad)

    async def backward(self, y: Any, **kwargs: Any) -> None:
        if self.lib is ag:
            await y.backward(**kwargs)
        else:
            y.backward(**kwargs)


def _message(exc: BaseException) -> str:
    """The error's text up to its hint, with the library's name left out of the tensor type."""
    return re.sub(r"\[(torch|asyncgrad)\.", "[", str(exc)).split(" Hint:")[0]


async def _outcome(program: Callable, side: Side) -> tuple[str, Any]:
    try:
        leaves = await program(side)
    except RuntimeError as exc:
        return "raised", _message(exc)
    return "grads", [None if t.grad is None else np.asarray(t.grad.detach().cpu().numpy()) for t in leaves]


async def _same_as_torch(program: Callable, device: str, torch: Any) -> tuple[str, Any]:
    expected = await _outcome(program, Side(torch, "cpu"))
    actual = await _outcome(program, Side(ag, device))
    assert actual[0] == expected[0], f"torch {expected}, asyncgrad {actual}"
    if expected[0] == "raised":
        assert actual[1] == expected[1]
    else:
        for a, e in zip(actual[1], expected[1]):
            assert (a is None) == (e is None)
            if e is not None:
                np.testing.assert_allclose(a, e, rtol=1e-12, atol=0, equal_nan=True)
    return expected


VERSION_ERROR = "one of the variables needed for gradient computation has been modified by an inplace operation"


# --------------------------------------------------------------------------- clamp (Note [Clamp saves its input])
async def clamp_then_add_(s: Side):
    a = s.t(X, True)
    x = a * 1
    y = x.clamp(-1.0, 1.0)
    x.add_(1)
    await s.backward(y.sum())
    return [a]


async def clamp_then_setitem(s: Side):  # fuzzer seeds 402, 526: through a view of x (CopySlices)
    a = s.t(X, True)
    x = a * 1
    y = x.clamp(min=-1.0)
    x[0] = 3.0
    await s.backward(y.sum())
    return [a]


async def clamp_max_then_view_clamp_(s: Side):  # fuzzer seed 1274: clamp_ of a view of x
    a = s.t(X, True)
    x = a * 1
    y = x.clamp(max=1.0)
    x.unsqueeze(0).clamp_(min=-100.0)
    await s.backward(y.sum())
    return [a]


async def clamp_tensor_bound_changed(s: Side):
    a = s.t(X, True)
    low, high = s.t(np.full(5, -1.0)), s.t(np.full(5, 1.0))
    y = (a * 1).clamp(low, high)
    low.add_(0.5)
    await s.backward(y.sum())
    return [a]


async def clamp_tensor_bounds_unchanged(s: Side):
    a = s.t(X, True)
    y = (a * 1).clamp(s.t(np.array([-1.0, -3.0, 0.0, 0.5, 0.0])), s.t(np.array([1.0])))
    await s.backward(y.sum())
    return [a]


async def clamp_unchanged(s: Side):  # the gradient at the bounds (inclusive) and at a NaN
    a, b = s.t(X, True), s.t(X, True)
    ya = a.clamp(-2.0, 1.0) * s.t(W)
    yb = b.clamp(max=1.5) + b.clamp(min=-2.0)
    await s.backward((ya + yb).sum())
    return [a, b]


async def clamp_second_order(s: Side):
    a = s.t(np.array([0.5, -2.0, 1.5, 1.0]), True)
    y = (a.clamp(-1.0, 1.0) * a * a).sum()
    (g,) = await ag.grad(y, a, create_graph=True) if s.lib is ag else s.lib.autograd.grad(y, a, create_graph=True)
    await s.backward(g.sum())
    return [a]


# --------------------------------------------------------------------------- Note [An operand aliasing self]
async def mul_self(s: Side):  # fuzzer seeds 297, 829
    a = s.t(W, True)
    x = a * 1
    x *= x
    await s.backward(x.sum())
    return [a]


async def div_self(s: Side):
    a = s.t(W, True)
    x = a * 1
    x /= x
    await s.backward(x.sum())
    return [a]


async def mul_own_detach(s: Side):  # a detach() shares x's version counter
    a = s.t(W, True)
    x = a * 1
    x.mul_(x.detach())
    await s.backward(x.sum())
    return [a]


async def mul_into_untracked_by_its_detach(s: Side):  # self is saved as its old value: no error
    x = s.t(W)
    w = x.detach().requires_grad_()
    x.mul_(w)
    await s.backward(x.sum())
    return [w]


async def mul_other(s: Side):  # an operand that does not alias self: self's old value is kept
    a, b = s.t(W, True), s.t(np.array([0.5, -2.0, 1.5, 1.0, 3.0]), True)
    x = a * 1
    x.mul_(b)
    x.mul_(a)
    await s.backward(x.sum())
    return [a, b]


# --------------------------------------------------------------------------- the node the error names
async def saved_input_of_another_node(s: Side):  # torch names the tensor's node now: Add
    a = s.t(W, True)
    x = a * 1
    y = x * x
    x.add_(1)
    await s.backward(y.sum())
    return [a]


async def saved_output(s: Side):  # an output saved by its own node names that node: Exp
    a = s.t(W, True)
    y = a.exp()
    y.add_(1)
    await s.backward(y.sum())
    return [a]


# --------------------------------------------------------------------------- ops whose forward keeps a mask
# amax/amin/median keep their tie shares, index_put/scatter/masked_fill a mask of what was written,
# and save what torch saves besides (its input and result, the index or mask tensor), for the check
async def amax_then_input_changed(s: Side):
    a = s.t(W, True)
    x = a * 1
    y = x.amax()
    x.add_(1)
    await s.backward(y)
    return [a]


async def amin_dim_then_result_changed(s: Side):
    a = s.t(np.array([[1.0, -1.0], [-1.0, 2.0]]), True)
    y = (a * 1).amin(0)
    y.mul_(2)
    await s.backward(y.sum())
    return [a]


async def median_then_input_changed(s: Side):
    a = s.t(W, True)
    x = a * 1
    y = x.median()
    x[0] = 0.0
    await s.backward(y)
    return [a]


async def index_put_then_index_changed(s: Side):
    a = s.t(W, True)
    i = s.t(np.array([0, 2]))
    y = (a * 1).index_put((i,), s.t(np.array([1.0, 2.0])))
    i.add_(1)
    await s.backward(y.sum())
    return [a]


async def setitem_then_index_changed(s: Side):
    a = s.t(W, True)
    x = a * 1
    i = s.t(np.array([1, 3]))
    x[i] = 0.0
    i.zero_()
    await s.backward(x.sum())
    return [a]


async def scatter_then_index_changed(s: Side):
    a, src = s.t(W, True), s.t(np.array([1.0, 2.0]), True)
    i = s.t(np.array([4, 1]))
    y = (a * 1).scatter(0, i, src)
    i.add_(-1)
    await s.backward(y.sum())
    return [a, src]


async def masked_fill_then_mask_changed(s: Side):  # was a silently wrong gradient: the mask's array was kept
    a = s.t(W, True)
    m = s.t(np.array([True, False, True, False, False]))
    y = (a * 1).masked_fill(m, 0.0)
    m[1] = True
    await s.backward(y.sum())
    return [a]


async def mask_ops_unchanged(s: Side):
    a, b = s.t(np.array([[1.0, 3.0], [3.0, 2.0]]), True), s.t(W, True)
    i, m = s.t(np.array([0, 3])), s.t(np.array([True, False, True, False, False]))
    y = (a.amax(1) * s.t(np.array([2.0, 3.0]))).sum() + a.amin() + b.median() * 2
    y = y + (b.index_put((i,), s.t(np.array([1.0]))) * s.t(W)).sum()
    y = y + (b.scatter(0, i, 0.5) * s.t(X[::-1].copy())).nansum() + (b.masked_fill(m, 1.0) * s.t(W)).sum()
    await s.backward(y)
    return [a, b]


RAISES = {
    clamp_then_add_: "which is output 0 of Add, is at version 1; expected version 0",
    clamp_then_setitem: "which is output 0 of torch::autograd::CopySlices, is at version 1; expected version 0",
    clamp_max_then_view_clamp_: "which is output 0 of torch::autograd::CopySlices, is at version 1",
    clamp_tensor_bound_changed: "[DoubleTensor [5]] is at version 1; expected version 0",
    mul_self: "which is output 0 of Mul, is at version 1; expected version 0",
    div_self: "which is output 0 of Div, is at version 1; expected version 0",
    mul_own_detach: "[DoubleTensor [5]] is at version 1; expected version 0",
    saved_input_of_another_node: "which is output 0 of Add, is at version 1; expected version 0",
    saved_output: "which is output 0 of Exp, is at version 1; expected version 0",
    amax_then_input_changed: "which is output 0 of Add, is at version 1; expected version 0",
    amin_dim_then_result_changed: "which is output 0 of Amin, is at version 1; expected version 0",
    median_then_input_changed: "which is output 0 of torch::autograd::CopySlices, is at version 1",
    index_put_then_index_changed: "[LongTensor [2]] is at version 1; expected version 0",
    setitem_then_index_changed: "[LongTensor [2]] is at version 1; expected version 0",
    scatter_then_index_changed: "[LongTensor [2]] is at version 1; expected version 0",
    masked_fill_then_mask_changed: "[CPUBoolType [5]] is at version 1; expected version 0",
}
COMPUTES = [clamp_tensor_bounds_unchanged, clamp_unchanged, clamp_second_order, mul_into_untracked_by_its_detach,
            mul_other, mask_ops_unchanged]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("program", list(RAISES), ids=lambda p: p.__name__)
async def test_raises_torchs_version_error(program, device, torch):
    kind, message = await _same_as_torch(program, device, torch)
    assert kind == "raised" and message.startswith(VERSION_ERROR) and RAISES[program] in message


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("program", COMPUTES, ids=lambda p: p.__name__)
async def test_computes_torchs_gradients(program, device, torch):
    kind, _ = await _same_as_torch(program, device, torch)
    assert kind == "grads"


@pytest.mark.parametrize("device", DEVICES)
async def test_clamp_gradient_matches_finite_differences(device):
    """The mask built in backward from the saved input: d clamp(x)/dx is 1 inside [min, max]
    (bounds included), 0 outside, by central differences away from the bounds."""
    x0 = np.array([0.5, -2.0, 1.5, -0.3, 0.99])
    x = ag.tensor(x0, device=device, requires_grad=True)
    await x.clamp(-1.0, 1.0).sum().backward()
    eps = 1e-6
    numeric = [(np.clip(x0 + eps * e, -1.0, 1.0).sum() - np.clip(x0 - eps * e, -1.0, 1.0).sum()) / (2 * eps)
               for e in np.eye(5)]
    np.testing.assert_allclose(x.grad.cpu().numpy(), numeric, atol=1e-8)
    y = ag.tensor(np.array([-1.0, 1.0]), device=device, requires_grad=True)  # on a bound: passes, as torch
    await y.clamp(-1.0, 1.0).sum().backward()
    np.testing.assert_array_equal(y.grad.cpu().numpy(), [1.0, 1.0])
