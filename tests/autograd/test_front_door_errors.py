"""The front door's common forms (``loss.backward()``, ``grad(loss, x)``) check exactly what its general
path checks, in the same order, with the same words (Note [A cheap call] in engine/budget.py)."""

from __future__ import annotations

import numpy as np
import pytest

import asyncgrad as ag


def _error(call):
    try:
        call()
    except Exception as exc:  # noqa: BLE001 - the error itself is what is compared
        return type(exc), str(exc)
    return None


def _roots():
    x = ag.tensor([1.0, 2.0], requires_grad=True)
    return {
        "scalar": (x * 2).sum(),
        "vector": x * 2,
        "no grad": ag.tensor(3.0),
        "integer leaf": ag.tensor(3),
        "leaf": ag.tensor(2.0, requires_grad=True),
    }, x


@pytest.mark.parametrize("name", ["scalar", "vector", "no grad", "integer leaf", "leaf"])
@pytest.mark.parametrize("retain_graph", [None, True, False])
def test_backward_common_form_checks_as_the_general_one(name, retain_graph):
    roots, _ = _roots()
    root = roots[name]
    fast = _error(lambda: ag.backward_sync(root, retain_graph=retain_graph))
    roots, _ = _roots()
    root = roots[name]
    general = _error(lambda: ag.backward_sync([root], [None], retain_graph=retain_graph))
    assert fast == general
    if name in ("vector",):
        assert fast == (RuntimeError, "grad can be implicitly created only for scalar outputs")
    if name == "no grad":
        assert fast == (RuntimeError, "element 0 of tensors does not require grad and does not have a grad_fn")


@pytest.mark.parametrize("name", ["scalar", "vector", "no grad", "leaf"])
@pytest.mark.parametrize("input_requires_grad", [True, False])
@pytest.mark.parametrize("create_graph", [False, True])
def test_grad_common_form_checks_as_the_general_one(name, input_requires_grad, create_graph):
    def call(general: bool):
        roots, x = _roots()
        root = roots[name]
        inp = x if input_requires_grad else ag.tensor([1.0])
        if general:
            return ag.grad_sync([root], [inp], [None], create_graph=create_graph)
        return ag.grad_sync(root, inp, create_graph=create_graph)

    fast, general = _error(lambda: call(False)), _error(lambda: call(True))
    if fast is None:  # both ran: same gradients
        assert general is None
        (g_fast,), (g_general,) = call(False), call(True)
        np.testing.assert_array_equal(g_fast.numpy(), g_general.numpy())
        assert g_fast.requires_grad == g_general.requires_grad
    else:
        assert fast == general
    if not input_requires_grad:
        assert fast == (RuntimeError, "One of the differentiated Tensors does not require grad")


async def test_common_forms_run_as_the_general_ones():
    x = ag.tensor([1.0, -2.0, 3.0], requires_grad=True)
    loss = (x.tanh() * x).sum()
    await loss.backward(retain_graph=True)
    fast = x.grad.numpy().copy()
    x.grad = None
    await ag.backward([loss], [None], retain_graph=True)
    np.testing.assert_allclose(fast, x.grad.numpy(), rtol=0, atol=0)
    (g,) = await ag.grad(loss, x, create_graph=True)
    assert g.requires_grad
    np.testing.assert_allclose(g.detach().numpy(), fast, rtol=0, atol=0)
    with pytest.raises(TypeError, match="retain_graph"):
        await ag.backward([loss], retain_graph="yes")
