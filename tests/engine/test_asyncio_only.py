"""Under trio every engine entry point refuses at once, saying asyncgrad needs asyncio (Note [asyncio only]).

The engine's queues, futures and kernel threads are asyncio's. Before, a backward under
``anyio.run(main, backend="trio")`` failed with "no running event loop" (naming neither
library) and ``backward_sync`` started a private asyncio loop that, with large kernels, crashed
with "Task got bad yield". Now each entry point raises a ``RuntimeError`` naming trio and
saying how to run the program; code in a trio worker thread (no async library there) runs.
"""

from __future__ import annotations

import asyncio

import anyio
import numpy as np
import pytest

import asyncgrad as ag
from asyncgrad import functional
from asyncgrad.graph import awaitable

trio = pytest.importorskip("trio", reason="the trio tests need trio (the 'test' extra)")


def _refusal(what: str) -> str:
    return (f"{what} needs asyncio, but this code runs under trio: asyncgrad's engine runs on an asyncio event "
            f"loop. Run your program with asyncio.run(main()) or anyio.run(main, backend='asyncio'); trio is not "
            f"supported (trio-asyncio included).")


def _cube(seed: int = 0) -> tuple[ag.Tensor, np.ndarray]:
    data = np.random.default_rng(seed).standard_normal(3)
    return ag.tensor(data, requires_grad=True), data


def _refused_under_trio(make_call, what: str, awaited: bool) -> None:
    """Run ``make_call`` (and await its result) inside ``anyio.run(..., backend="trio")``; it must refuse."""
    seen = []

    async def main():
        with pytest.raises(RuntimeError) as info:
            result = make_call()
            if awaited:
                await result
        seen.append(str(info.value))

    anyio.run(main, backend="trio")
    assert seen == [_refusal(what)]
    assert not awaitable.pending


@pytest.mark.parametrize("what, make_call", [
    ("backward()", lambda x: (x * x * x).sum().backward()),
    ("backward()", lambda x: ag.backward((x * x).sum())),
    ("grad()", lambda x: ag.grad((x * x).sum(), x)),
])
def test_backward_and_grad_refuse_when_called(what, make_call):
    """The call itself raises: no coroutine left unawaited, no engine started."""
    x, _ = _cube()
    _refused_under_trio(lambda: make_call(x), what, awaited=False)
    assert x.grad is None


@pytest.mark.parametrize("what, make_call", [
    ("backward_sync()", lambda x: (x * x * x).sum().backward_sync()),
    ("backward_sync()", lambda x: ag.backward_sync((x * x).sum())),
    ("grad_sync()", lambda x: ag.grad_sync((x * x).sum(), x)),
])
def test_blocking_bridges_refuse_instead_of_starting_a_private_loop(what, make_call):
    x, _ = _cube()
    _refused_under_trio(lambda: make_call(x), what, awaited=False)
    assert x.grad is None


def test_blocking_bridge_refuses_with_large_kernels():
    """The case that crashed with "Task got bad yield": kernels big enough to go to worker threads."""
    a = ag.tensor(np.random.default_rng(0).standard_normal((256, 256)), requires_grad=True)
    _refused_under_trio(lambda: (a @ a @ a).sum().backward_sync(), "backward_sync()", awaited=False)
    assert a.grad is None


@pytest.mark.parametrize("name, args", [
    ("vjp", lambda x: (lambda a: a * a, x, ag.ones(3, dtype=ag.float64))),
    ("jvp", lambda x: (lambda a: a * a, x, ag.ones(3, dtype=ag.float64))),
    ("jacobian", lambda x: (lambda a: a * a, x)),
    ("hessian", lambda x: (lambda a: (a * a * a).sum(), x)),
    ("hvp", lambda x: (lambda a: (a * a * a).sum(), x, ag.ones(3, dtype=ag.float64))),
    ("vhp", lambda x: (lambda a: (a * a * a).sum(), x, ag.ones(3, dtype=ag.float64))),
])
def test_functional_refuses_at_its_first_engine_call(name, args):
    x, _ = _cube()
    _refused_under_trio(lambda: getattr(functional, name)(*args(x)), "grad()", awaited=True)


@pytest.mark.parametrize("name", ["gradcheck", "gradgradcheck"])
def test_gradcheck_refuses_before_evaluating_anything(name):
    x, _ = _cube()
    calls = []

    def fn(a):
        calls.append(1)
        return a * a

    _refused_under_trio(lambda: getattr(ag, name)(fn, (x,)), f"{name}()", awaited=True)
    assert calls == []


def test_checkpointed_backward_refuses():
    """The forward of a checkpoint runs no engine; its backward, like any other, refuses."""
    x, _ = _cube()

    async def main():
        out = await ag.checkpoint(lambda a: a * a, x)
        with pytest.raises(RuntimeError, match=r"^backward\(\) needs asyncio, but this code runs under trio"):
            out.sum().backward()

    anyio.run(main, backend="trio")
    assert x.grad is None


def test_optimizer_steps_use_no_engine_and_run_under_trio():
    """step() and zero_grad() are plain functions of .grad: nothing in them needs a loop."""
    x, data = _cube()

    async def main():
        opt = ag.optim.SGD([x], lr=0.5)
        x.grad = ag.tensor(np.ones(3))
        opt.step()
        opt.zero_grad()

    anyio.run(main, backend="trio")
    np.testing.assert_allclose(x.detach().numpy(), data - 0.5)
    assert x.grad is None


def test_lbfgs_step_awaits_a_closure_whose_backward_refuses():
    """The one optimizer path that awaits: ``await LBFGS.step(closure)`` runs the closure's backward."""
    x, data = _cube()
    opt = ag.optim.LBFGS([x], max_iter=3)

    async def closure():
        opt.zero_grad()
        loss = (x * x * x).sum()
        await loss.backward()
        return loss

    _refused_under_trio(lambda: opt.step(closure), "backward()", awaited=True)
    np.testing.assert_array_equal(x.detach().numpy(), data)


def test_trio_worker_thread_runs_blocking_backward():
    """``trio.to_thread.run_sync``: no async library runs in that thread, so the blocking bridge works there."""
    a_data = np.random.default_rng(1).standard_normal((256, 256))
    a = ag.tensor(a_data, requires_grad=True)

    def work():
        (a @ a).sum().backward_sync()

    async def main():
        await trio.to_thread.run_sync(work)

    trio.run(main)
    ones = np.ones_like(a_data)
    np.testing.assert_allclose(a.grad.numpy(), ones @ a_data.T + a_data.T @ ones)


def test_anyio_on_asyncio_is_unaffected():
    x, data = _cube()

    async def main():
        await (x * x * x).sum().backward()
        (g,) = await ag.grad((x * x).sum(), x)
        return g

    g = anyio.run(main, backend="asyncio")
    np.testing.assert_allclose(x.grad.numpy(), 3 * data**2)
    np.testing.assert_allclose(g.numpy(), 2 * data)
    assert asyncio._get_running_loop() is None
