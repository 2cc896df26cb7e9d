"""torch behaviours asyncgrad follows exactly: pow's gradients at a zero base, which second
derivatives through piecewise-linear ops are connected, ``del t.grad``, ``t.data = other``,
``numpy()`` of a tensor that requires grad, ``randint(high, size)``, dtype attributes."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import asyncgrad as ag

# (base, exponent) pairs around the edge cases of d(a ** b)/db: a zero base with a negative,
# zero (both signs) and positive exponent, a negative base, and ordinary points
POW_POINTS = [(0., -1.), (0., -2.5), (0., 0.), (0., -0.), (0., 1.), (0., 2.), (0., 0.5), (-1., 2.), (-1., 0.5),
              (-2., -1.), (2., -1.), (3., 0.), (1.5, 2.5)]


@pytest.fixture(autouse=True)
def _float64():
    ag.set_default_dtype(ag.float64)  # conftest restores the default after each test


def _same(actual: ag.Tensor, expected) -> None:
    np.testing.assert_array_equal(actual.detach().numpy(), expected.detach().numpy())  # nan == nan, inf == inf


async def test_pow_gradients_at_a_zero_base_are_torchs(torch):
    base, exponent = (np.array(v) for v in zip(*POW_POINTS))
    a = ag.tensor(base, requires_grad=True)
    b = ag.tensor(exponent, requires_grad=True)
    ta = torch.tensor(base, requires_grad=True)
    tb = torch.tensor(exponent, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # numpy's divide-by-zero at 0 ** -1
        ga, gb = await ag.grad((a ** b).sum(), (a, b))
    tga, tgb = torch.autograd.grad((ta ** tb).sum(), (ta, tb))
    _same(ga, tga)
    _same(gb, tgb)
    assert gb[0].item() == -np.inf  # the limit of d/db as a -> +0 for b < 0, not nan
    assert np.isnan(gb[7].item())   # a negative base: log of it


@pytest.mark.parametrize("number", [0.0, 2.0, -2.0])
async def test_pow_number_base_gradient_is_torchs(torch, number):
    exponent = np.array([-1.0, -0.0, 0.0, 0.5, 2.0])
    b = ag.tensor(exponent, requires_grad=True)
    tb = torch.tensor(exponent, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        (gb,) = await ag.grad((number ** b).sum(), b)
    _same(gb, torch.autograd.grad((number ** tb).sum(), tb)[0])


async def test_pow_gradient_matches_finite_differences_away_from_zero():
    assert await ag.gradcheck(lambda a, b: a ** b, (ag.tensor([0.7, 1.5, 2.0], requires_grad=True),
                                                     ag.tensor([-1.5, 0.5, 2.0], requires_grad=True)))


# --------------------------------------------------------------------------- second order
# Each function of x (a 4-vector); the first gradient is taken against a cotangent v that
# requires grad, so it always requires grad, and the question is whether x is in its graph.
PIECEWISE = {
    "relu": lambda L, x: L.relu(x),
    "abs": lambda L, x: L.abs(x),
    "sign": lambda L, x: L.sign(x),
    "clamp": lambda L, x: L.clamp(x, -0.5, 0.5),
    "clamp_min": lambda L, x: L.clamp(x, min=-0.5),
    "clamp_tensor": lambda L, x: L.clamp(x, min=x.detach() * 0),
    "maximum": lambda L, x: L.maximum(x, x * 0 + 0.1),
    "minimum": lambda L, x: L.minimum(x, x * 0 + 0.1),
    "maximum_constant": lambda L, x: L.maximum(x, x.detach() * 0 + 0.1),
    "max": lambda L, x: L.max(x) * x.detach(),
    "min": lambda L, x: L.min(x) * x.detach(),
    "max_dim": lambda L, x: L.max(x.reshape(2, 2), 1)[0],
    "min_dim_keepdim": lambda L, x: L.min(x.reshape(2, 2), 0, keepdim=True)[0],
    "where": lambda L, x: L.where(x > 0, x, x * 0),
    "where_constant": lambda L, x: L.where(x > 0, x, x.detach() + 1),
    "pow_1": lambda L, x: x ** 1,
    "pow_0": lambda L, x: x ** 0,
    "mul": lambda L, x: x * 2,
}


async def _ag_chain(fn, orders: int):
    x = ag.tensor([-1.0, -0.2, 0.3, 2.0], requires_grad=True)
    y = fn(ag, x)
    v = ag.tensor(np.arange(1.0, y.numel() + 1).reshape(y.shape), requires_grad=True)
    (g,) = await ag.grad(y, x, v, create_graph=True)
    found = [g]
    for _ in range(orders):
        if not found[-1].requires_grad:
            break
        (nxt,) = await ag.grad(found[-1].sum(), x, allow_unused=True, create_graph=True)
        found.append(nxt)
        if nxt is None:
            break
    return found


def _torch_chain(torch, fn, orders: int):
    x = torch.tensor([-1.0, -0.2, 0.3, 2.0], requires_grad=True)
    y = fn(torch, x)
    v = torch.arange(1.0, y.numel() + 1).reshape(y.shape).requires_grad_(True)
    (g,) = torch.autograd.grad(y, x, v, create_graph=True)
    found = [g]
    for _ in range(orders):
        if not found[-1].requires_grad:
            break
        (nxt,) = torch.autograd.grad(found[-1].sum(), x, allow_unused=True, create_graph=True)
        found.append(nxt)
        if nxt is None:
            break
    return found


@pytest.mark.parametrize("name", list(PIECEWISE))
async def test_higher_order_connectivity_is_torchs(torch, name):
    """Where torch's second (and third) derivative is connected zeros, None, or not even
    differentiable (the first gradient does not require grad), asyncgrad's is the same."""
    mine = await _ag_chain(PIECEWISE[name], 3)
    theirs = _torch_chain(torch, PIECEWISE[name], 3)
    assert len(mine) == len(theirs)
    for m, t in zip(mine, theirs):
        assert (m is None) == (t is None)
        if t is None:
            continue
        assert m.requires_grad == t.requires_grad
        assert (m.grad_fn is None) == (t.grad_fn is None)
        expected = torch.zeros_like(t) if t._is_zerotensor() else t
        np.testing.assert_allclose(m.detach().numpy(), expected.detach().numpy(), rtol=1e-12, atol=1e-12)


async def test_disconnected_second_derivative_refuses_as_torch(torch):
    x = ag.tensor([-1.0, 2.0], requires_grad=True)
    (g,) = await ag.grad(ag.clamp(x, -0.5, 0.5), x, ag.ones(2, dtype=ag.float64, requires_grad=True),
                         create_graph=True)
    tx = torch.tensor([-1.0, 2.0], requires_grad=True)
    (tg,) = torch.autograd.grad(torch.clamp(tx, -0.5, 0.5), tx, torch.ones(2, requires_grad=True), create_graph=True)
    with pytest.raises(RuntimeError) as theirs:
        torch.autograd.grad(tg.sum(), tx)
    with pytest.raises(RuntimeError) as mine:
        await ag.grad(g.sum(), x)
    assert str(mine.value) == str(theirs.value)


# --------------------------------------------------------------------------- tensor state
def _raises_alike(mine_fn, theirs_fn):
    with pytest.raises(Exception) as theirs:
        theirs_fn()
    with pytest.raises(type(theirs.value)) as mine:
        mine_fn()
    assert str(mine.value) == str(theirs.value)


async def test_del_grad_sets_it_to_none(torch):
    x = ag.tensor([1.0, 2.0], requires_grad=True)
    await (x * 2).sum().backward()
    assert x.grad is not None
    del x.grad
    assert x.grad is None
    await (x * 3).sum().backward()  # accumulates from nothing again
    assert x.grad.tolist() == [3.0, 3.0]
    tx = torch.tensor([1.0, 2.0], requires_grad=True)
    (tx * 2).sum().backward()
    del tx.grad
    assert tx.grad is None


def test_numpy_of_a_tensor_requiring_grad_is_allowed_under_no_grad(torch):
    x = ag.tensor([1.0, 2.0], requires_grad=True)
    tx = torch.tensor([1.0, 2.0], requires_grad=True)
    _raises_alike(x.numpy, tx.numpy)
    with ag.no_grad():
        assert x.numpy().tolist() == [1.0, 2.0]
    with torch.no_grad():
        assert tx.numpy().tolist() == [1.0, 2.0]
    with ag.set_grad_enabled(False):
        x.numpy()


def test_data_assignment_takes_the_other_tensors_array(torch):
    x = ag.tensor([1.0, 2.0], requires_grad=True)
    other = ag.tensor([4.0, 5.0, 6.0], dtype=ag.float64)
    x.data = other
    assert isinstance(x.data, np.ndarray) and x.data is other.data  # the array, shared, not a Tensor
    assert x.shape == (3,) and x.dtype == ag.float64 and x.requires_grad and x.is_leaf
    tx = torch.tensor([1.0, 2.0], requires_grad=True)
    tx.data = torch.tensor([4.0, 5.0, 6.0])
    assert tx.shape == (3,) and tx.requires_grad


def test_data_assignment_checks_as_torch(torch):
    x, tx = ag.tensor([1.0, 2.0], requires_grad=True), torch.tensor([1.0, 2.0], requires_grad=True)
    _raises_alike(lambda: setattr(x, "data", ag.tensor([1, 2])), lambda: setattr(tx, "data", torch.tensor([1, 2])))
    _raises_alike(lambda: setattr(x, "data", 5), lambda: setattr(tx, "data", 5))
    _raises_alike(lambda: setattr(x, "data", [1.0]), lambda: setattr(tx, "data", [1.0]))
    plain = ag.tensor([1.0, 2.0])
    plain.data = ag.tensor([1, 2])  # an integer array is fine when no gradient is required
    assert plain.dtype == ag.int64
    with pytest.raises(RuntimeError, match="incompatible tensor type"):
        plain.data = ag.tensor([1.0], device="sim:0")


async def test_data_assignment_then_backward_uses_the_new_values():
    w = ag.tensor([1.0, 2.0], requires_grad=True)
    w.data = ag.tensor([3.0, 4.0])
    await (w * w).sum().backward()
    assert w.grad.tolist() == [6.0, 8.0]


def test_randint_high_size_form(torch):
    for args in [(5, (3,)), (3, 10, (2, 2))]:
        t, tt = ag.randint(*args), torch.randint(*args)
        assert t.shape == tuple(tt.shape) and t.dtype == ag.int64
        low, high = (0, args[0]) if len(args) == 2 else args[:2]
        assert low <= t.min().item() and t.max().item() < high
    for args in [(5,), (0, 5)]:  # no size: torch refuses rather than give a 0-d tensor
        with pytest.raises(TypeError) as ours:
            ag.randint(*args)
        with pytest.raises(TypeError) as theirs:
            torch.randint(*args)
        assert str(ours.value).splitlines()[0] == str(theirs.value).splitlines()[0]


# --------------------------------------------------------------------------- anomaly mode
def _warnings_of(fn):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            fn()
        except RuntimeError as exc:
            return caught, exc
    return caught, None


ENABLED = ("Anomaly Detection has been enabled. This mode will increase the runtime and should only be enabled for "
           "debugging.")


def test_detect_anomaly_warns_when_made_as_torch(torch):
    mine, _ = _warnings_of(lambda: ag.detect_anomaly())
    theirs, _ = _warnings_of(lambda: torch.autograd.detect_anomaly())
    assert [(w.category, str(w.message)) for w in mine] == [(w.category, str(w.message)) for w in theirs] \
        == [(UserWarning, ENABLED)]
    assert mine[0].filename == __file__  # the user's line
    assert _warnings_of(lambda: ag.set_detect_anomaly(False))[0] == []  # torch's set_detect_anomaly is silent
    assert _warnings_of(lambda: torch.autograd.set_detect_anomaly(False))[0] == []


def test_set_detect_anomaly_as_a_context_manager_restores_as_torch(torch):
    assert not ag.is_anomaly_enabled()
    with ag.set_detect_anomaly(True):
        assert ag.is_anomaly_enabled()
        with ag.set_detect_anomaly(False, check_nan=False):
            assert not ag.is_anomaly_enabled()
        assert ag.is_anomaly_enabled()
    assert not ag.is_anomaly_enabled()
    ag.set_detect_anomaly(True)  # as a function: it stays on
    assert ag.is_anomaly_enabled()
    ag.set_detect_anomaly(False)
    with torch.autograd.set_detect_anomaly(True):
        assert torch.is_anomaly_enabled()
    assert not torch.is_anomaly_enabled()


def _failing_backward(lib):
    class Bad(lib.autograd.Function if lib is not ag else ag.Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            raise RuntimeError("Some error in backward")

    return Bad


async def test_an_error_in_backward_warns_and_raises_as_torch(torch):
    def run_torch():
        with torch.autograd.detect_anomaly():
            x = torch.tensor([1.0, 2.0], requires_grad=True)
            _failing_backward(torch).apply(x).sum().backward()

    theirs, their_exc = _warnings_of(run_torch)
    with warnings.catch_warnings(record=True) as mine:
        warnings.simplefilter("always")
        with ag.detect_anomaly():
            x = ag.tensor([1.0, 2.0], requires_grad=True)
            out = _failing_backward(ag).apply(x).sum()  # the forward line the warning shows
            with pytest.raises(RuntimeError) as my_exc:
                await out.backward()
    assert str(my_exc.value) == str(their_exc) == "Some error in backward"
    prefix = "Error detected in BadBackward. Traceback of forward call that caused the error:\n"
    their_detected = [str(w.message) for w in theirs if "Error detected" in str(w.message)]
    my_detected = [w for w in mine if "Error detected" in str(w.message)]
    assert len(their_detected) == len(my_detected) == 1 and their_detected[0].startswith(prefix)
    assert my_detected[0].category is UserWarning and str(my_detected[0].message).startswith(prefix)
    assert "_failing_backward(ag).apply(x).sum()" in str(my_detected[0].message)


async def test_nan_in_backward_warns_and_raises_as_torch(torch):
    def run_torch():
        with torch.autograd.detect_anomaly():
            x = torch.tensor([0.0, 2.0], requires_grad=True)
            (x ** 0.5 * 0).sum().backward()

    theirs, their_exc = _warnings_of(run_torch)
    with warnings.catch_warnings(record=True) as mine:
        warnings.simplefilter("always")
        with ag.detect_anomaly():
            x = ag.tensor([0.0, 2.0], requires_grad=True)
            out = (x ** 0.5 * 0).sum()
            with pytest.raises(RuntimeError) as my_exc:
                await out.backward()
    assert str(my_exc.value) == str(their_exc) == "Function 'PowBackward0' returned nan values in its 0th output."
    their_detected = [str(w.message).split("\n")[0] for w in theirs if "Error detected" in str(w.message)]
    my_detected = [str(w.message).split("\n")[0] for w in mine if "Error detected" in str(w.message)]
    assert my_detected == their_detected == ["Error detected in PowBackward0. Traceback of forward call that caused "
                                             "the error:"]


CREATE_GRAPH_WARNING = ("Using backward() with create_graph=True will create a reference cycle between the parameter "
                        "and its gradient which can cause a memory leak. We recommend using autograd.grad when "
                        "creating the graph to avoid this. If you have to use this function, make sure to reset the "
                        ".grad fields of your parameters to None after use to break the cycle and avoid the leak.")


async def test_backward_with_create_graph_warns_once_as_torch(torch, monkeypatch):
    from asyncgrad.autograd import api

    monkeypatch.setattr(api, "_create_graph_warned", [])  # once per process, as torch's TORCH_WARN_ONCE
    x = ag.tensor([1.0, 2.0], requires_grad=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        await ag.grad((x * x).sum(), x, create_graph=True)  # grad(): no warning
        assert caught == []
        await (x * x).sum().backward(create_graph=True, inputs=[x])
        await (x * x).sum().backward(create_graph=True)  # given once
        await (x * x).sum().backward()
    assert [(w.category, str(w.message), w.filename) for w in caught] == [(UserWarning, CREATE_GRAPH_WARNING,
                                                                           __file__)]
    tx = torch.tensor([1.0, 2.0], requires_grad=True)
    with warnings.catch_warnings(record=True) as theirs:
        warnings.simplefilter("always")
        (tx * tx).sum().backward(create_graph=True)
    assert all(str(w.message).startswith(CREATE_GRAPH_WARNING) for w in theirs)  # once per process: maybe none


@pytest.mark.parametrize("name", ["vstack", "hstack"])
@pytest.mark.parametrize("shapes", [[(3,), (3,)], [(2, 3), (1, 3)], [(), ()], [(2, 1), (2, 2)], [(2, 2, 1), (2, 2, 3)]])
async def test_vstack_and_hstack_against_torch(torch, name, shapes):
    """torch's vstack (cat on dim 0 of at-least-2-d views) and hstack (dim 0 for 1-d, else dim 1):
    values, CatBackward0, gradients, and the same refusal where shapes do not join."""
    rng = np.random.default_rng(3)
    arrays = [rng.standard_normal(s) for s in shapes]
    ours = [ag.tensor(a, requires_grad=True) for a in arrays]
    theirs = [torch.tensor(a, requires_grad=True) for a in arrays]
    try:
        expected = getattr(torch, name)(theirs)
    except RuntimeError as exc:
        with pytest.raises(RuntimeError) as raised:
            getattr(ag, name)(ours)
        assert str(raised.value).splitlines()[0] == str(exc).splitlines()[0]
        return
    out = getattr(ag, name)(ours)
    assert out.grad_fn.name() == "CatBackward0" and tuple(out.shape) == tuple(expected.shape)
    np.testing.assert_allclose(out.detach().numpy(), expected.detach().numpy())
    g = rng.standard_normal(tuple(expected.shape))
    await out.backward(ag.tensor(g))
    expected.backward(torch.tensor(g))
    for a, t in zip(ours, theirs):
        np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy())
    with pytest.raises(RuntimeError, match=f"{name} expects a non-empty TensorList"):
        getattr(ag, name)([])


def test_detach_function_form():
    x = ag.ones(2, requires_grad=True)
    d = ag.detach(x)
    assert not d.requires_grad and d.grad_fn is None and d._version == x._version
