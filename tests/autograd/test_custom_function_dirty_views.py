"""A custom Function's mark_dirty on views, checked as torch's current tests check it (Note [Custom
Function outputs] in asyncgrad/autograd/function.py): an output that is a view of an intermediate
marked dirty is refused ("received a tensor that was not an input"); a dirty input that is an
output of a multi-output op (split_with_sizes, unbind) is refused with torch's words for an
in-place op on such a view, before the view-of-a-leaf check; a plain dirty view still works."""

from __future__ import annotations

import pytest

import asyncgrad as ag


def _functions(lib):
    class ViewOfIntermediate(lib.autograd.Function):
        @staticmethod
        def forward(ctx, inp):
            out = inp.clone().view_as(inp)
            ctx.mark_dirty(out)
            return out

        @staticmethod
        def backward(ctx, g):
            return g

    class AddOne(lib.autograd.Function):
        @staticmethod
        def forward(ctx, inp):
            inp.add_(1)
            ctx.mark_dirty(inp)
            return inp

        @staticmethod
        def backward(ctx, g):
            return g

    return ViewOfIntermediate, AddOne


CASES = {
    "view of an intermediate": lambda lib, f: f[0].apply(lib.tensor([1.0], requires_grad=True).clone()),
    "split of a leaf": lambda lib, f: f[1].apply(
        lib.tensor([1.0, 2.0], requires_grad=True).split_with_sizes([1, 1])[0]),
    "split of a non-leaf": lambda lib, f: f[1].apply(
        lib.tensor([1.0, 2.0], requires_grad=True).clone().split_with_sizes([1, 1], dim=0)[1]),
    "unbind": lambda lib, f: f[1].apply(lib.tensor([1.0, 2.0], requires_grad=True).clone().unbind(0)[0]),
    "view of a leaf": lambda lib, f: f[1].apply(lib.tensor([1.0, 2.0], requires_grad=True).view(2)),
}


@pytest.mark.parametrize("case", list(CASES))
def test_refused_in_torchs_words(torch, case):
    with pytest.raises(RuntimeError) as expected:
        CASES[case](torch, _functions(torch))
    with pytest.raises(RuntimeError) as got:
        CASES[case](ag, _functions(ag))
    assert str(got.value) == str(expected.value)


async def test_a_dirty_view_of_a_non_leaf_still_works():
    a = ag.tensor([1.0, 2.0], requires_grad=True)
    base = a.clone()
    out = _functions(ag)[1].apply(base.view(2))
    assert base.tolist() == [2.0, 3.0]
    await (out * 3).sum().backward()
    assert a.grad.tolist() == [3.0, 3.0]
