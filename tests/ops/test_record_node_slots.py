"""``record`` builds nodes and results without Node.__init__ and Tensor._make (Note [Recording
inlined] in ops/_node.py): every slot those set must be set on what it returns, on every device."""

from __future__ import annotations

import numpy as np
import pytest

import asyncgrad as ag
from asyncgrad.autograd.graph import Node
from asyncgrad.tensor import Tensor


def _slots(cls: type) -> list[str]:
    names: list[str] = []
    for klass in cls.__mro__:
        slots = klass.__dict__.get("__slots__", ())
        names += [slots] if isinstance(slots, str) else [name for name in slots if name != "__weakref__"]
    return names


def _results(device: str) -> list[Tensor]:
    x = ag.tensor(np.linspace(-1.0, 1.0, 4), device=device, requires_grad=True)
    y = x * 1.5
    return [y, y + 0.5, y.tanh(), y * y, x.sum(), x[1:3], ag.exp(x)]


@pytest.mark.parametrize("device", ["cpu", "sim:0"])
def test_recorded_results_have_every_slot(device: str) -> None:
    for out in _results(device):
        for name in _slots(Tensor):
            getattr(out, name)  # an unset slot raises AttributeError
        node = out.grad_fn
        assert isinstance(node, Node)
        for name in _slots(type(node)):  # an op's own fields and SavesResult's too
            getattr(node, name)
        assert node.sequence_nr > node.next_edges[0][0].sequence_nr or node.next_edges[0][0].name() == "AccumulateGrad"
        assert out._requires_grad and out.output_nr == 0 and out._grad is None


@pytest.mark.parametrize("device", ["cpu", "sim:0"])
def test_topological_nr_counts_the_longest_path(device: str) -> None:
    x = ag.tensor(np.ones(3), device=device, requires_grad=True)
    y = x * 2.0
    z = (y + 1.0).tanh()
    w = z * y  # two inputs: one past the longer path
    assert y.grad_fn.topological_nr == 1  # AccumulateGrad is 0
    assert z.grad_fn.topological_nr == 3
    assert w.grad_fn.topological_nr == 4


def test_scalar_result_is_a_0d_array() -> None:
    x = ag.tensor(2.0, dtype=ag.float64, requires_grad=True)
    y = x * 3.0
    assert isinstance(y.data, np.ndarray) and y.data.ndim == 0
    y.data[...] = 1.0  # writable, as in-place ops need


async def test_gradients_through_recorded_chain() -> None:
    x = ag.tensor(np.array([0.1, -0.4, 0.7]), requires_grad=True)
    y = x
    for _ in range(5):
        y = (y * 1.0001 + 0.0001).tanh()
    await y.sum().backward()
    v, expected = np.array([0.1, -0.4, 0.7]), np.ones(3)
    values = []
    for _ in range(5):
        values.append(np.tanh(v * 1.0001 + 0.0001))
        v = values[-1]
    for value in reversed(values):
        expected = expected * (1 - value * value) * 1.0001
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-12)
