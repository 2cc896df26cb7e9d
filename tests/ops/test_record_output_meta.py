"""The forward recording path's shortcuts (ops/_node.py ``record``): an output's meta taken from its
input (Note [An output's meta taken from its input]) and anomaly mode read only once it was used
(Note [Anomaly mode read once it was used]). Each must give what the slow path gives."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from helpers import has_torch

import asyncgrad as ag
from asyncgrad.autograd import anomaly
from asyncgrad.ops._node import input_meta


def _meta(t: ag.Tensor) -> tuple:
    return t.grad_fn._input_meta


@pytest.mark.parametrize("device", ["cpu", "sim:0"])
def test_meta_of_a_same_meta_op_is_its_inputs_interned_meta(device: str) -> None:
    x = ag.tensor(np.linspace(-1.0, 1.0, 6).reshape(2, 3), device=device, requires_grad=True)
    y = x * 1.5  # from a leaf: looked up
    dev = ag.device(device)
    assert _meta(y) is input_meta((2, 3), np.dtype("float64"), dev)
    for z in (y.tanh(), y + 0.5, y - 0.5, y / 2.0, y * 2.0, ag.exp(y), y.relu(), y.sigmoid(), -y):
        assert _meta(z) == (((2, 3), np.dtype("float64"), dev),), z.grad_fn.name()
        if device == "cpu":  # numpy's dtypes are singletons: the input's meta object itself
            assert _meta(z) is _meta(y), z.grad_fn.name()


@pytest.mark.parametrize("device", ["cpu", "sim:0"])
def test_meta_of_another_output_or_a_multi_output_node_is_looked_up(device: str) -> None:
    x = ag.tensor(np.arange(6.0).reshape(2, 3), device=device, requires_grad=True)
    y = x * 1.0
    first, second = y.unbind()  # two outputs: the node's meta has two entries
    dev = ag.device(device)
    for part in (first, second):
        assert _meta(part.tanh()) == (((3,), np.dtype("float64"), dev),)
        assert _meta(part * 2.0) == (((3,), np.dtype("float64"), dev),)


@pytest.mark.parametrize("device", ["cpu", "sim:0"])
def test_meta_keeps_each_float_dtype(device: str) -> None:
    dev = ag.device(device)
    for dtype in (ag.float16, ag.float32) if device == "cpu" else (ag.float32,):  # strict has no float16
        y = (ag.tensor(np.ones(3), device=device, requires_grad=True) * 1.0).to(dtype)
        for z in (y.tanh(), y * 3.0, y + 0.5, y.relu()):
            assert z.dtype == dtype
            assert _meta(z) == (((3,), np.dtype(dtype.name), dev),), z.grad_fn.name()


async def test_a_wrong_gradient_shape_is_still_refused_against_a_reused_meta() -> None:
    x = ag.tensor(np.ones(4), requires_grad=True)
    y = (x * 2.0).tanh()
    with pytest.raises(RuntimeError, match="Mismatch in shape"):
        await ag.autograd.grad(y, x, grad_outputs=ag.ones(3))


async def test_w1_chain_gradient_matches_torch_and_finite_differences() -> None:
    start = np.random.default_rng(3).uniform(-1, 1, (4,))

    def chain(y, tanh):
        for i in range(30):
            y = y * 1.0001 if i % 3 == 0 else (y + 0.0001 if i % 3 == 1 else tanh(y))
        return y

    x = ag.tensor(start, requires_grad=True)
    (grad,) = await ag.autograd.grad(chain(x, ag.tanh).sum(), x)
    eps = 1e-6
    fd = np.array([(chain(start + eps * e, np.tanh).sum() - chain(start - eps * e, np.tanh).sum()) / (2 * eps)
                   for e in np.eye(4)])
    np.testing.assert_allclose(grad.numpy(), fd, rtol=1e-7, atol=1e-9)
    if has_torch():
        import torch

        xt = torch.tensor(start, requires_grad=True)
        chain(xt, torch.tanh).sum().backward()
        np.testing.assert_allclose(grad.numpy(), xt.grad.numpy(), rtol=1e-13)


def test_no_traceback_is_kept_until_anomaly_mode_is_on() -> None:
    x = ag.tensor(np.ones(2), requires_grad=True)
    assert "traceback_" not in (x * 2.0).grad_fn.metadata
    with ag.set_detect_anomaly(True):
        assert anomaly.ANOMALY_USED[0]
        assert "test_record_output_meta.py" in (x * 2.0).grad_fn.metadata["traceback_"]
    assert "traceback_" not in (x * 2.0).grad_fn.metadata  # off again: the flag stays, the mode is read


async def test_anomaly_mode_switched_on_in_another_task_is_seen_there_only() -> None:
    x = ag.tensor(np.ones(2), requires_grad=True)

    async def in_task() -> dict:
        with pytest.warns(UserWarning, match="Anomaly Detection has been enabled"):
            mode = ag.autograd.detect_anomaly()
        with mode:
            return (x * 3.0).grad_fn.metadata

    assert "traceback_" in await asyncio.create_task(in_task())
    assert "traceback_" not in (x * 3.0).grad_fn.metadata


def test_sequence_numbers_still_increase() -> None:
    x = ag.tensor(np.ones(2), requires_grad=True)
    a = x * 2.0
    b = a.tanh()
    c = b + 1.0
    assert a.grad_fn.sequence_nr < b.grad_fn.sequence_nr < c.grad_fn.sequence_nr
