"""A custom Function that sets ``ctx._is_pure_view`` returns a plain view (Note [Views a Function
returns] in autograd/function.py): in place on it replays the view from its base as torch does,
one tensor in and one out only; against torch."""

from __future__ import annotations

import numpy as np
import pytest

import asyncgrad as ag

VALUES = np.array([1.0, 2.0, 3.0])


def _narrowing(lib, pure):
    calls = []

    class Narrow(lib.autograd.Function):
        @staticmethod
        def forward(ctx, a, extra=None):
            ctx._is_pure_view = pure
            return a.narrow(0, 0, 2)

        @staticmethod
        def backward(ctx, g):
            calls.append(1)
            return lib.cat([g, g.new_zeros(1)]) * 10, None

    return Narrow, calls


@pytest.mark.parametrize("pure", [True, False])
async def test_in_place_on_a_pure_view_replays_the_view(torch, pure):
    results = {}
    for lib in (ag, torch):
        Narrow, calls = _narrowing(lib, pure)
        a = lib.tensor(VALUES, requires_grad=True)
        x = a * 1
        view = Narrow.apply(x)
        if not pure:
            with pytest.raises(RuntimeError, match="This view was created inside a custom Function"):
                view.mul_(3)
            continue
        view.mul_(3)
        assert view.grad_fn.name() == "AsStridedBackward0" and x.grad_fn.name().endswith("CopySlices")
        loss = (x * x).sum()
        done = loss.backward()
        if lib is ag:
            await done
        results[lib.__name__] = (a.grad.tolist(), len(calls))
    if pure:
        assert results["asyncgrad"] == results["torch"] == ([18.0, 36.0, 6.0], 0)


async def test_a_pure_view_that_is_not_modified_keeps_the_custom_backward(torch):
    for lib in (ag, torch):
        Narrow, calls = _narrowing(lib, True)
        a = lib.tensor(VALUES, requires_grad=True)
        done = Narrow.apply(a * 1).sum().backward()
        if lib is ag:
            await done
        assert a.grad.tolist() == [10.0, 10.0, 0.0] and len(calls) == 1


@pytest.mark.parametrize("second", ["tensor", "number"])
def test_a_pure_view_takes_one_tensor(torch, second):
    for lib in (ag, torch):
        Narrow, _ = _narrowing(lib, True)
        a = lib.tensor(VALUES, requires_grad=True) * 1
        if second == "number":
            assert Narrow.apply(a, 2.0).shape == (2,)
            continue
        with pytest.raises(RuntimeError, match="Pure view custom Function can only have one input Tensor and one "
                                               "output Tensor"):
            Narrow.apply(a, a.clone())


def test_in_place_on_a_pure_view_of_a_leaf_is_refused(torch):
    for lib in (ag, torch):
        Narrow, _ = _narrowing(lib, True)
        view = Narrow.apply(lib.tensor(VALUES, requires_grad=True))
        with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad is being used in an "
                                               "in-place operation"):
            view.add_(1)


def test_a_view_made_to_require_grad_is_refused_as_a_view_of_a_leaf(torch):
    """torch checks the view before the leaf: a view of a plain leaf given requires_grad_()."""
    for lib in (ag, torch):
        view = lib.zeros(3)[:2]
        view.requires_grad_()
        with pytest.raises(RuntimeError, match="^a view of a leaf Variable that requires grad is being used"):
            view.add_(1)
