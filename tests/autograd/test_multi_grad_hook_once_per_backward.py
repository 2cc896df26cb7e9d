"""``register_multi_grad_hook(mode="any")`` fires once in every backward, also in one that follows
a failed backward (whose graph task runs no final callback and is freed at once)."""

import pytest

import asyncgrad as ag
from asyncgrad.autograd import Function


class _FailsOnce(Function):
    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, grad):
        raise RuntimeError("error message")


async def test_any_hook_fires_in_each_backward_after_failures():
    a = ag.rand(3, requires_grad=True)
    b = ag.rand(3, requires_grad=True)
    calls = []
    ag.autograd.graph.register_multi_grad_hook((a, b), lambda g: calls.append(g.shape), mode="any")
    for i in range(50):
        # b's AccumulateGrad runs before the failing node (leaves first), so the hook fires in it
        with pytest.raises(RuntimeError, match="error message"):
            await (_FailsOnce.apply(a) * b).sum().backward()
        await (a * b).sum().backward()
        assert len(calls) == 2 * (i + 1), f"iteration {i}: the hook was skipped in a later backward"
