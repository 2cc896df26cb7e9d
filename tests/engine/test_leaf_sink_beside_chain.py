"""Note [A leaf's sink beside the chain] (engine/worker.py): a node whose second edge is a leaf's
AccumulateGrad runs that sink at once and chains its first consumer, and nothing about the order,
the gradients or their ownership changes."""

from __future__ import annotations

import numpy as np
import pytest

import asyncgrad as ag
from asyncgrad.engine import engine as engine_module
from asyncgrad.engine import worker as worker_module
from asyncgrad.ops._node import OpNode
from asyncgrad.variable.accumulate import AccumulateGrad


def _mlp(lib, params, x, target):
    w1, b1, w2, b2 = params
    h = (x @ w1 + b1).relu()
    return lib.nn.functional.cross_entropy(h @ w2 + b2, target)


def _arrays(rows=6, sizes=(5, 4, 3)):
    rng = np.random.default_rng(7)
    params = []
    for fan_in, fan_out in zip(sizes, sizes[1:]):
        params += [rng.standard_normal((fan_in, fan_out)), rng.standard_normal(fan_out)]
    return params, rng.standard_normal((rows, sizes[0])), rng.integers(0, sizes[-1], rows)


async def _run(monkeypatch, chain_step):
    """Each parameter's gradient, and the nodes run, by name, in order (sinks named by their leaf)."""
    monkeypatch.setattr(worker_module, "CHAIN_STEP", chain_step)
    arrays, x, target = _arrays()
    params = [ag.tensor(a, requires_grad=True) for a in arrays]
    names = {id(p): f"leaf{i}" for i, p in enumerate(params)}
    order = []
    op_apply, sink_apply = OpNode.apply, AccumulateGrad.apply

    def op_recorded(self, grads, create_graph):
        order.append(type(self).__name__)
        return op_apply(self, grads, create_graph)

    def sink_recorded(self, grads, create_graph):
        order.append(names[id(self.variable)])
        return sink_apply(self, grads, create_graph)

    monkeypatch.setattr(OpNode, "apply", op_recorded)
    monkeypatch.setattr(AccumulateGrad, "apply", sink_recorded)
    await _mlp(ag, params, ag.from_numpy(x), ag.from_numpy(target)).backward()
    monkeypatch.setattr(OpNode, "apply", op_apply)
    monkeypatch.setattr(AccumulateGrad, "apply", sink_apply)
    return [p.grad.numpy().copy() for p in params], order


async def test_same_gradients_and_order_as_routing_every_output(monkeypatch):
    with_step, order_with = await _run(monkeypatch, True)
    without, order_without = await _run(monkeypatch, False)
    assert order_with == order_without
    assert order_with.index("leaf3") < order_with.index("MmBackward0")  # a bias's sink before its input's node
    for a, b in zip(with_step, without):
        assert a.tobytes() == b.tobytes()


async def test_the_sinks_skip_routing(monkeypatch):
    """The test above can fail: with the chain step on, a layer's sinks are not routed."""
    routed = []
    real = engine_module.Engine.route

    def counting(self, graph_task, node, outputs, chain=None):
        routed.append(node.name())
        return real(self, graph_task, node, outputs, chain)

    monkeypatch.setattr(engine_module.Engine, "route", counting)
    await _run(monkeypatch, True)
    assert "AddBackward0" not in routed and "MmBackward0" not in routed, routed
    routed.clear()
    await _run(monkeypatch, False)
    assert routed.count("AddBackward0") == 2 and routed.count("MmBackward0") == 2, routed  # the first: (None, sink)


async def test_a_weight_gradient_is_still_stolen():
    """The sink takes the product's own buffer, as a queued one does: the path holds no extra
    reference (Note [Recycled product buffers] in devices/buffers.py: a large product is a slab's view)."""
    x = ag.ones(64, 300, dtype=ag.float64)
    w = ag.tensor(np.full((300, 256), 0.5), requires_grad=True)
    b = ag.zeros(256, dtype=ag.float64, requires_grad=True)
    await (x.T @ (x @ w + b)).relu().sum().backward()
    assert type(w.grad.numpy().base).__name__ == "_Slab"


async def test_a_sink_with_hooks_is_queued_and_its_hooks_run(monkeypatch):
    arrays, x, target = _arrays()
    params = [ag.tensor(a, requires_grad=True) for a in arrays]
    seen = []
    params[1].register_hook(lambda g: seen.append("tensor hook"))
    params[3].register_post_accumulate_grad_hook(lambda p: seen.append("post-accumulate hook"))
    await _mlp(ag, params, ag.from_numpy(x), ag.from_numpy(target)).backward()
    assert seen == ["post-accumulate hook", "tensor hook"]


async def test_gradients_match_torch(torch):
    arrays, x, target = _arrays()
    params = [ag.tensor(a, requires_grad=True) for a in arrays]
    await _mlp(ag, params, ag.from_numpy(x), ag.from_numpy(target)).backward()
    expected = [torch.tensor(a, requires_grad=True) for a in arrays]
    _mlp(torch, expected, torch.from_numpy(x), torch.from_numpy(target)).backward()
    for got, want in zip(params, expected):
        np.testing.assert_allclose(got.grad.numpy(), want.grad.numpy(), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("create_graph", [False, True])
async def test_second_order_through_the_sinks(create_graph):
    """With ``create_graph`` the sinks take recorded gradients; the second order is torch's formula's."""
    w = ag.tensor([[0.5, -1.0], [2.0, 0.25]], requires_grad=True)
    b = ag.tensor([0.1, -0.2], requires_grad=True)
    x = ag.tensor([[1.0, 2.0], [3.0, -1.0]])
    loss = ((x @ w + b) ** 2).sum()
    await loss.backward(create_graph=create_graph)
    expected = 2 * x.numpy().T @ (x.numpy() @ w.detach().numpy() + b.detach().numpy())
    np.testing.assert_allclose(w.grad.detach().numpy(), expected)
    assert (w.grad.grad_fn is not None) is create_graph


def test_a_sink_is_made_as_node_makes_a_node():
    """AccumulateGrad sets Node.__init__'s slots itself: the same values as Node.__init__ with no edges."""
    leaf = ag.ones(2, requires_grad=True)
    sink = AccumulateGrad(leaf)
    plain = AccumulateGrad.__new__(AccumulateGrad)
    ag.autograd.graph.Node.__init__(plain, ())
    for slot in ("edge_fns", "edge_nrs", "topological_nr", "_hooks", "_metadata", "work", "saved"):
        assert getattr(sink, slot) == getattr(plain, slot), slot
    assert sink.sequence_nr >= (1 << 64) - 1 and sink.sequence_nr - ((1 << 64) - 1) < plain.sequence_nr


@pytest.mark.parametrize("chain_step", [True, False])
async def test_a_gradient_passed_through_to_two_sinks_is_stolen_once(chain_step, monkeypatch):
    """A node that hands its own input gradient to both leaves: the sink run first copies it (the other
    still sees it), the other steals it, as when route queues both (torch's test_no_grad_copy)."""
    monkeypatch.setattr(worker_module, "CHAIN_STEP", chain_step)

    class Both(ag.autograd.Function):
        seen = None

        @staticmethod
        def forward(ctx, a, b):
            return a + b

        @staticmethod
        def backward(ctx, grad):
            Both.seen = grad.data_ptr()
            return grad, grad

    a = ag.randn(5, 6, requires_grad=True)
    b = ag.randn(5, 6, requires_grad=True)
    await Both.apply(a, b)[1][0].backward()
    assert (a.grad.data_ptr() == Both.seen, b.grad.data_ptr() == Both.seen) == (True, False)
