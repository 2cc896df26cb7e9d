"""ag.autograd as torch.autograd: the namespace, ag.autograd.graph's edges, multi-grad hooks,
increment_version, and torch's texts for hooks, grad assignment and deepcopy."""

import copy
import subprocess
import sys

import numpy as np
import pytest

import asyncgrad as ag

torch = pytest.importorskip("torch")


def test_the_namespace_holds_torch_autograd_names():
    import asyncgrad.autograd as agd
    assert agd.grad is ag.grad and agd.backward is ag.backward and agd.Function is ag.Function
    assert agd.functional is ag.functional and agd.gradcheck is ag.gradcheck and agd.gradgradcheck is ag.gradgradcheck
    assert agd.detect_anomaly is ag.detect_anomaly and agd.set_detect_anomaly is ag.set_detect_anomaly
    assert agd.no_grad is ag.no_grad and agd.enable_grad is ag.enable_grad
    assert agd.set_grad_enabled is ag.set_grad_enabled
    assert agd.graph.Node is ag.Node
    for name in ("GradientEdge", "get_gradient_edge", "saved_tensors_hooks", "save_on_cpu",
                 "disable_saved_tensors_hooks", "allow_mutation_on_saved_tensors", "register_multi_grad_hook",
                 "increment_version"):
        assert hasattr(agd.graph, name) and hasattr(torch.autograd.graph, name), name
    for name in ("Function", "backward", "grad", "gradcheck", "gradgradcheck", "detect_anomaly",
                 "set_detect_anomaly", "no_grad", "enable_grad", "set_grad_enabled", "functional", "graph"):
        assert hasattr(torch.autograd, name) and name in dir(agd), name
    with pytest.raises(AttributeError, match="has no attribute 'nothing_here'"):
        agd.nothing_here  # noqa: B018
    from asyncgrad.autograd import grad  # the from-import form
    assert grad is ag.grad


def test_importing_the_graph_module_first_works_in_a_fresh_interpreter():
    code = "import asyncgrad.autograd.graph as g; import asyncgrad.autograd as a; print(g.get_gradient_edge, a.grad)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "get_gradient_edge" in out.stdout


async def test_gradient_edges_as_inputs_and_outputs_as_torch():
    x = ag.tensor([0.5, -1.0, 2.0], dtype=ag.float64, requires_grad=True)
    h = x.exp()
    y = (h * h.sin()).sum()
    edge_h = ag.autograd.graph.get_gradient_edge(h)
    edge_x = ag.autograd.graph.get_gradient_edge(x)
    assert edge_h.node is h.grad_fn and edge_x.node.name() == "AccumulateGrad"
    gh, gx = await ag.grad(y, (edge_h, edge_x), retain_graph=True)
    (gx2,) = await ag.grad(y, x, retain_graph=True)
    np.testing.assert_allclose(gx.numpy(), gx2.numpy())
    # an edge as output, with its gradient given: the rest of the chain rule
    (gx3,) = await ag.grad(edge_h, x, grad_outputs=gh)
    np.testing.assert_allclose(gx3.numpy(), gx.numpy())
    tx = torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64, requires_grad=True)
    th = tx.exp()
    ty = (th * th.sin()).sum()
    tgh, tgx = torch.autograd.grad(ty, (torch.autograd.graph.get_gradient_edge(th),
                                        torch.autograd.graph.get_gradient_edge(tx)))
    np.testing.assert_allclose(gh.numpy(), tgh.numpy(), rtol=1e-12)
    np.testing.assert_allclose(gx.numpy(), tgx.numpy(), rtol=1e-12)
    with pytest.raises(RuntimeError, match="It is not possible to get the gradient edge for a Tensor that does"):
        ag.autograd.graph.get_gradient_edge(ag.ones(2))


async def test_multi_grad_hook_all_and_any_as_torch():
    def run(lib):
        a = lib.ones(2, 3, requires_grad=True)
        b = lib.ones(2, 3, requires_grad=True)
        c, d = a * b, a * b
        seen = []
        lib.autograd.graph.register_multi_grad_hook((a, b, c, d), lambda gs: seen.append([g is not None for g in gs]))
        anys = []
        handle = lib.autograd.graph.register_multi_grad_hook((a, b), lambda g: anys.append(tuple(g.shape)),
                                                             mode="any")
        return a, c, seen, anys, handle

    a, c, seen, anys, handle = run(ag)
    await c.sum().backward(retain_graph=True)
    await c.sum().backward(inputs=(a,), retain_graph=True)
    handle.remove()
    await c.sum().backward()
    ta, tc, tseen, tanys, thandle = run(torch)
    tc.sum().backward(retain_graph=True)
    tc.sum().backward(inputs=(ta,), retain_graph=True)
    thandle.remove()
    tc.sum().backward()
    assert seen == tseen == [[True, True, True, False], [True, False, True, False], [True, True, True, False]]
    assert anys == tanys == [(2, 3), (2, 3)]
    with pytest.raises(ValueError, match=r"Expects mode to be one of \('all', 'any'\) but got some"):
        ag.autograd.graph.register_multi_grad_hook((a,), print, mode="some")


async def test_increment_version_makes_saved_tensors_refuse():
    x = ag.ones(3, requires_grad=True)
    y = x * 1
    z = y * y
    v = y._version
    ag.autograd.graph.increment_version([y])
    assert y._version == v + 1
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        await z.sum().backward()


def test_hook_texts_as_torch():
    """A plain test: with no loop running, backward() runs at once, as in torch."""
    def post(lib, value):
        x = lib.ones(2, requires_grad=True)
        x.register_post_accumulate_grad_hook(lambda t: value(lib, t))
        with pytest.raises(Exception) as info:
            (x * 2).sum().backward()
        return type(info.value), str(info.value)

    for value in (lambda lib, t: 5, lambda lib, t: t * 2):
        assert post(ag, value) == post(torch, value)
    x = ag.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="^can't assign Variable as its own grad$"):
        x.grad = x


def test_deepcopy_copies_value_and_grad_not_hooks():
    x = ag.tensor([1.0, 2.0], requires_grad=True)
    x.grad = ag.tensor([0.5, 0.5])
    x.register_hook(lambda g: g * 100)
    y = copy.deepcopy(x)
    assert y.requires_grad and y.is_leaf and y._extra is None or y._extra.hooks is None
    np.testing.assert_allclose(y.grad.numpy(), [0.5, 0.5])
    y.grad = None
    (y * 1).sum().backward()
    np.testing.assert_allclose(y.grad.numpy(), [1.0, 1.0])  # the hook (x100) stayed with x
    y.data[0] = 7.0
    assert x.detach().numpy()[0] == 1.0
    p = ag.nn.Parameter(ag.ones(2))
    p.grad = ag.ones(2)
    p.register_hook(lambda g: g * 100)
    q = copy.deepcopy(p)
    assert type(q) is ag.nn.Parameter and q.grad is None and q.requires_grad  # torch's Parameter.__deepcopy__
    tp = torch.nn.Parameter(torch.ones(2))
    tp.grad = torch.ones(2)
    assert copy.deepcopy(tp).grad is None
    with pytest.raises(RuntimeError, match="Only Tensors created explicitly by the user"):
        copy.deepcopy(x * 2)


def test_backward_inputs_may_be_gradient_edges_as_torch():
    """A plain test: with no loop running, backward() runs at once, as in torch."""
    def run(lib):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        w = lib.tensor([3.0, 4.0], requires_grad=True)
        (x * w).sum().backward(inputs=[lib.autograd.graph.get_gradient_edge(x)])
        return x.grad.tolist(), w.grad

    assert run(ag) == run(torch) == ([3.0, 4.0], None)
