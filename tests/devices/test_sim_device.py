"""sim:N end to end: its arrays are array_api_strict's (Note [One array backend per device]), so
what would break on a GPU breaks here. Host conversions are refused as torch refuses them for an
accelerator, every factory gives strict arrays holding the values the cpu gets for the same seed,
and the code around the ops (engine accumulation and checks, gradient stealing, custom Functions,
gradcheck, save/load, nn.init, data loading) runs on them.
"""

from __future__ import annotations

import io

import array_api_strict
import numpy as np
import pytest

import asyncgrad as ag
from asyncgrad.devices.ownership import owned_by
from asyncgrad.utils.data import DataLoader, TensorDataset

SIM = ag.device("sim:0")
REFUSAL = ("can't convert sim:0 device type tensor to numpy. Use Tensor.cpu() to copy the tensor to host memory "
           "first.")


def _strict(t: ag.Tensor) -> bool:
    """Whether ``t`` holds an array_api_strict array on its sim device's strict device."""
    return isinstance(t.data, array_api_strict._array_object.Array) and t.data.device == t.device.backend.device


# --------------------------------------------------------------------------- host conversions
def test_numpy_and_np_asarray_refuse_a_sim_tensor_and_cpu_then_works():
    t = ag.tensor([1.0, 2.0], device="sim:0")
    with pytest.raises(TypeError) as info:
        t.numpy()
    assert str(info.value) == REFUSAL
    with pytest.raises(TypeError) as info:
        np.asarray(t)
    assert str(info.value) == REFUSAL
    with pytest.raises(TypeError) as info:  # the device is checked before requires_grad, as in torch
        ag.ones(2, device="sim:0", requires_grad=True).numpy()
    assert str(info.value) == REFUSAL
    host = t.cpu()
    assert host.device is ag.device("cpu") and isinstance(host.data, np.ndarray)
    np.testing.assert_array_equal(host.numpy(), [1.0, 2.0])
    np.testing.assert_array_equal(np.asarray(host), [1.0, 2.0])
    assert t.tolist() == [1.0, 2.0] and t[1].item() == 2.0  # item/tolist copy to the host themselves


def test_tensor_from_numpy_data_is_a_strict_copy():
    host = np.arange(6, dtype=np.float64).reshape(2, 3)
    t = ag.tensor(host, device="sim:0")
    assert _strict(t) and t.dtype == ag.float64 and t.shape == (2, 3)
    host[0, 0] = 100.0
    assert t.cpu().tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    assert ag.tensor([1, 2], device="sim:0").dtype == ag.int64
    assert ag.tensor(t).device is ag.device("cpu")  # a tensor's values, copied through the host
    assert _strict(ag.tensor(ag.ones(2), device="sim:1"))
    nest = ag.tensor([ag.tensor(1.0, device="sim:0"), ag.tensor(2.0, device="sim:0")])  # read as torch reads them
    assert nest.device is ag.device("cpu") and nest.tolist() == [1.0, 2.0]
    strict = array_api_strict.asarray([1.0, 2.0], dtype=array_api_strict.float64, device=SIM.backend.device)
    for device in ("cpu", "sim:0"):  # an Array API library's array: copied through the host, its dtype kept
        t = ag.tensor(strict, device=device)
        assert t.device is ag.device(device) and t.dtype == ag.float64 and t.tolist() == [1.0, 2.0]


# --------------------------------------------------------------------------- factories
FACTORIES = {
    "zeros": lambda d: ag.zeros(2, 3, device=d),
    "ones": lambda d: ag.ones(2, 3, dtype=ag.float64, device=d),
    "full": lambda d: ag.full((2, 2), 7, device=d),
    "full float": lambda d: ag.full((3,), 0.5, device=d),
    "empty": lambda d: ag.empty(2, device=d).zero_(),
    "eye": lambda d: ag.eye(3, 4, device=d),
    "arange": lambda d: ag.arange(10, device=d),
    "arange float": lambda d: ag.arange(0.0, 1.0, 0.1, device=d),
    "linspace": lambda d: ag.linspace(-1, 1, 7, device=d),
    "zeros_like": lambda d: ag.zeros_like(ag.ones(2, device=d)),
    "ones_like": lambda d: ag.ones_like(ag.ones(2, device=d), dtype=ag.int64),
    "full_like": lambda d: ag.full_like(ag.ones(2, device=d), 3.5),
    "empty_like": lambda d: ag.empty_like(ag.ones(2, device=d)).fill_(1.0),
    "randn": lambda d: ag.randn(3, 4, device=d),
    "rand": lambda d: ag.rand(5, dtype=ag.float64, device=d),
    "randn_like": lambda d: ag.randn_like(ag.ones(2, 2, device=d)),
    "rand_like": lambda d: ag.rand_like(ag.ones(3, device=d)),
    "randint": lambda d: ag.randint(0, 10, (6,), device=d),
    "randint_like": lambda d: ag.randint_like(ag.ones(4, device=d), 5, 9),
    "randperm": lambda d: ag.randperm(8, device=d),
    "normal floats": lambda d: ag.normal(1.0, 2.0, (4,), device=d),
    "normal tensor mean": lambda d: ag.normal(ag.arange(4.0, device=d), 1.0),
    "normal tensor std": lambda d: ag.normal(0.0, ag.full((3,), 2.0, device=d)),
    "normal both": lambda d: ag.normal(ag.zeros(2, 1, device=d), ag.ones(1, 3, device=d)),
    "bernoulli": lambda d: ag.bernoulli(ag.full((8,), 0.5, device=d)),
    "bernoulli p": lambda d: ag.ones(8, device=d).bernoulli(0.3),
    "multinomial": lambda d: ag.multinomial(ag.tensor([[1.0, 2.0, 3.0], [0.0, 1.0, 1.0]], device=d), 2),
    "multinomial replacement": lambda d: ag.tensor([1.0, 1.0, 2.0], device=d).multinomial(5, replacement=True),
    "uniform_": lambda d: ag.empty(4, device=d).uniform_(-1, 1),
    "normal_": lambda d: ag.empty(4, device=d).normal_(2.0, 0.5),
    "bernoulli_": lambda d: ag.empty(6, device=d).bernoulli_(0.5),
    "bernoulli_ tensor": lambda d: ag.empty(2, 3, device=d).bernoulli_(ag.full((3,), 0.5, device=d)),
}


@pytest.mark.parametrize("name", list(FACTORIES))
def test_factories_give_strict_arrays_with_the_cpu_values_for_the_same_seed(name):
    ag.manual_seed(1234)
    on_cpu = FACTORIES[name]("cpu")
    ag.manual_seed(1234)
    on_sim = FACTORIES[name]("sim:0")
    assert on_sim.device is SIM and _strict(on_sim)
    assert on_sim.dtype == on_cpu.dtype and on_sim.shape == on_cpu.shape
    np.testing.assert_array_equal(on_sim.cpu().numpy(), on_cpu.numpy())


def test_generators_draw_on_the_host_for_every_device():
    """Note [Random numbers come from the host]: one stream per ag.Generator, whichever device takes the sample."""
    g = ag.Generator().manual_seed(5)
    first = ag.randn(3, generator=g, device="sim:0")
    second = ag.randn(3, generator=g, device="cpu")
    h = ag.Generator().manual_seed(5)
    np.testing.assert_array_equal(ag.randn(6, generator=h).numpy(), np.concatenate([first.cpu().numpy(),
                                                                                 second.numpy()]))


def test_factories_requires_grad_and_refusals_on_sim():
    w = ag.zeros(2, device="sim:0", requires_grad=True)
    assert w.requires_grad and w.is_leaf
    with pytest.raises(RuntimeError, match="Only Tensors of floating point and complex dtype can require gradients"):
        ag.arange(3, device="sim:0", requires_grad=True)
    with pytest.raises(RuntimeError, match="normal expects all elements of std >= 0.0"):
        ag.normal(0.0, ag.tensor([-1.0], device="sim:0"))


async def test_random_ops_record_zero_gradients_on_sim():
    mean = ag.zeros(3, device="sim:0", requires_grad=True)
    std = ag.ones(3, device="sim:0", requires_grad=True)
    sample = ag.normal(mean, std)
    assert sample.grad_fn.name() == "NormalBackward3" and _strict(sample)
    await sample.sum().backward()
    for t in (mean, std):
        assert t.grad.device is SIM and _strict(t.grad) and t.grad.tolist() == [0.0, 0.0, 0.0]
    p = ag.full((2,), 0.5, device="sim:0", requires_grad=True)
    (g,) = await ag.grad(ag.bernoulli(p).sum(), p, create_graph=True)
    assert g.device is SIM and g.tolist() == [0.0, 0.0]


# --------------------------------------------------------------------------- the engine around the ops
async def test_accumulation_stealing_and_materialized_grads_on_sim():
    w = ag.ones(3, device="sim:0", requires_grad=True)
    x = ag.tensor([1.0, 2.0, 3.0], device="sim:0")
    y = w * x
    await (y + y * 2).sum().backward()  # two gradients meet in y's input buffer
    assert _strict(w.grad) and w.grad.tolist() == [3.0, 6.0, 9.0]
    grad = w.grad
    await (w * x).sum().backward()  # added into the existing .grad in place
    assert w.grad is grad and w.grad.tolist() == [4.0, 8.0, 12.0]
    unused = ag.ones(2, device="sim:0", requires_grad=True)
    g, none = await ag.grad((w * 2).sum(), (w, unused), materialize_grads=True)
    assert _strict(g) and g.tolist() == [2.0, 2.0, 2.0]
    assert _strict(none) and none.tolist() == [0.0, 0.0]
    (h,) = await ag.grad(w.sum(), w, grad_outputs=ag.tensor(2.0, dtype=ag.float64, device="sim:0"))
    assert h.dtype == ag.float32 and h.tolist() == [2.0, 2.0, 2.0]


def test_gradient_stealing_asks_the_backend_about_memory():
    xp = array_api_strict
    own = [xp.ones(3, device=SIM.backend.device)]
    assert owned_by(own, 0)
    alias = xp.asarray(own[0])  # a second wrapper around the same memory: writing in place would show there
    assert not owned_by(own, 0)
    del alias
    assert owned_by(own, 0)
    assert not owned_by([xp.reshape(own[0], (3, 1))], 0)  # a view
    held = own[0]
    assert not owned_by(own, 0)
    del held
    assert not owned_by([ag.ones(2, device="sim:0")], 0)  # a Tensor is never stolen


async def test_anomaly_mode_finds_nan_on_sim():
    x = ag.tensor([0.0, 1.0], device="sim:0", requires_grad=True)
    with ag.detect_anomaly():
        y = (x * ag.tensor([float("nan"), 1.0], device="sim:0")).sum()
        with pytest.raises(RuntimeError, match="Function 'MulBackward0' returned nan values in its 0th output."):
            await y.backward()
    z = (x * 2).sum()
    with ag.detect_anomaly():  # and no false alarm
        await z.backward()
    assert x.grad.tolist() == [2.0, 2.0]


async def test_custom_function_on_sim_gets_materialized_zeros_there():
    seen = []

    class Two(ag.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, a, b):
            seen.append(b)
            return a * 2 + b * 3

    x = ag.ones(2, device="sim:0", requires_grad=True)
    a, _ = Two.apply(x)
    await a.sum().backward()
    assert seen[0].device is SIM and _strict(seen[0]) and seen[0].tolist() == [0.0, 0.0]
    assert x.grad.tolist() == [2.0, 2.0]


async def test_gradcheck_and_gradgradcheck_on_sim():
    x = ag.tensor([0.3, -1.2, 2.0], dtype=ag.float64, device="sim:0", requires_grad=True)
    assert await ag.gradcheck(lambda t: (t * t).sum(), (x,))
    assert await ag.gradgradcheck(lambda t: t * t * t, (x,))
    assert x.cpu().tolist() == [0.3, -1.2, 2.0]  # the perturbations were undone


async def test_jacobian_of_a_function_on_sim():
    x = ag.tensor([1.0, 2.0], device="sim:0")
    jac = await ag.functional.jacobian(lambda t: t * t, x)
    assert jac.device is SIM and jac.cpu().tolist() == [[2.0, 0.0], [0.0, 4.0]]


# --------------------------------------------------------------------------- save/load, nn, data
def test_save_and_load_keep_sim_values():
    w = ag.randn(2, 3, device="sim:0", requires_grad=True)
    buffer = io.BytesIO()
    ag.save({"w": w, "n": 1}, buffer)
    buffer.seek(0)
    loaded = ag.load(buffer)
    assert loaded["w"].device is SIM and _strict(loaded["w"]) and loaded["w"].requires_grad
    np.testing.assert_array_equal(loaded["w"].detach().cpu().numpy(), w.detach().cpu().numpy())
    buffer.seek(0)
    on_cpu = ag.load(buffer, map_location="cpu")["w"]
    np.testing.assert_array_equal(on_cpu.detach().numpy(), w.detach().cpu().numpy())


def test_init_and_modules_on_sim_match_cpu():
    for init in (lambda t: ag.nn.init.kaiming_uniform_(t, a=5 ** 0.5), ag.nn.init.xavier_normal_,
                 ag.nn.init.orthogonal_, ag.nn.init.eye_, lambda t: ag.nn.init.trunc_normal_(t, std=0.5)):
        ag.manual_seed(3)
        cpu = init(ag.empty(3, 4))
        ag.manual_seed(3)
        sim = init(ag.empty(3, 4, device="sim:0"))
        assert _strict(sim)
        np.testing.assert_array_equal(sim.cpu().numpy(), cpu.numpy())
    vec = ag.arange(5.0, device="sim:0")
    params = [ag.zeros(2, device="sim:0"), ag.zeros(3, device="sim:0")]
    ag.nn.utils.vector_to_parameters(vec, params)
    assert [p.tolist() for p in params] == [[0.0, 1.0], [2.0, 3.0, 4.0]]
    assert ag.nn.utils.parameters_to_vector(params).device is SIM


async def test_training_on_sim_follows_cpu():
    losses = {}
    for device in ("cpu", "sim:0"):
        ag.manual_seed(0)
        model = ag.nn.Sequential(ag.nn.Linear(3, 4, device=device), ag.nn.ReLU(), ag.nn.Linear(4, 1, device=device))
        opt = ag.optim.Adam(model.parameters(), lr=0.05)
        x = ag.randn(16, 3, device=device)
        y = (x * ag.tensor([1.0, -2.0, 0.5], device=device)).sum(1, keepdim=True)
        loader = DataLoader(TensorDataset(x, y), batch_size=4, shuffle=True, generator=7)
        history = []
        for _ in range(3):
            async for xb, yb in loader:
                assert xb.device is ag.device(device)
                loss = ag.nn.functional.mse_loss(model(xb), yb)
                opt.zero_grad()
                await loss.backward()
                opt.step()
                history.append(loss.item())
        losses[device] = history
    np.testing.assert_allclose(losses["sim:0"], losses["cpu"], rtol=1e-5, atol=1e-6)
