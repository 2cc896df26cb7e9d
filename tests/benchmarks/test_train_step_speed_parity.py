"""What the MLP training step (``python -m benchmarks.train_loop``) relies on to run at torch's
speed, pinned by behaviour, never by time: a backward without user code starts its server without
a greenback portal, and one that may run user code still gets one, also when that becomes so while
a server waits (Note [Servers become portals on demand] in engine/worker.py)."""

from __future__ import annotations

import asyncio

import greenback
import numpy as np
import pytest

import asyncgrad as ag
import asyncgrad.engine.worker as worker_module
from asyncgrad.engine.engine import get_engine
from asyncgrad.graph import node as graph_module


@pytest.fixture
def no_user_code_yet(monkeypatch):
    """The flags as in a fresh process that has registered no hook, entered no saved-tensor hooks
    and recorded no plain custom backward; restored afterwards (they never go back to False by
    themselves). Yields the tasks the worker makes portals of."""
    flags = (graph_module.portal_needed, graph_module.hooks_in_use)
    before = [flag[0] for flag in flags]
    for flag in flags:
        flag[0] = False
    bestowed = []
    real = worker_module.greenback.bestow_portal

    def counting(task):
        bestowed.append(task)
        return real(task)

    monkeypatch.setattr(worker_module.greenback, "bestow_portal", counting)
    try:
        yield bestowed
    finally:
        for flag, value in zip(flags, before):
            flag[0] = flag[0] or value


def _nested(w):
    """A nested backward of a fresh graph of ``w``, from plain code the engine runs."""
    with ag.enable_grad():
        loss = (w * w).sum()
    ag.backward_sync(loss)


def _mlp(lib, rng):
    w1 = lib.tensor(rng.standard_normal((5, 4)), requires_grad=True)
    b1 = lib.tensor(rng.standard_normal(4), requires_grad=True)
    w2 = lib.tensor(rng.standard_normal((4, 3)), requires_grad=True)
    x = lib.tensor(rng.standard_normal((6, 5)))
    y = lib.tensor(rng.integers(0, 3, 6))
    return (w1, b1, w2), x, y


async def test_a_backward_without_user_code_gets_no_portal(no_user_code_yet, torch):
    params, x, y = _mlp(ag, np.random.default_rng(0))
    t_params, t_x, t_y = _mlp(torch, np.random.default_rng(0))
    w1, b1, w2 = params
    await ag.nn.functional.cross_entropy((x @ w1 + b1).relu() @ w2, y).backward()
    tw1, tb1, tw2 = t_params
    torch.nn.functional.cross_entropy((t_x @ tw1 + tb1).relu() @ tw2, t_y).backward()
    assert no_user_code_yet == [], "no server of a backward without user code is a greenback portal"
    for a, t in zip(params, t_params):
        np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), rtol=1e-12, atol=1e-14)


async def test_a_hook_registered_before_the_backward_gets_a_portal_from_the_start(no_user_code_yet):
    x = ag.tensor([0.5, -1.0, 2.0], dtype=ag.float64, requires_grad=True)
    w = ag.tensor([1.5, 0.25, -0.75], dtype=ag.float64, requires_grad=True)
    h = x.sin()
    h.register_hook(lambda g: _nested(w))
    await (h * 3).sum().backward()
    names = [task.get_name() for task in no_user_code_yet]
    assert names == ["asyncgrad worker cpu", "asyncgrad helper cpu"], "the server got its portal as it started"
    np.testing.assert_allclose(x.grad.numpy(), 3 * np.cos([0.5, -1.0, 2.0]))
    np.testing.assert_allclose(w.grad.numpy(), [3.0, 0.5, -1.5])


@pytest.mark.parametrize("kind", ["hook", "plain-backward"])
async def test_a_waiting_server_becomes_a_portal_when_user_code_appears(no_user_code_yet, kind):
    """Backward A keeps the cpu server alive (its ``async def`` custom backward waits on an event)
    and started it without a portal; then a hook (or a plain-def custom backward) that reenters
    the engine is recorded and backward B runs on the same server: the server makes itself a portal
    before B's first node, and both backwards give their gradients."""
    release = asyncio.Event()

    class Waits(ag.Function):
        @staticmethod
        def forward(ctx, t):
            return t * 2

        @staticmethod
        async def backward(ctx, g):
            await release.wait()
            return g * 2

    class Reenters(ag.Function):
        @staticmethod
        def forward(ctx, t):
            return t * 1

        @staticmethod
        def backward(ctx, g):
            _nested(w)
            return g

    a = ag.tensor([1.0, 2.0], dtype=ag.float64, requires_grad=True)
    run_a = asyncio.get_running_loop().create_task(Waits.apply(a).sum().backward())
    for _ in range(5):  # A's root ran and its Waits node task is waiting; the server waits on its queue
        await asyncio.sleep(0)
    server = get_engine().workers[ag.device("cpu")].task
    assert server is not None and not server.done()
    assert server not in no_user_code_yet and not greenback.has_portal(server), "A's server has no portal"
    b = ag.tensor([0.5, -1.0], dtype=ag.float64, requires_grad=True)
    w = ag.tensor([3.0, -2.0], dtype=ag.float64, requires_grad=True)
    if kind == "hook":
        h = b.exp()
        h.register_hook(lambda g: _nested(w))
        loss = (h * 1).sum()
    else:
        loss = Reenters.apply(b.exp()).sum()
    await loss.backward()
    np.testing.assert_allclose(b.grad.numpy(), np.exp([0.5, -1.0]))
    np.testing.assert_allclose(w.grad.numpy(), [6.0, -4.0])
    assert not run_a.done()
    assert get_engine().workers[ag.device("cpu")].task is server, "B ran on A's server"
    assert greenback.has_portal(server)
    release.set()
    await run_a
    np.testing.assert_allclose(a.grad.numpy(), [2.0, 2.0])


# Note [Reductions without numpy's wrappers] in devices/backend.py: the ufunc's reduce is the very
# computation numpy's function runs, so every result is the same bit for bit
_REDUCED = [
    np.random.default_rng(1).standard_normal((64, 10)),
    np.random.default_rng(2).standard_normal((3, 4, 5)).astype(np.float32),
    np.arange(7, dtype=np.int32),
    np.array([True, False, True]),
    np.float64(2.5),
    np.array(3.0),
]


@pytest.mark.parametrize("array", _REDUCED, ids=lambda a: f"{a.dtype}{list(np.shape(a))}")
def test_backend_reductions_are_numpys_bit_for_bit(array):
    backend = ag.device("cpu").backend
    axes = [None] + list(range(np.ndim(array))) + ([(0, np.ndim(array) - 1)] if np.ndim(array) > 1 else [])
    for axis in axes:
        for keepdims in (False, True):
            for ours, numpys in ((backend.sum, np.sum), (backend.max, np.max)):
                got, want = ours(array, axis=axis, keepdims=keepdims), numpys(array, axis=axis, keepdims=keepdims)
                assert type(got) is type(want) and got.dtype == want.dtype and np.shape(got) == np.shape(want)
                np.testing.assert_array_equal(got, want, strict=True)
    assert backend.any(array) is bool(np.any(array))
    assert backend.any(np.zeros(3, dtype=bool)) is False


async def test_backend_reductions_on_the_simulated_device():
    data = np.random.default_rng(3).standard_normal((4, 6))
    dev = ag.device("sim:0")
    x = dev.backend.from_host(data)
    np.testing.assert_array_equal(dev.backend.to_host(dev.backend.sum(x, axis=1, keepdims=True)),
                                  np.sum(data, axis=1, keepdims=True))
    np.testing.assert_array_equal(dev.backend.to_host(dev.backend.max(x, axis=0)), np.max(data, axis=0))
    assert dev.backend.any(x > 0) is True


@pytest.mark.parametrize("device", ["cpu", "sim:0"])
async def test_cross_entropy_step_is_torchs_and_its_own_formula(device, torch):
    """W3's loss: log_softmax + nll_loss (and their backward, whose bias gradients are sums) against
    torch, and the log-probabilities against numpy's own functions, exactly."""
    rng = np.random.default_rng(4)
    logits, target = rng.standard_normal((64, 10)), rng.integers(0, 10, 64)
    w = ag.tensor(logits, requires_grad=True, device=device)
    b = ag.tensor(rng.standard_normal(10), requires_grad=True, device=device)
    y = ag.tensor(target, device=device)
    z = w + b
    logp = ag.nn.functional.log_softmax(z, 1)
    shifted = logits + b.detach().cpu().numpy() - np.max(logits + b.detach().cpu().numpy(), axis=1, keepdims=True)
    np.testing.assert_array_equal(logp.detach().cpu().numpy(),
                                  shifted - np.log(np.sum(np.exp(shifted), axis=1, keepdims=True)))
    loss = ag.nn.functional.cross_entropy(z, y)
    await loss.backward()
    tw = torch.tensor(logits, requires_grad=True)
    tb = torch.tensor(b.detach().cpu().numpy(), requires_grad=True)
    t_loss = torch.nn.functional.cross_entropy(tw + tb, torch.tensor(target))
    t_loss.backward()
    np.testing.assert_allclose(loss.item(), t_loss.item(), rtol=1e-14)
    np.testing.assert_allclose(w.grad.cpu().numpy(), tw.grad.numpy(), rtol=1e-12, atol=1e-16)
    np.testing.assert_allclose(b.grad.cpu().numpy(), tb.grad.numpy(), rtol=1e-12, atol=1e-16)
    np.testing.assert_array_equal(b.grad.cpu().numpy(), np.sum(w.grad.cpu().numpy(), axis=0))


@pytest.mark.parametrize("op_device", ["cpu", "sim:0"], indirect=True)
async def test_the_mlp_step_ops_against_finite_differences_and_torch(op_device):
    """The ops whose reductions changed (log_softmax, nll_loss, a broadcast bias add) and a
    matmul + bias + relu layer: values and gradients against central differences and torch."""
    from helpers import check_op

    target = np.random.default_rng(5).integers(0, 5, 6)
    await check_op(lambda lib, z, t: lib.nn.functional.cross_entropy(z, t), (6, 5), target)
    await check_op(lambda lib, z: lib.nn.functional.log_softmax(z, 1), (6, 5), name="LogSoftmaxBackward0")
    await check_op(lambda lib, x, w, b: (x @ w + b).relu(), (6, 4), (4, 3), (3,), seed=2)
