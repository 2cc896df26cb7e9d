"""The engine's behaviour where torch.autograd's is subtle, checked side by side with torch.

* Which nodes refuse a second backward once a backward without ``retain_graph`` freed them
  (Note [Which nodes refuse a second pass] in graph/node.py).
* What runs of a root that ``inputs=`` or ``grad()`` does not need (Note [A root that leads to
  no input] in engine/engine.py).
* ``backward(inputs=[t])`` with ``t`` a non-leaf root.

Each case is one function written against what both libraries share (``lib`` is ``torch`` or
``asyncgrad``), run in both, the outcomes compared.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import asyncgrad as ag
from asyncgrad.autograd.graph import SECOND_BACKWARD

X = np.array([[0.5, -1.2, 2.0], [1.5, 0.7, -0.3]])
C = np.array([[1.1, 0.4, -0.9], [0.2, 1.3, 0.8]])


def _setitem_number(lib, y, c):
    y[1] = 2.5


def _setitem_row(lib, y, c):
    y[0] = c[1]


def _view_mul_number(lib, y, c):
    y[:, 1].mul_(2.0)


def _view_add_number(lib, y, c):
    y.transpose(0, 1).add_(2.0)


# name -> (f(lib, x, c) giving the root, or mutating y = x.clone() when it returns None; torch raises?)
CASES = {
    # nodes whose torch twin saved a wrapped number, indices, or is a CopySlices: refused
    "mul by a number": (lambda lib, x, c: x * 2.0, True),
    "number times": (lambda lib, x, c: 2.0 * x, True),
    "div by a number": (lambda lib, x, c: x / 2.0, True),
    "mul_ by a number": (lambda lib, x, c: x.clone().mul_(2.0), True),
    "advanced index": (lambda lib, x, c: x[lib.tensor([0, 1, 1])], True),
    "mask index": (lambda lib, x, c: x[c > 0.5], True),
    "setitem a number": (_setitem_number, True),
    "setitem a row": (_setitem_row, True),
    "view mul_ a number": (_view_mul_number, True),
    "view add_ a number": (_view_add_number, True),
    # nodes with saved tensors: refused
    "exp": (lambda lib, x, c: x.exp(), True),
    "mul by a tensor": (lambda lib, x, c: x * c, True),
    # nodes that kept only numbers and sizes: run again
    "add a number": (lambda lib, x, c: x + 2.0, False),
    "sub a number": (lambda lib, x, c: x - 2.0, False),
    "add with alpha": (lambda lib, x, c: lib.add(x, c, alpha=0.5), False),
    "basic index": (lambda lib, x, c: x[1], False),
    "slice": (lambda lib, x, c: x[:, 1:], False),
    "sum": (lambda lib, x, c: x.sum(0), False),
    "reshape": (lambda lib, x, c: x.reshape(3, 2), False),
    "expand": (lambda lib, x, c: x[:1].expand(4, 3), False),
    "add_ a number": (lambda lib, x, c: x.clone().add_(2.0), False),
    "fill_": (lambda lib, x, c: x.clone().fill_(1.5), False),
}


def _root(lib, f, x, c):
    y = x.clone()
    out = f(lib, y if f in (_setitem_number, _setitem_row, _view_mul_number, _view_add_number) else x, c)
    return y if out is None else out


def _torch_twice(torch, f) -> tuple[np.ndarray, str | None]:
    x = torch.tensor(X, requires_grad=True)
    y = _root(torch, f, x, torch.tensor(C))
    y.sum().backward()
    first = x.grad.numpy().copy()
    try:
        y.sum().backward()
    except RuntimeError as exc:
        return first, str(exc)
    return first, None


async def _ag_twice(f) -> tuple[np.ndarray, str | None]:
    x = ag.tensor(X, requires_grad=True)
    y = _root(ag, f, x, ag.tensor(C))
    await y.sum().backward()
    first = x.grad.numpy().copy()
    try:
        await y.sum().backward()
    except RuntimeError as exc:
        return first, str(exc)
    return first, None


@pytest.mark.parametrize("name", list(CASES))
async def test_a_second_backward_is_refused_exactly_where_torch_refuses(name, torch):
    f, refused = CASES[name]
    torch_grad, torch_error = _torch_twice(torch, f)
    grad, error = await _ag_twice(f)
    np.testing.assert_allclose(grad, torch_grad, rtol=1e-12)
    assert (torch_error is not None) == refused  # the table says what torch does
    assert error == torch_error
    if refused:
        assert error == SECOND_BACKWARD


@pytest.mark.parametrize("name", [n for n, (_, refused) in CASES.items() if refused])
async def test_retain_graph_keeps_every_node_runnable(name, torch):
    f, _ = CASES[name]
    x, tx = ag.tensor(X, requires_grad=True), torch.tensor(X, requires_grad=True)
    y, ty = _root(ag, f, x, ag.tensor(C)), _root(torch, f, tx, torch.tensor(C))
    for _ in range(2):
        await y.sum().backward(retain_graph=True)
        ty.sum().backward(retain_graph=True)
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12)
    await y.sum().backward()  # the last pass frees; nothing was freed before it
    with pytest.raises(RuntimeError, match=r"backward through the graph a second time"):
        await y.sum().backward()


async def test_grad_refuses_a_freed_number_node_too(torch):
    x = ag.tensor(X, requires_grad=True)
    y = x * 3.0
    (g,) = await ag.grad(y.sum(), x)
    np.testing.assert_allclose(g.numpy(), np.full(X.shape, 3.0))
    with pytest.raises(RuntimeError) as info:
        await ag.grad(y.sum(), x)
    tx = torch.tensor(X, requires_grad=True)
    ty = tx * 3.0
    torch.autograd.grad(ty.sum(), tx)
    with pytest.raises(RuntimeError) as torch_info:
        torch.autograd.grad(ty.sum(), tx)
    assert str(info.value) == str(torch_info.value)


# --------------------------------------------------------------------------- roots inputs= does not need
def _graph(lib, calls):
    """x -> y = exp(x) -> u = 2y (and v = sum(u) * w); every tensor retains and hooks report."""
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    w = lib.tensor([3.0], requires_grad=True)
    y = x.exp()
    u = y * 2
    v = u.sum() * w
    for t, n in ((y, "y"), (u, "u")):
        t.retain_grad()
        t.grad_fn.register_prehook(lambda g, n=n: calls.append(n + " pre"))
        t.grad_fn.register_hook(lambda gi, go, n=n: calls.append(n + " post"))
        t.register_hook(lambda g, n=n: calls.append(n + " tensor hook"))
    return x, w, y, u, v


def _state(*ts):
    return [None if t.grad is None else t.grad.detach().numpy().tolist() for t in ts]


async def _both(torch, run_torch, run_ag):
    """(calls, state) for torch and asyncgrad running the same steps on ``_graph``."""
    tcalls: list[str] = []
    acalls: list[str] = []
    tstate = run_torch(*_graph(torch, tcalls), tcalls)
    astate = await run_ag(*_graph(ag, acalls), acalls)
    return (tcalls, tstate), (acalls, astate)


async def test_a_single_root_that_leads_to_no_input_runs_its_tensor_hooks_only(torch):
    """fuzzer: retain_grad of a root that ``inputs=`` does not need. torch runs the root's tensor
    pre-hooks (its hook and retain_grad) and skips its node."""
    def run_torch(x, w, y, u, v, calls):
        u.backward(torch.ones(2), inputs=[w], retain_graph=True)
        return _state(x, w, y, u)

    async def run_ag(x, w, y, u, v, calls):
        await u.backward(ag.ones(2), inputs=[w], retain_graph=True)
        return _state(x, w, y, u)

    t, a = await _both(torch, run_torch, run_ag)
    assert t == (["u tensor hook"], [None, None, None, [1.0, 1.0]])
    assert a == t


async def test_grad_of_a_root_that_leads_to_no_input_runs_its_tensor_hooks_only(torch):
    def run_torch(x, w, y, u, v, calls):
        u.backward(torch.ones(2), retain_graph=True)
        calls.clear()
        out = torch.autograd.grad([u], [w], [torch.ones(2)], allow_unused=True, retain_graph=True)
        return [out[0] is None] + _state(x, y, u)

    async def run_ag(x, w, y, u, v, calls):
        await u.backward(ag.ones(2), retain_graph=True)
        calls.clear()
        out = await ag.grad([u], [w], [ag.ones(2)], allow_unused=True, retain_graph=True)
        return [out[0] is None] + _state(x, y, u)

    t, a = await _both(torch, run_torch, run_ag)
    assert t[0] == ["u tensor hook"] and t[1][-1] == [2.0, 2.0]
    assert a[0] == t[0]
    assert a[1][0] == t[1][0]
    for got, want in zip(a[1][1:], t[1][1:]):
        np.testing.assert_allclose(got, want, rtol=1e-6)


async def test_several_roots_that_lead_to_no_input_run_nothing(torch):
    def run_torch(x, w, y, u, v, calls):
        torch.autograd.backward([u, y], [torch.ones(2), torch.ones(2)], inputs=[w], retain_graph=True)
        torch.autograd.backward([u, v], [torch.ones(2), torch.ones(1)], inputs=[w], retain_graph=True)
        return _state(x, w, y, u)

    async def run_ag(x, w, y, u, v, calls):
        await ag.backward([u, y], [ag.ones(2), ag.ones(2)], inputs=[w], retain_graph=True)
        await ag.backward([u, v], [ag.ones(2), ag.ones(1)], inputs=[w], retain_graph=True)
        return _state(x, w, y, u)

    t, a = await _both(torch, run_torch, run_ag)
    assert t[0] == [] and t[1][0] is None and t[1][2] is None and t[1][3] is None
    assert a[0] == t[0]
    assert a[1][0] is None and a[1][2] is None and a[1][3] is None
    np.testing.assert_allclose(a[1][1], t[1][1], rtol=1e-6)  # float32 here


# --------------------------------------------------------------------------- inputs=[a non-leaf root]
async def test_backward_into_a_non_leaf_root_runs_its_node_and_retains_its_grad(torch):
    """torch marks the root's node needed (it is an ``inputs=`` node): its hooks and node run,
    ``.grad`` accumulates into the root (which now retains grad), the leaf below stays untouched."""
    def run_torch(x, w, y, u, v, calls):
        y.backward(torch.full((2,), 5.0), inputs=[y])
        return [y.retains_grad] + _state(x, y)

    async def run_ag(x, w, y, u, v, calls):
        await y.backward(ag.full((2,), 5.0), inputs=[y])
        return [y.retains_grad] + _state(x, y)

    t, a = await _both(torch, run_torch, run_ag)
    assert t == (["y tensor hook", "y pre", "y post"], [True, None, [5.0, 5.0]])
    assert a == t


async def test_backward_into_a_freed_non_leaf_root_accumulates_then_refuses(torch):
    """A second pass into the root: its retain_grad runs (a tensor pre-hook) before its freed
    node refuses, in both."""
    def run_torch(x, w, y, u, v, calls):
        y.backward(torch.full((2,), 5.0), inputs=[y])
        calls.clear()
        with pytest.raises(RuntimeError) as info:
            (y * 2).backward(torch.ones(2), inputs=[y])
        return [str(info.value)] + _state(x, y)

    async def run_ag(x, w, y, u, v, calls):
        await y.backward(ag.full((2,), 5.0), inputs=[y])
        calls.clear()
        with pytest.raises(RuntimeError) as info:
            await (y * 2).backward(ag.ones(2), inputs=[y])
        return [str(info.value)] + _state(x, y)

    t, a = await _both(torch, run_torch, run_ag)
    assert t == (["y tensor hook", "y pre"], [SECOND_BACKWARD, None, [7.0, 7.0]])
    assert a == t


async def test_backward_into_a_root_whose_node_saved_nothing_runs_again(torch):
    """The fuzzer's seed 556 in a form both libraries record alike: the root's node (a view)
    saved nothing, so a second pass into the root runs it and stops below, in both."""
    tx = torch.tensor(X, requires_grad=True)
    ty = (tx * tx).reshape(3, 2)
    ty.sum().backward()
    ty.backward(torch.ones(3, 2), inputs=[ty])
    x = ag.tensor(X, requires_grad=True)
    y = (x * x).reshape(3, 2)
    await y.sum().backward()
    await y.backward(ag.ones(3, 2), inputs=[y])
    np.testing.assert_allclose(y.grad.numpy(), ty.grad.numpy())
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), 2 * X, rtol=1e-12)


async def test_grad_only_inputs_is_deprecated_and_ignored_as_in_torch(torch):
    """torch.autograd.grad(only_inputs=False) warns and does what only_inputs=True does."""
    xt = torch.ones(2, requires_grad=True)
    with pytest.warns(FutureWarning) as expected:
        torch.autograd.grad((xt * 3).sum(), xt, only_inputs=False)
    x = ag.ones(2, requires_grad=True)
    with pytest.warns(FutureWarning) as got:
        (g,) = await ag.grad((x * 3).sum(), x, only_inputs=False)
    assert str(got[0].message) == str(expected[0].message)
    assert got[0].filename == __file__, "the warning points at the caller"
    np.testing.assert_allclose(g.numpy(), [3.0, 3.0])
    assert x.grad is None, "only_inputs=False accumulates nothing into .grad"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        await ag.grad((x * 3).sum(), x, only_inputs=True)


def test_grad_sync_only_inputs_warns_too():
    x = ag.ones(2, requires_grad=True)
    with pytest.warns(FutureWarning, match="only_inputs argument is deprecated") as got:
        (g,) = ag.grad_sync((x * 3).sum(), x, only_inputs=False)
    assert got[0].filename == __file__
    np.testing.assert_allclose(g.numpy(), [3.0, 3.0])
