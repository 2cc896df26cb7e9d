"""ag.autograd.graph: saved-tensor hooks, save_on_cpu, disable_saved_tensors_hooks,
allow_mutation_on_saved_tensors, against torch and finite differences."""

import numpy as np
import pytest

import asyncgrad as ag
from asyncgrad.autograd.graph import (
    allow_mutation_on_saved_tensors,
    save_on_cpu,
    saved_tensors_hooks,
)

torch = pytest.importorskip("torch")

X = np.array([0.3, -1.2, 2.0])


def f_np(x):
    return np.sum(np.sin(2 * x) * x * np.exp(x))


def fd_grad(x, eps=1e-6):
    g = np.zeros_like(x)
    for i in range(x.size):
        d = np.zeros_like(x)
        d[i] = eps
        g[i] = (f_np(x + d) - f_np(x - d)) / (2 * eps)
    return g


def program(lib, x):
    return ((x * 2).sin() * x * x.exp()).sum()


def run_with_hooks(lib, hooks_module, log):
    x = lib.tensor(X, dtype=lib.float64, requires_grad=True)

    def pack(t):
        log.append(("pack", tuple(t.shape), lib.is_grad_enabled()))
        return t.detach()

    def unpack(t):
        log.append(("unpack", tuple(t.shape)))
        return t

    with hooks_module.saved_tensors_hooks(pack, unpack):
        y = program(lib, x)
    return x, y


async def test_hooks_pack_and_unpack_as_torch_and_gradients_match_finite_differences():
    ag_log, t_log = [], []
    x, y = run_with_hooks(ag, ag.autograd.graph, ag_log)
    await y.backward()
    tx, ty = run_with_hooks(torch, torch.autograd.graph, t_log)
    ty.backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), fd_grad(X), rtol=1e-6)
    packs = [e for e in ag_log if e[0] == "pack"]
    assert packs and all(not grad for _, _, grad in packs), "pack runs with grad mode off, as torch"
    assert sum(e[0] == "unpack" for e in ag_log) == len(packs)
    assert sum(e[0] == "pack" for e in t_log) == len(packs)


async def test_second_order_through_packed_tensors_reaches_the_leaf():
    x = ag.tensor(X, dtype=ag.float64, requires_grad=True)
    with saved_tensors_hooks(lambda t: t.detach(), lambda t: t):
        y = (x * x * x.exp()).sum()
    (g,) = await ag.grad(y, x, create_graph=True)
    (gg,) = await ag.grad(g.sum(), x)
    tx = torch.tensor(X, requires_grad=True)
    (tg,) = torch.autograd.grad((tx * tx * tx.exp()).sum(), tx, create_graph=True)
    (tgg,) = torch.autograd.grad(tg.sum(), tx)
    np.testing.assert_allclose(gg.numpy(), tgg.numpy(), rtol=1e-12)


async def test_only_the_innermost_pair_applies_and_no_grad_packs_nothing():
    outer, inner = [], []
    x = ag.ones(3, requires_grad=True)
    with saved_tensors_hooks(lambda t: outer.append(1) or t.detach(), lambda t: t):
        with saved_tensors_hooks(lambda t: inner.append(1) or t.detach(), lambda t: t):
            y = x.sin()
        with ag.no_grad():
            x.exp()
    assert inner == [1] and outer == []
    await y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.cos(np.ones(3)))


async def test_packed_tensors_are_not_version_checked_as_torch():
    a = ag.ones(3, requires_grad=True)
    with saved_tensors_hooks(lambda t: t, lambda t: t):
        b = a * 2
        y = b * b
    b.add_(1)
    await y.sum().backward()
    ta = torch.ones(3, requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
        tb = ta * 2
        ty = tb * tb
    tb.add_(1)
    ty.sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), ta.grad.numpy())


async def test_in_place_op_packs_the_old_value():
    a = ag.tensor([0.5, 1.0], dtype=ag.float64, requires_grad=True)
    c = ag.tensor([3.0, -2.0], dtype=ag.float64, requires_grad=True)
    with saved_tensors_hooks(lambda t: t.detach(), lambda t: t):
        b = a * 1
        b.mul_(c)
    await b.sum().backward()
    np.testing.assert_allclose(c.grad.numpy(), [0.5, 1.0])  # the value b had before mul_
    np.testing.assert_allclose(a.grad.numpy(), [3.0, -2.0])


def _errors(lib):
    g = lib.autograd.graph
    x = lib.ones(3, requires_grad=True)
    found = []
    with g.saved_tensors_hooks(lambda t: t.detach(), lambda t: 3):
        y = (x * 2).sin()
    try:
        y.sum().backward()
    except Exception as e:
        found.append((type(e), str(e)))

    def modifies(t):
        t.add_(1)
        return t
    with g.saved_tensors_hooks(modifies, lambda t: t):
        try:
            (x * 2).sin()
        except Exception as e:
            found.append((type(e), str(e)))
    with g.disable_saved_tensors_hooks("no hooks here"):
        try:
            with g.saved_tensors_hooks(lambda t: t, lambda t: t):
                pass
        except Exception as e:
            found.append((type(e), str(e)))
    with g.saved_tensors_hooks(lambda t: t, lambda t: t):
        try:
            with g.disable_saved_tensors_hooks("not while hooks run"):
                pass
        except Exception as e:
            found.append((type(e), str(e)))
    return found


def test_errors_are_torchs():
    ours, theirs = _errors(ag), _errors(torch)
    assert len(ours) == len(theirs) == 4
    assert ours == theirs


async def test_save_on_cpu_round_trips_a_sim_device():
    x = ag.tensor(X, dtype=ag.float64, device="sim:0", requires_grad=True)
    with save_on_cpu(pin_memory=False):
        y = program(ag, x)
    node = y.grad_fn.next_functions[0][0]
    assert node.saved and all(s.packed[1].device.is_cpu for s in node.saved if s is not None)
    await y.backward()
    assert x.grad.device == x.device
    np.testing.assert_allclose(x.grad.cpu().numpy(), fd_grad(X), rtol=1e-6)


async def test_allow_mutation_on_saved_tensors_as_torch():
    with allow_mutation_on_saved_tensors() as ctx:
        a = ag.tensor(X, dtype=ag.float64, requires_grad=True)
        b = a.clone()
        out = (b ** 2).sum()
        b.mul_(3)
        await out.backward()
    assert len(ctx.cloned) == len(ctx.original) == len(ctx.tid_to_weakhandle) == 0  # cleared as the block ends
    with torch.autograd.graph.allow_mutation_on_saved_tensors():
        ta = torch.tensor(X, requires_grad=True)
        tb = ta.clone()
        tout = (tb ** 2).sum()
        tb.mul_(3)
        tout.backward()
    np.testing.assert_allclose(a.grad.numpy(), ta.grad.numpy())
    np.testing.assert_allclose(b.detach().numpy(), tb.detach().numpy())


async def test_allow_mutation_refuses_nesting_and_a_backward_outside():
    with allow_mutation_on_saved_tensors():
        with pytest.raises(RuntimeError, match="allow_mutation_on_saved_tensors contexts cannot be nested"):
            with allow_mutation_on_saved_tensors():
                pass
    with allow_mutation_on_saved_tensors():
        a = ag.ones(2, requires_grad=True)
        out = (a.clone() ** 2).sum()
    with pytest.raises(AssertionError, match="Trying to backward outside of the 'allow_mutation_on_saved_tensors'"):
        await out.backward()


async def test_a_task_created_inside_the_block_keeps_the_hooks_of_its_context():
    import asyncio
    packed = []
    x = ag.ones(3, requires_grad=True)
    started = asyncio.Event()

    async def forward():
        await started.wait()
        return x.sin()

    with saved_tensors_hooks(lambda t: packed.append(1) or t.detach(), lambda t: t):
        task = asyncio.create_task(forward())
    started.set()
    y = await task  # recorded after the block exited, in a context that holds the hooks
    assert packed == [1]
    await y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.cos(np.ones(3)))


async def test_save_on_cpu_keeps_no_reference_cycle_on_the_cpu():
    import gc
    import weakref
    x = ag.tensor(X, dtype=ag.float64, requires_grad=True)
    with save_on_cpu():
        y = x.exp()  # ExpBackward0 saves its output
    node = weakref.ref(y.grad_fn)
    gc.disable()
    try:
        del y
        assert node() is None, "freed by reference counting, without the cycle collector"
    finally:
        gc.enable()
