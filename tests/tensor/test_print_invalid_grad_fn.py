"""A view made in no_grad whose data changed in place afterwards has a grad_fn torch cannot read:
torch's printing catches the error and shows ``grad_fn=<Invalid>``, and so does asyncgrad's (the
node itself is still torch's ``Error``, which refuses the backward)."""

from __future__ import annotations

import pytest

import asyncgrad as ag


def test_view_modified_in_no_grad_prints_invalid(torch):
    for lib in (torch, ag):
        a = lib.ones(1, requires_grad=True)
        with lib.no_grad():
            b = a[:]
            b *= 2
        assert repr(b).replace("asyncgrad", "torch") == "tensor([2.], grad_fn=<Invalid>)"


def test_view_whose_base_changed_with_grad_prints_invalid():
    a = ag.ones(2, requires_grad=True).clone()
    with ag.no_grad():
        v = a[:1]
    a.mul_(2)
    assert repr(v) == "tensor([2.], grad_fn=<Invalid>)"
    assert v.grad_fn.name() == "Error"
    with pytest.raises(RuntimeError, match="A view was created in no_grad mode"):
        v.sum().backward_sync()


def test_other_tensors_print_their_node():
    a = ag.ones(1, requires_grad=True)
    assert repr(a.clone()) == "tensor([1.], grad_fn=<CloneBackward0>)"

    class Func(ag.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, g):
            return g

    assert repr(Func.apply(a)) == "tensor([1.], grad_fn=<FuncBackward>)"
