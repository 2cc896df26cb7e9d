"""A node that saves only its own result keeps it in two slots instead of a SavedTensor
(Note [A saved result kept in its node] in ops/_node.py). Every path must behave as with the
SavedTensor: gradients, version errors, release and a second backward, in-place ops, a recorded
(second-order) backward, saved-tensor hooks, drawing, and the objects the collector tracks."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest
from helpers import check_gradgrad, check_op, has_torch

import asyncgrad as ag
from asyncgrad.autograd.graph import RELEASED
from asyncgrad.ops._node import SavesResult
from asyncgrad.variable.saved import SavedTensor

_RESULT_OPS = ("tanh", "exp", "sigmoid", "sqrt", "relu", "reciprocal", "rsqrt", "expm1")


@pytest.mark.parametrize("name", _RESULT_OPS)
@pytest.mark.parametrize("device", ["cpu", "sim:0"])
def test_the_result_is_kept_in_the_node(name: str, device: str) -> None:
    x = ag.tensor(np.linspace(0.2, 1.4, 6), device=device, requires_grad=True)
    y = getattr(ag, name)(x)
    node = y.grad_fn
    assert isinstance(node, SavesResult) and node.saves_result
    assert node.saved == ()
    assert node.result is y._data and node.result_vc is y._vc


@pytest.mark.parametrize("name", _RESULT_OPS)
async def test_gradients_against_finite_differences_and_torch(name: str) -> None:
    await check_op(lambda lib, x: getattr(lib, name)(x * 1.5 + 0.5), (3, 4), low=0.1, high=1.0)


@pytest.mark.parametrize("name", ["tanh", "exp", "sigmoid", "sqrt"])
async def test_second_order_through_a_kept_result(name: str) -> None:
    await check_gradgrad(lambda lib, x: getattr(lib, name)(x), (5,), low=0.2, high=1.0)


async def test_a_result_changed_in_place_is_refused_with_torchs_words() -> None:
    x = ag.tensor([0.5, 1.5], dtype=ag.float64, requires_grad=True)
    y = x.exp()
    y.mul_(2.0)
    with pytest.raises(RuntimeError) as info:
        await y.sum().backward()
    assert ("one of the variables needed for gradient computation has been modified by an inplace operation: "
            "[asyncgrad.DoubleTensor [2]], which is output 0 of Exp, is at version 1; expected version 0 instead."
            ) in str(info.value)
    if has_torch():
        import torch

        tx = torch.tensor([0.5, 1.5], dtype=torch.float64, requires_grad=True)
        ty = tx.exp()
        ty.mul_(2.0)
        with pytest.raises(RuntimeError) as tinfo:
            ty.sum().backward()
        assert str(info.value).replace("asyncgrad.", "torch.").split(" Hint:")[0] == str(tinfo.value).split(" Hint:")[0]


async def test_release_frees_the_result_and_a_second_backward_is_refused() -> None:
    x = ag.tensor([0.1, 0.2, 0.3], dtype=ag.float64, requires_grad=True)
    h = x * 2.0
    y = h.tanh()
    node = y.grad_fn
    kept = weakref.ref(node.result)
    loss = (y * 3.0).sum()
    del y  # the node's slot is the result's last holder
    await loss.backward()
    assert node.saved is RELEASED and node.result is None and node.result_vc is None
    gc.collect()
    assert kept() is None
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        await loss.backward()


async def test_retain_graph_keeps_the_result_for_a_second_pass() -> None:
    x = ag.tensor([0.1, 0.2, 0.3], dtype=ag.float64, requires_grad=True)
    loss = x.tanh().sum()
    await loss.backward(retain_graph=True)
    first = x.grad.numpy().copy()
    await loss.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * first)
    np.testing.assert_allclose(first, 1 - np.tanh([0.1, 0.2, 0.3]) ** 2)


@pytest.mark.parametrize("method", ["tanh_", "exp_", "sigmoid_", "sqrt_", "relu_"])
async def test_in_place_ops_of_result_saving_nodes(method: str) -> None:
    values = np.array([0.3, 0.8, 1.2])
    x = ag.tensor(values, requires_grad=True)
    h = x * 1.0
    getattr(h, method)()
    assert h.grad_fn.saved and isinstance(h.grad_fn.saved[-1], SavedTensor)  # the entry the in-place op rewrote
    await (h * h).sum().backward()
    if has_torch():
        import torch

        tx = torch.tensor(values, requires_grad=True)
        th = tx * 1.0
        getattr(th, method)()
        (th * th).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12)


async def test_in_place_op_on_a_view_keeps_the_entry_shared_with_copy_slices() -> None:
    values = np.array([[0.3, 0.8], [1.2, 0.4]])
    x = ag.tensor(values, requires_grad=True)
    base = x * 1.0
    base[0].exp_()
    await (base * base).sum().backward()
    expected = 2 * values.copy()
    expected[0] = 2 * np.exp(values[0]) * np.exp(values[0])
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-12)


async def test_saved_tensors_hooks_see_the_result() -> None:
    packed: list = []

    def pack(t: ag.Tensor) -> ag.Tensor:
        packed.append(t)
        return t

    x = ag.tensor([0.4, 0.9], dtype=ag.float64, requires_grad=True)
    with ag.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        y = x.tanh()
    assert len(packed) == 1 and y.grad_fn.saved != () and y.grad_fn.result_vc is None
    await y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 1 - np.tanh([0.4, 0.9]) ** 2)


def test_drawing_shows_the_saved_result() -> None:
    pytest.importorskip("graphviz")
    x = ag.tensor([0.4, 0.9], requires_grad=True)
    y = x.exp()
    source = ag.viz.draw(y, show_saved=True).source
    assert "ExpBackward0" in source and "orange" in source
    assert y.grad_fn.saved != () and y.grad_fn.saved[0].data is y._data  # drawn from the SavedTensor it made


def test_a_kept_result_adds_no_tracked_objects() -> None:
    x = ag.tensor(np.ones(3), requires_grad=True)
    h = x * 1.0
    gc.collect()
    gc.disable()
    try:
        before = len(gc.get_objects())
        y = h
        for _ in range(300):
            y = y.tanh()
        grown = len(gc.get_objects()) - before
    finally:
        gc.enable()
    # per node: the node, its edge tuple and the result's version counter, nothing more
    assert grown <= 3 * 300 + 20, grown


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
async def test_softmax_nodes_keep_their_result(name: str) -> None:
    x = ag.tensor(np.linspace(-1.0, 1.0, 6).reshape(2, 3), requires_grad=True)
    y = getattr(ag, name)(x, 1)
    assert isinstance(y.grad_fn, SavesResult) and y.grad_fn.saved == () and y.grad_fn.dim == 1
    await check_op(lambda lib, t: getattr(lib, name)(t * 2.0, 1), (3, 4))
    await check_gradgrad(lambda lib, t: getattr(lib, name)(t, 0), (3, 2))
