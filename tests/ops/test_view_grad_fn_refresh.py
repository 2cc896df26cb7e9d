"""A view's grad_fn after its memory changed in place through an op that recorded nothing for it
(no_grad mode, a ``detach()`` of the base or of a view): torch's AsStridedBackward0, with the
same gradients (Note [Views after an untracked in-place] in ops/inplace.py; fuzzer seeds 69,
1031, 1200, 1887, 2140, 2730, 2792)."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

import asyncgrad as ag

DEVICES = ["cpu", "sim:0"]
A = np.array([1.0, -2.0, 3.0])


def _name(lib: Any, t: Any) -> str | None:
    if t.grad_fn is None:
        return None
    return type(t.grad_fn).__name__ if lib is not ag else t.grad_fn.name()


def _t(lib: Any, device: str, value: np.ndarray, requires_grad: bool = False) -> Any:
    if lib is ag:
        return ag.tensor(value, device=device, requires_grad=requires_grad)
    return lib.tensor(value, requires_grad=requires_grad)


def base_changed_in_no_grad(lib, dev):
    a = _t(lib, dev, A, True)
    b = a * 1
    v = b[:2]
    with lib.no_grad():
        b.add_(1)
    return a, v


def other_view_changed_in_no_grad(lib, dev):
    a = _t(lib, dev, A, True)
    b = a * 1
    v = b[:2]
    with lib.no_grad():
        b[1:].add_(1)
    return a, v


def detach_of_base_changed(lib, dev):
    a = _t(lib, dev, A, True)
    b = a * 1
    v = b.unsqueeze(0)
    b.detach().add_(1)
    return a, v


def view_of_detached_view_changed(lib, dev):  # seed 1887
    a = _t(lib, dev, A, True)
    v = (a * 1)[:2]
    v.detach()[0:1].add_(1)
    return a, v


def detach_changed_by_tracked_op(lib, dev):  # seed 69: the in-place records on the detach()
    a = _t(lib, dev, A, True)
    v = a.unsqueeze(0)
    d = v.detach()
    d.sub_(v)
    return a, v


def view_of_detached_leaf_after_view_changed(lib, dev):  # seed 2730: a detach() made a leaf
    a = _t(lib, dev, A, True)
    b = a * 1
    w = b.detach().requires_grad_()
    v = w.unsqueeze(0)
    b.unsqueeze(0).mul_(1.5)
    return w, v


def untouched_no_grad_view(lib, dev):  # nothing moved: the view keeps its node
    a = _t(lib, dev, A, True)
    b = a * 1
    v = b[:2]
    c = b.detach().clone()
    c.add_(1)
    return a, v


CASES = [base_changed_in_no_grad, other_view_changed_in_no_grad, detach_of_base_changed,
         view_of_detached_view_changed, detach_changed_by_tracked_op, view_of_detached_leaf_after_view_changed,
         untouched_no_grad_view]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("program", CASES, ids=lambda p: p.__name__)
async def test_view_grad_fn_and_gradient_are_torchs(program: Callable, device: str, torch: Any) -> None:
    ta, tv = program(torch, "cpu")
    aa, av = program(ag, device)
    assert _name(ag, av) == _name(torch, tv)
    expected = program is untouched_no_grad_view or _name(torch, tv) == "AsStridedBackward0"
    assert expected, "the case no longer shows what it is for"
    weights = np.arange(1.0, 1.0 + tv.numel()).reshape(tuple(tv.shape))
    (tv * torch.tensor(weights)).sum().backward()
    await (av * ag.tensor(weights, device=device)).sum().backward()
    np.testing.assert_allclose(aa.grad.cpu().numpy(), ta.grad.numpy(), rtol=1e-12)
