"""ag.nn.init (statistics against torch's formulas and torch's own samples: the RNG streams
differ) and ag.nn.utils (values against torch to 1e-12)."""

import math
import re

import numpy as np
import pytest

import asyncgrad as ag
from asyncgrad import nn
from asyncgrad.nn import init
from asyncgrad.nn import utils as nn_utils


def _param(*shape, dtype=ag.float64):
    return nn.Parameter(ag.zeros(*shape, dtype=dtype))


def _same_error(torch_call, ours_call, kind=ValueError):
    with pytest.raises(kind) as theirs:
        torch_call()
    with pytest.raises(kind, match=f"^{re.escape(str(theirs.value))}$"):
        ours_call()


# ---------------------------------------------------------------- init
@pytest.mark.parametrize("name,param", [("linear", None), ("conv2d", None), ("conv_transpose3d", None),
                                        ("sigmoid", None), ("tanh", None), ("relu", None), ("leaky_relu", None),
                                        ("leaky_relu", 0.2), ("leaky_relu", 3), ("selu", None)])
def test_calculate_gain_matches_torch(torch, name, param):
    assert init.calculate_gain(name, param) == torch.nn.init.calculate_gain(name, param)


# (function, kwargs, shape, the distribution's (low, high) or None for a normal, expected std)
def _bound(gain, fan):
    return gain * math.sqrt(3.0 / fan)


CASES = [
    ("kaiming_uniform_", dict(), (200, 60, 3, 3), _bound(math.sqrt(2), 540)),
    ("kaiming_uniform_", dict(a=math.sqrt(5)), (300, 400), _bound(math.sqrt(2 / 6), 400)),
    ("kaiming_uniform_", dict(mode="fan_out", nonlinearity="relu"), (100, 30, 5), _bound(math.sqrt(2), 500)),
    ("kaiming_normal_", dict(nonlinearity="relu"), (300, 400), None),
    ("kaiming_normal_", dict(mode="FAN_OUT", nonlinearity="tanh"), (120, 50, 4), None),
    ("xavier_uniform_", dict(), (300, 500), math.sqrt(6 / 800)),
    ("xavier_uniform_", dict(gain=2.0), (64, 32, 3, 3), 2 * math.sqrt(6 / (96 * 9))),
    ("xavier_normal_", dict(gain=0.5), (300, 500), None),
    ("uniform_", dict(a=-0.5, b=2.0), (400, 300), None),
    ("normal_", dict(mean=1.5, std=0.25), (400, 300), None),
    ("trunc_normal_", dict(std=2.0, a=-1.0, b=3.0), (400, 300), None),
]


@pytest.mark.parametrize("name,kwargs,shape,bound", CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_random_initialisers_have_torchs_distribution(torch, name, kwargs, shape, bound):
    ours = getattr(init, name)(_param(*shape), **kwargs, generator=np.random.default_rng(0))
    theirs = getattr(torch.nn.init, name)(torch.empty(*shape), **kwargs, generator=torch.Generator().manual_seed(0))
    a, b = ours.detach().numpy(), theirs.numpy()
    n = a.size
    assert abs(a.mean() - b.mean()) < 6 * b.std() / math.sqrt(n)
    assert abs(a.std() / b.std() - 1) < 0.02
    if "uniform" in name or "trunc" in name:  # bounded: the same support as torch's sample
        width = b.max() - b.min()
        assert abs(a.min() - b.min()) < 0.02 * width and abs(a.max() - b.max()) < 0.02 * width
    if bound is not None:
        assert -bound <= a.min() < -0.99 * bound and 0.99 * bound < a.max() <= bound
    if name == "trunc_normal_":
        assert a.min() >= -1.0 and a.max() <= 3.0


def test_initialisers_fill_in_place_and_bump_the_version():
    weight = _param(4, 3)
    data = weight.detach().numpy()
    version = weight._version
    assert init.xavier_uniform_(weight) is weight
    assert np.shares_memory(data, weight.detach().numpy()) and weight._version == version + 1
    assert weight.requires_grad and weight.is_leaf and weight.grad_fn is None and np.any(data != 0)


def test_generator_and_manual_seed_make_it_repeatable():
    a = init.kaiming_normal_(_param(5, 7), generator=np.random.default_rng(3)).tolist()
    b = init.kaiming_normal_(_param(5, 7), generator=np.random.default_rng(3)).tolist()
    ag.manual_seed(11)
    c = init.normal_(_param(5, 7)).tolist()
    ag.manual_seed(11)
    d = init.normal_(_param(5, 7)).tolist()
    assert a == b and c == d and a != c


def test_constant_initialisers_and_dtypes():
    assert init.constant_(_param(2, 2, dtype=ag.float32), 0.3).tolist() == [[np.float32(0.3)] * 2] * 2
    assert init.ones_(_param(3)).tolist() == [1.0] * 3
    assert init.zeros_(nn.Parameter(ag.ones(2))).tolist() == [0.0, 0.0]
    assert init.eye_(_param(2, 3)).tolist() == [[1, 0, 0], [0, 1, 0]]
    filled = init.uniform_(_param(10, dtype=ag.float32))
    assert filled.dtype == np.float32


@pytest.mark.parametrize("shape", [(6, 4), (4, 6), (5, 2, 3)])
def test_orthogonal(shape):
    q = init.orthogonal_(_param(*shape), gain=2.0, generator=np.random.default_rng(0)).detach().numpy()
    flat = q.reshape(shape[0], -1) / 2.0
    small = min(flat.shape)
    gram = flat.T @ flat if flat.shape[0] >= flat.shape[1] else flat @ flat.T
    np.testing.assert_allclose(gram, np.eye(small), atol=1e-12)


def test_init_errors_use_torchs_words(torch):
    _same_error(lambda: torch.nn.init.xavier_uniform_(torch.empty(5)), lambda: init.xavier_uniform_(_param(5)))
    _same_error(lambda: torch.nn.init.kaiming_uniform_(torch.empty(3, 3), mode="fan_avg"),
                lambda: init.kaiming_uniform_(_param(3, 3), mode="fan_avg"))
    _same_error(lambda: torch.nn.init.kaiming_normal_(torch.empty(3, 3), nonlinearity="swish"),
                lambda: init.kaiming_normal_(_param(3, 3), nonlinearity="swish"))
    _same_error(lambda: torch.nn.init.calculate_gain("leaky_relu", True),
                lambda: init.calculate_gain("leaky_relu", True))
    _same_error(lambda: torch.nn.init.eye_(torch.empty(2, 2, 2)), lambda: init.eye_(_param(2, 2, 2)))
    _same_error(lambda: torch.nn.init.orthogonal_(torch.empty(3)), lambda: init.orthogonal_(_param(3)))
    _same_error(lambda: torch.nn.init.normal_(torch.empty(2), generator=3),
                lambda: init.normal_(_param(2), generator=3), TypeError)
    with pytest.warns(UserWarning, match="Initializing zero-element tensors is a no-op"):
        init.kaiming_uniform_(_param(0, 3))


# ---------------------------------------------------------------- utils
def _grads_pair(torch, shapes=((3, 4), (5,), ()), scale=1.0, seed=0):
    rng = np.random.default_rng(seed)
    ours, theirs = [], []
    for shape in shapes:
        value, grad = rng.standard_normal(shape), scale * rng.standard_normal(shape)
        p, q = ag.tensor(value, requires_grad=True), torch.tensor(value, requires_grad=True)
        p.grad, q.grad = ag.tensor(grad), torch.tensor(grad)
        ours.append(p)
        theirs.append(q)
    return ours, theirs


def _assert_grads_equal(ours, theirs):
    for p, q in zip(ours, theirs):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-12, atol=1e-300)


@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0, 0.5, math.inf, -math.inf, 0.0])
@pytest.mark.parametrize("max_norm", [0.5, 1e6])
def test_clip_grad_norm_matches_torch(torch, norm_type, max_norm):
    ours, theirs = _grads_pair(torch)
    total = nn_utils.clip_grad_norm_(ours, max_norm, norm_type=norm_type)
    torch_total = torch.nn.utils.clip_grad_norm_(theirs, max_norm, norm_type=norm_type, foreach=False)
    assert isinstance(total, ag.Tensor) and total.shape == ()
    np.testing.assert_allclose(total.item(), torch_total.item(), rtol=1e-12)
    _assert_grads_equal(ours, theirs)


def test_clip_grad_norm_details(torch):
    ours, theirs = _grads_pair(torch)
    ours.append(ag.zeros(2, requires_grad=True))  # no grad: ignored
    total = nn_utils.clip_grad_norm_(iter(ours), 1.0, foreach=True)
    np.testing.assert_allclose(total.item(), torch.nn.utils.clip_grad_norm_(theirs, 1.0).item(), rtol=1e-12)
    single, torch_single = ours[0], theirs[0]
    nn_utils.clip_grad_norm_(single, 0.1)
    torch.nn.utils.clip_grad_norm_(torch_single, 0.1)
    _assert_grads_equal([single], [torch_single])
    assert nn_utils.clip_grad_norm_([ag.zeros(2, requires_grad=True)], 1.0).item() == 0.0
    f32 = ag.tensor(np.ones(3, dtype=np.float32), requires_grad=True)
    f32.grad = ag.tensor(np.full(3, 4.0, dtype=np.float32))
    assert nn_utils.clip_grad_norm_([f32], 1.0).dtype == np.float32 and f32.grad.dtype == np.float32


def test_clip_grad_norm_non_finite(torch):
    ours, theirs = _grads_pair(torch)
    ours[1].grad.data[2] = np.nan
    theirs[1].grad[2] = float("nan")
    _same_error(lambda: torch.nn.utils.clip_grad_norm_(theirs, 1.0, error_if_nonfinite=True),
                lambda: nn_utils.clip_grad_norm_(ours, 1.0, error_if_nonfinite=True), RuntimeError)
    assert math.isnan(nn_utils.clip_grad_norm_(ours, 1.0).item())
    torch.nn.utils.clip_grad_norm_(theirs, 1.0)
    assert np.isnan(ours[0].grad.numpy()).all() and np.isnan(theirs[0].grad.numpy()).all()


@pytest.mark.parametrize("clip_value", [0.3, 5.0])
def test_clip_grad_value_matches_torch(torch, clip_value):
    ours, theirs = _grads_pair(torch, scale=2.0)
    ours.append(ag.zeros(2, requires_grad=True))
    assert nn_utils.clip_grad_value_(ours, clip_value) is None
    torch.nn.utils.clip_grad_value_(theirs, clip_value)
    _assert_grads_equal(ours[:-1], theirs)
    assert max(float(np.abs(p.grad.numpy()).max()) for p in ours[:-1]) <= clip_value


async def test_parameters_to_vector_is_differentiable(torch):
    ours, theirs = _grads_pair(torch)
    vec, torch_vec = nn_utils.parameters_to_vector(ours), torch.nn.utils.parameters_to_vector(theirs)
    np.testing.assert_array_equal(vec.detach().numpy(), torch_vec.detach().numpy())
    weights = np.arange(vec.numel(), dtype=np.float64)
    for p in ours:
        p.grad = None
    await (vec * ag.tensor(weights)).sum().backward()
    assert np.concatenate([p.grad.numpy().reshape(-1) for p in ours]).tolist() == weights.tolist()


def test_vector_to_parameters(torch):
    ours, theirs = _grads_pair(torch)
    memory = [p.detach().numpy() for p in ours]
    vec = ag.tensor(np.linspace(-1, 1, 18))
    nn_utils.vector_to_parameters(vec, ours)
    torch.nn.utils.vector_to_parameters(torch.linspace(-1, 1, 18), theirs)
    for p, q, m in zip(ours, theirs, memory):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-15)
        assert np.shares_memory(m, p.detach().numpy()) and p.requires_grad and p.is_leaf
    _same_error(lambda: torch.nn.utils.vector_to_parameters([1.0], theirs),
                lambda: nn_utils.vector_to_parameters([1.0], ours), TypeError)
    with pytest.raises(TypeError, match="Found two parameters on different devices"):
        nn_utils.parameters_to_vector([ag.zeros(1), ag.zeros(1, device="sim:0")])
