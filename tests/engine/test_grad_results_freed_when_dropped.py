"""The gradients ``grad()`` returns are freed as soon as the caller drops them, within the same step
of its task (Note [The future carries no gradient] in asyncgrad/engine/scope.py): the graph task's
future, which asyncio keeps until the awaiting step ends, holds none of them. With ``create_graph``
that frees the graph they lead to, anomaly mode's parent links included, as torch does
(torch's test_anomaly_assign_parent_cleanup)."""

from __future__ import annotations

import warnings
import weakref

import numpy as np

import asyncgrad as ag


class Double(ag.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return Scale.apply(g, x)  # recorded under create_graph: its node's anomaly parent is this one


class Scale(ag.Function):
    @staticmethod
    def forward(ctx, g, x):
        ctx.save_for_backward(g, x)
        return g * x * 2.0

    @staticmethod
    def backward(ctx, gg):
        g, x = ctx.saved_tensors
        return gg * x * 2.0, gg * g * 2.0


async def test_a_dropped_gradient_frees_its_graph_in_the_same_step(collector_off):
    x = ag.tensor(np.linspace(0.5, 1.5, 4), requires_grad=True)
    y = (x.exp() * x).sum()
    (g,) = await ag.autograd.grad(y, x, create_graph=True)
    refs = [weakref.ref(g), weakref.ref(g.grad_fn)]
    del g
    assert [ref() for ref in refs] == [None, None]


async def test_a_node_that_ran_in_anomaly_mode_is_freed_with_its_tensor(collector_off):
    """The nodes a create_graph backward records in anomaly mode link to the node that ran
    (Note [Anomaly parents] in graph/anomaly.py); once the gradients are dropped, that node goes
    with the last tensor that has it as grad_fn."""

    async def record() -> tuple[ag.Tensor, weakref.ref]:
        x = ag.tensor(np.linspace(0.5, 1.5, 4), requires_grad=True)
        t = Double.apply(x)
        with ag.autograd.detect_anomaly():
            grads = await ag.autograd.grad(t, x, ag.ones_like(t), create_graph=True)
        assert grads[0].grad_fn.metadata["parent_"] is t.grad_fn
        return t, weakref.ref(t.grad_fn)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # anomaly mode's own warning
        t, ref = await record()
    assert ref() is not None
    del t
    assert ref() is None
