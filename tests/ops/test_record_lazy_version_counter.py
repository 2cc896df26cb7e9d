"""The forward recording path's shortcuts, third round: the result made by the node class's own
compiled ``make`` (Note [The result made with its node] in ops/_node.py) and the version counter a
recorded result gets only when something asks for it (Note [A version counter made when first asked
for] in tensor.py). Each must be invisible: the same nodes, values, gradients, versions and errors."""

from __future__ import annotations

import gc

import numpy as np
import pytest
from helpers import check_op, has_torch

import asyncgrad as ag

_MODIFIED = "one of the variables needed for gradient computation has been modified by an inplace operation"


def _chain(t):
    """W1's three ops: a number product, a number sum, and tanh (which keeps its result)."""
    return ((t * 1.0001) + 0.0001).tanh() * 0.5


async def test_chain_differentiates(op_device: str) -> None:
    await check_op(_chain, np.linspace(-1.0, 1.0, 5), name="MulBackward0")


async def test_zero_d_result_of_a_result_keeping_op() -> None:
    # numpy's tanh of a 0-d array is a numpy scalar: made a 0-d array, and the node keeps that array
    x = ag.tensor(0.3, dtype=ag.float64, requires_grad=True)
    y = (x + 0.25).tanh()
    assert isinstance(y._data, np.ndarray) and y._data.ndim == 0
    assert y.grad_fn.result is y._data and y.grad_fn.result_vc is y._vc and y._version == 0
    await check_op(lambda t: (t + 0.25).tanh(), np.array(0.3), name="TanhBackward0")


def test_a_pack_hook_error_is_raised_once_and_not_taken_for_a_field_count() -> None:
    calls: list = []

    def pack(t: ag.Tensor) -> ag.Tensor:
        calls.append(t)
        raise ValueError("pack refused")

    x = ag.tensor([0.4, 0.9], dtype=ag.float64, requires_grad=True)
    w = ag.tensor([1.5, -2.0], dtype=ag.float64, requires_grad=True)
    for op, packs in ((lambda: x.tanh(), 1), (lambda: x * w, 1), (lambda: x.sin(), 1)):
        calls.clear()
        with ag.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            with pytest.raises(ValueError, match="pack refused"):
                op()
        assert len(calls) == packs


def test_a_recorded_result_gets_its_counter_when_asked() -> None:
    x = ag.tensor([0.5, -1.0], requires_grad=True)
    y = x * 2.0
    assert y._counter is None  # nothing asked yet: no list for the collector to track
    vc = y._vc
    assert vc == [0] and y._vc is vc and y._counter is vc and y._version == 0
    z = y.tanh()  # keeps its result: its counter is made with it, shared with its node
    assert z._counter is not None and z.grad_fn.result_vc is z._vc


def test_a_chains_results_add_no_counter() -> None:
    x = ag.tensor(np.ones(3), requires_grad=True)
    y = x * 1.0
    gc.collect()
    gc.disable()
    try:
        before = len(gc.get_objects())
        kept = [y]
        for _ in range(300):
            kept.append(kept[-1] * 1.0001)
        grown = len(gc.get_objects()) - before
    finally:
        gc.enable()
    # per node: the node, its edge tuple and the result tensor; no version counter list
    assert grown <= 3 * 300 + 20, grown


@pytest.mark.parametrize("share", ["view", "detach", "slice"])
async def test_whatever_asks_first_shares_the_counter(share: str) -> None:
    # an in-place change through anything sharing a lazily made counter is seen by a node that saved
    # the result, with torch's words
    x = ag.tensor([0.5, 1.5], dtype=ag.float64, requires_grad=True)
    y = x + 1.0
    other = {"view": lambda: y.view(2), "detach": y.detach, "slice": lambda: y[0:]}[share]()
    assert other._vc is y._vc
    w = y.sin()  # saves y
    with ag.no_grad():
        other.mul_(2.0)
    assert y._version == 1 and w.grad_fn.saved[0].version == 0
    with pytest.raises(RuntimeError, match=_MODIFIED):
        await w.sum().backward()
    if has_torch():
        import torch

        tx = torch.tensor([0.5, 1.5], dtype=torch.float64, requires_grad=True)
        ty = tx + 1.0
        tother = {"view": lambda: ty.view(2), "detach": ty.detach, "slice": lambda: ty[0:]}[share]()
        tw = ty.sin()
        with torch.no_grad():
            tother.mul_(2.0)
        assert ty._version == y._version
        with pytest.raises(RuntimeError, match=_MODIFIED):
            tw.sum().backward()


async def test_a_saved_lazy_counter_is_the_tensors_own() -> None:
    # saved first, changed in place after: the saved entry holds the counter the in-place bumps
    x = ag.tensor([0.5, 1.5], dtype=ag.float64, requires_grad=True)
    y = x * 3.0
    w = y * y
    assert w.grad_fn.saved[0].vc is y._vc
    y.add_(1.0)
    assert y._version == 1
    with pytest.raises(RuntimeError, match=_MODIFIED):
        await w.sum().backward()


async def test_versions_match_torch_through_in_place_ops() -> None:
    x = ag.tensor([0.5, 1.5], dtype=ag.float64, requires_grad=True)
    y = x * 2.0
    y.add_(1.0)
    y.mul_(3.0)
    v = y[1:]
    v.sub_(0.5)
    got = (y._version, v._version)
    await y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [6.0, 6.0])
    if has_torch():
        import torch

        tx = torch.tensor([0.5, 1.5], dtype=torch.float64, requires_grad=True)
        ty = tx * 2.0
        ty.add_(1.0)
        ty.mul_(3.0)
        tv = ty[1:]
        tv.sub_(0.5)
        assert got == (ty._version, tv._version) == (3, 3)


def test_a_lazy_counter_made_in_inference_mode_is_a_normal_one() -> None:
    # a result recorded outside inference mode is a normal tensor, whenever its counter is made
    x = ag.tensor([0.5, 1.5], requires_grad=True)
    y = x * 2.0
    assert y._counter is None
    with ag.inference_mode():
        d = y.detach()
        assert not y.is_inference() and not d.is_inference() and d._vc is y._vc
        assert y._version == 0
    if has_torch():
        import torch

        ty = torch.tensor([0.5, 1.5], requires_grad=True) * 2.0
        with torch.inference_mode():
            assert not ty.detach().is_inference()


def test_an_op_node_class_is_made_only_by_record() -> None:
    # Note [An op node made by calling its class]: no Node.__init__ on the way
    x = ag.tensor([0.5, -1.0], requires_grad=True)
    for y in (x * 2.0, x + 1.0, x.tanh(), x * x):
        with pytest.raises(TypeError):
            type(y.grad_fn)(((None, 0),))
        assert y.grad_fn.next_functions[0][0].name() == "AccumulateGrad"


def test_topological_numbers_of_one_and_two_input_nodes() -> None:
    # Note [Topological numbers without a loop]: one more than the deepest input's, either side
    x = ag.tensor([0.5, -1.0], requires_grad=True)
    c = ag.tensor([2.0, 3.0])  # needs no gradient: no edge
    a = x * 2.0
    b = a.tanh()
    assert (a.grad_fn.topological_nr, b.grad_fn.topological_nr) == (1, 2)
    assert (b * x).grad_fn.topological_nr == (x * b).grad_fn.topological_nr == 3
    assert (c * b).grad_fn.topological_nr == (b * c).grad_fn.topological_nr == 3
    assert (x + 1.0).grad_fn.topological_nr == (x * x).grad_fn.topological_nr == 1
    assert ag.stack([x, b, a]).grad_fn.topological_nr == 3
