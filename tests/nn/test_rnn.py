"""RNN, LSTM and GRU against torch with torch's weights loaded: outputs, final states and gradients
(input, initial states, every parameter) in float64, plus finite differences and torch's errors."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import check_raises

import asyncgrad as ag

RNG = np.random.default_rng(3)

CONFIGS = [
    {}, {"batch_first": True}, {"num_layers": 2}, {"bidirectional": True},
    {"num_layers": 2, "bidirectional": True, "batch_first": True}, {"bias": False},
]


def _pair(torch, cls, **kwargs):
    ag.set_default_dtype(ag.float64)
    module, reference = getattr(ag.nn, cls)(3, 4, **kwargs), getattr(torch.nn, cls)(3, 4, **kwargs)
    assert [n for n, _ in module.named_parameters()] == [n for n, _ in reference.named_parameters()]
    assert repr(module) == repr(reference)
    module.load_state_dict({k: ag.tensor(v.detach().numpy().copy()) for k, v in reference.state_dict().items()})
    return module, reference


def _flat(out):
    """(output, h_n) or (output, (h_n, c_n)) as a flat list."""
    output, hidden = out
    return [output] + (list(hidden) if isinstance(hidden, tuple) else [hidden])


async def _compare(torch, module, reference, x, states=None):
    xa = ag.tensor(x, requires_grad=True)
    xt = torch.tensor(x, requires_grad=True)
    sa = st = None
    if states is not None:
        sa = tuple(ag.tensor(s, requires_grad=True) for s in states)
        st = tuple(torch.tensor(s, requires_grad=True) for s in states)
        sa, st = (sa, st) if len(states) == 2 else (sa[0], st[0])
    outs, expected = _flat(module(xa, sa)), _flat(reference(xt, st))
    assert len(outs) == len(expected)
    total = 0.0
    t_total = 0.0
    for o, e in zip(outs, expected):
        assert tuple(o.shape) == tuple(e.shape)
        np.testing.assert_allclose(o.detach().numpy(), e.detach().numpy(), rtol=1e-10, atol=1e-12)
        v = RNG.standard_normal(tuple(o.shape))
        total = total + (o * ag.tensor(v)).sum()
        t_total = t_total + (e * torch.tensor(v)).sum()
    leaves = [xa] + ([] if sa is None else list(sa) if isinstance(sa, tuple) else [sa]) + list(module.parameters())
    t_leaves = [xt] + ([] if st is None else list(st) if isinstance(st, tuple) else [st]) + list(
        reference.parameters())
    grads = await ag.grad(total, leaves)
    t_grads = torch.autograd.grad(t_total, t_leaves)
    for g, e in zip(grads, t_grads):
        np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("cls", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("kwargs", CONFIGS, ids=lambda k: "-".join(f"{a}={b}" for a, b in k.items()) or "default")
async def test_recurrent_layers_match_torch(torch, cls, kwargs):
    module, reference = _pair(torch, cls, **kwargs)
    x = RNG.standard_normal((2, 5, 3) if kwargs.get("batch_first") else (5, 2, 3))
    await _compare(torch, module, reference, x)


@pytest.mark.parametrize("cls", ["LSTM", "GRU"])
async def test_initial_states_and_unbatched_input(torch, cls):
    module, reference = _pair(torch, cls, num_layers=2, bidirectional=True)
    shape = (4, 2, 4)
    states = [RNG.standard_normal(shape) for _ in range(2 if cls == "LSTM" else 1)]
    await _compare(torch, module, reference, RNG.standard_normal((5, 2, 3)), states)
    unbatched = [s[:, 0] for s in states]
    await _compare(torch, module, reference, RNG.standard_normal((5, 3)), unbatched)


async def test_rnn_relu_nonlinearity(torch):
    module, reference = _pair(torch, "RNN", nonlinearity="relu", num_layers=2)
    await _compare(torch, module, reference, RNG.standard_normal((4, 2, 3)))


async def test_lstm_gradient_against_finite_differences():
    ag.set_default_dtype(ag.float64)
    lstm = ag.nn.LSTM(2, 3)
    x = RNG.standard_normal((3, 1, 2))
    v = RNG.standard_normal((3, 1, 3))

    def loss(array):
        return float((lstm(ag.tensor(array))[0] * ag.tensor(v)).sum().detach().item())

    xt = ag.tensor(x, requires_grad=True)
    (g,) = await ag.grad((lstm(xt)[0] * ag.tensor(v)).sum(), [xt])
    numeric = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        plus, minus = x.copy(), x.copy()
        plus[i] += 1e-6
        minus[i] -= 1e-6
        numeric[i] = (loss(plus) - loss(minus)) / 2e-6
    np.testing.assert_allclose(g.numpy(), numeric, rtol=1e-6, atol=1e-8)


def test_dropout_between_layers_only_while_training():
    lstm = ag.nn.LSTM(3, 4, num_layers=2, dropout=0.5)
    x = ag.randn(5, 2, 3)
    ag.manual_seed(0)
    a = lstm(x)[0].detach().numpy()
    ag.manual_seed(1)
    b = lstm(x)[0].detach().numpy()
    assert not np.allclose(a, b)
    lstm.eval()
    np.testing.assert_array_equal(lstm(x)[0].detach().numpy(), lstm(x)[0].detach().numpy())


def test_initialisation_bound():
    gru = ag.nn.GRU(3, 16)
    bound = 1 / np.sqrt(16)
    for p in gru.parameters():
        values = p.detach().numpy()
        assert np.all(np.abs(values) <= bound) and values.std() > bound / 4


@pytest.mark.parametrize("kwargs", [{"proj_size": 2}, {"proj_size": 3, "num_layers": 2, "bidirectional": True}])
async def test_lstm_projections_match_torch(torch, kwargs):
    module, reference = _pair(torch, "LSTM", **kwargs)
    assert "weight_hr_l0" in module.state_dict()
    await _compare(torch, module, reference, RNG.standard_normal((5, 2, 3)))
    layers = kwargs.get("num_layers", 1) * (2 if kwargs.get("bidirectional") else 1)
    states = [RNG.standard_normal((layers, 2, kwargs["proj_size"])), RNG.standard_normal((layers, 2, 4))]
    await _compare(torch, module, reference, RNG.standard_normal((5, 2, 3)), states)


def test_recurrent_errors_as_torch():
    check_raises(lambda lib: lib.nn.LSTM(3, 4)(lib.randn(5, 2, 4)), RuntimeError,
                 "input.size\\(-1\\) must be equal to input_size. Expected 3, got 4")
    check_raises(lambda lib: lib.nn.GRU(3, 4)(lib.randn(5, 2, 3), lib.randn(2, 2, 4)), RuntimeError,
                 r"Expected hidden size \(1, 2, 4\), got \[2, 2, 4\]")
    check_raises(lambda lib: lib.nn.LSTM(3, 4, dropout=1.5), ValueError,
                 "dropout should be a number in range \\[0, 1\\] representing the probability of an element being "
                 "zeroed")
    check_raises(lambda lib: lib.nn.GRU(3, 4)(lib.randn(5, 3), lib.randn(1, 2, 4)), RuntimeError,
                 "For unbatched 2-D input, hx should also be 2-D but got 3-D tensor")
    check_raises(lambda lib: lib.nn.LSTM(3, 4)(lib.randn(5, 2, 3), (lib.randn(1, 2, 4), lib.randn(1, 3, 4))),
                 RuntimeError, r"Expected hidden\[1\] size \(1, 2, 4\), got \[1, 3, 4\]")
    check_raises(lambda lib: lib.nn.LSTM(3, 4, proj_size=4), ValueError, "proj_size has to be smaller than hidden_size")
    with pytest.warns(UserWarning, match="non-zero dropout expects num_layers greater than 1"):
        ag.nn.LSTM(3, 4, dropout=0.2)
