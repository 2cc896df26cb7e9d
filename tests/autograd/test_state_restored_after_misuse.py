"""No state outlives its scope: each misuse below runs, then a fresh backward must see pristine state.

Note [A switch restored where its scope ends] (asyncgrad/graph/switches.py) and Note
[Saved-tensor hooks are a stack per context] (asyncgrad/graph/node.py) hold under these
misuses, each a test here:

1. an unpack hook that enters the ``saved_tensors_hooks`` block that recorded its graph again
   during backward, never exiting it (torch's test_saved_tensor_hooks_extra_enter_during_bw_no_leak),
   through the sync bridge and awaited; with the cyclic collector off, the hook is freed at once;
2. an unpack hook that exits that block during backward, then ten extra exits after
   (torch's test_saved_tensor_hooks_extra_exit_during_bw_no_crash);
3. one manager object of each kind (grad mode, inference mode, anomaly mode, saved-tensor hooks
   and their disabling, the multithreading switch, a record_function range) shared by two
   interleaved tasks;
4. a manager entered in one task and exited in another;
5. a manager exited twice, and a saved_tensors_hooks exited with nothing entered;
6. an exception, a ``BaseException`` and a cancellation (a timeout) inside every manager at once,
   and inside a backward run in them (a custom backward that raises, an async one cancelled);
7. hooks run during backward that switch grad mode, anomaly mode, inference mode or saved-tensor
   hooks on and never switch them back;
8. a generator decorated with ``no_grad`` abandoned half way, and one closed while suspended;
9. ``allow_mutation_on_saved_tensors`` left by an exception, and nested (refused);
10. a profiler left by an exception, and exited in another task;
11. ``set_grad_enabled`` / ``set_detect_anomaly`` / ``set_multithreading_enabled`` used as
    context managers and left by an exception.

Pristine: grad mode on, inference mode off (no open block counted), anomaly mode off, no
saved-tensor hooks or their disabling in this context, multithreading on, no recorder or open
range, no allow-mutation block, the default dtype as it was; and a fresh backward run (awaited
and through the sync bridge) sees no pack or unpack hook, grad mode off inside, anomaly mode off,
and computes the right gradient.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import weakref

import numpy as np
import pytest

import asyncgrad as ag
from asyncgrad.autograd import grad_mode
from asyncgrad.graph.node import _outer_hooks, mutation_context, saved_hooks, saved_hooks_disabled
from asyncgrad.graph.recorder import PROFILING, current_recorder, open_ranges

hooks_cls = ag.autograd.graph.saved_tensors_hooks


def _state() -> dict:
    return {
        "grad": ag.is_grad_enabled(),
        "inference": ag.is_inference_mode_enabled(),
        "anomaly": ag.is_anomaly_enabled(),
        "hooks": saved_hooks.get(),
        "outer hooks": _outer_hooks.get(),
        "hooks disabled": saved_hooks_disabled.get(),
        "multithreading": grad_mode.multithreading_enabled.get(),
        "recorder": current_recorder.get(),
        "profiling": list(PROFILING),
        "ranges": open_ranges.get(),
        "allow mutation": mutation_context[0],
        "dtype": ag.get_default_dtype(),
    }


PRISTINE = {"grad": True, "inference": False, "anomaly": False, "hooks": None,
            "outer hooks": (), "hooks disabled": None, "multithreading": True, "recorder": None, "profiling": [],
            "ranges": (), "allow mutation": None}


def _graph():
    """A fresh graph and a record of what its backward sees inside."""
    seen: dict = {}
    x = ag.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x.exp()

    def probe(g):
        seen.update(grad=ag.is_grad_enabled(), anomaly=ag.is_anomaly_enabled(), hooks=saved_hooks.get(),
                    inference=ag.is_inference_mode_enabled())

    y.register_hook(probe)
    return x, y.sum(), seen


def _check(x, seen) -> None:
    np.testing.assert_allclose(x.grad.numpy(), np.exp([1.0, 2.0, 3.0]), rtol=1e-6)
    assert seen == {"grad": False, "anomaly": False, "hooks": None, "inference": False}


def assert_pristine_sync() -> None:
    state = _state()
    state.pop("dtype")
    assert state == PRISTINE
    x, loss, seen = _graph()

    loss.backward_sync()
    _check(x, seen)


async def assert_pristine() -> None:
    state = _state()
    state.pop("dtype")
    assert state == PRISTINE
    x, loss, seen = _graph()
    await loss.backward()
    _check(x, seen)


@pytest.fixture(autouse=True)
def _dtype_kept():
    dtype = ag.get_default_dtype()
    yield
    assert ag.get_default_dtype() is dtype


# ----------------------------------------------------------------------------- 1, 2: torch's two tests
def _extra_enter_scope(run):
    def unpack(x):
        weak_ctx_1().__enter__()
        return x

    ctx_1 = hooks_cls(lambda x: x, unpack)
    weak_ctx_1 = weakref.ref(ctx_1)
    x = ag.randn(3, 3, requires_grad=True)
    with ctx_1:
        run(x.sin().sum())
    return weakref.ref(unpack)


def test_unpack_hook_enters_its_block_again_sync():
    gc.disable()
    try:
        unpack_ref = _extra_enter_scope(lambda loss: loss.backward_sync())
        assert unpack_ref() is None
    finally:
        gc.enable()
    assert_pristine_sync()


def test_unpack_hook_enters_its_block_again_in_asyncio_run():
    gc.disable()
    try:
        unpack_ref = _extra_enter_scope(lambda loss: asyncio.run(loss.backward()))
        assert unpack_ref() is None
    finally:
        gc.enable()
    assert_pristine_sync()


async def test_unpack_hook_enters_its_block_again_awaited():
    def unpack(x):
        ctx.__enter__()
        return x

    ctx = hooks_cls(lambda x: x, unpack)
    x = ag.randn(3, 3, requires_grad=True)
    with ctx:
        await x.sin().sum().backward()
        assert saved_hooks.get() == (ctx.pack_hook, ctx.unpack_hook)
    await assert_pristine()


def test_unpack_hook_exits_its_block():
    def unpack(x):
        ctx_1.__exit__()
        return x

    ctx_1 = hooks_cls(lambda x: x, unpack)
    ctx_2 = hooks_cls(lambda x: x, lambda x: x)
    for _ in range(10):
        with ctx_2:
            ctx_1.__enter__()
            x = ag.randn(3, 3, requires_grad=True)
            x.sin().sum().backward_sync()
    assert len(_outer_hooks.get()) == 10  # torch's stack: ctx_2's ten pushes, each block popped ctx_1's
    for _ in range(10):
        ctx_1.__exit__()
    assert_pristine_sync()


# ----------------------------------------------------------------------------- 3: one manager, two tasks
def _managers():
    return {
        "no_grad": ag.no_grad(),
        "enable_grad": ag.enable_grad(),
        "inference_mode": ag.inference_mode(),
        "detect_anomaly": ag.autograd.detect_anomaly(),
        "saved_tensors_hooks": hooks_cls(lambda x: x, lambda x: x),
        "record_function": ag.autograd.profiler.record_function("range"),
    }


@pytest.mark.parametrize("kind", list(_managers()))
async def test_one_manager_shared_by_interleaved_tasks(kind):
    manager = _managers()[kind]
    inside = asyncio.Event()

    async def first():
        with manager:
            inside.set()
            await asyncio.sleep(0.01)

    async def second():
        await inside.wait()
        with manager:
            await asyncio.sleep(0.03)

    await asyncio.gather(first(), second())
    await assert_pristine()


async def test_disable_saved_tensors_hooks_shared_by_interleaved_tasks():
    async def body(delay):
        with ag.autograd.graph.disable_saved_tensors_hooks("no hooks here"):
            await asyncio.sleep(delay)

    await asyncio.gather(body(0.01), body(0.02))
    await assert_pristine()


# ----------------------------------------------------------------------------- 4: exited in another task
@pytest.mark.parametrize("kind", list(_managers()))
async def test_entered_in_one_task_exited_in_another(kind):
    manager = _managers()[kind]

    async def enter():
        manager.__enter__()

    async def leave():
        manager.__exit__(None, None, None)

    await asyncio.create_task(enter())
    await asyncio.create_task(leave())
    await assert_pristine()


async def test_multithreading_switch_exited_in_another_task():
    switch = [None]

    async def enter():
        switch[0] = ag.set_multithreading_enabled(False)

    async def leave():
        switch[0].__exit__(None, None, None)

    await asyncio.create_task(enter())
    await asyncio.create_task(leave())
    await assert_pristine()


# ----------------------------------------------------------------------------- 5: exits without enters
@pytest.mark.parametrize("kind", list(_managers()))
def test_exited_twice(kind):
    manager = _managers()[kind]
    with manager:
        pass
    manager.__exit__(None, None, None)
    assert_pristine_sync()


def test_saved_tensors_hooks_exited_with_nothing_entered():
    hooks_cls(lambda x: x, lambda x: x).__exit__()
    assert_pristine_sync()


# ----------------------------------------------------------------------------- 6: errors, BaseException, cancellation
class _Stop(BaseException):
    pass


def _everything():
    return [ag.no_grad(), ag.autograd.detect_anomaly(), hooks_cls(lambda x: x, lambda x: x), ag.inference_mode(),
            ag.autograd.profiler.profile(), ag.autograd.profiler.record_function("range"),
            ag.set_multithreading_enabled(False)]


@pytest.mark.parametrize("error", [ValueError, _Stop, KeyboardInterrupt])
@pytest.mark.parametrize("disabled", [False, True])
def test_error_inside_every_manager(error, disabled):
    with pytest.raises(error):
        with contextlib.ExitStack() as stack:
            if disabled:  # refuses saved_tensors_hooks inside: the others only
                stack.enter_context(ag.autograd.graph.disable_saved_tensors_hooks("off"))
            for m in _everything():
                if not (disabled and isinstance(m, hooks_cls)):
                    stack.enter_context(m)
            raise error("inside")
    assert_pristine_sync()


async def test_cancelled_inside_every_manager():
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.01):
            with ag.no_grad(), ag.autograd.detect_anomaly(), hooks_cls(lambda x: x, lambda x: x):
                with ag.inference_mode(), ag.autograd.profiler.profile(), ag.set_multithreading_enabled(False):
                    await asyncio.sleep(10)
    await assert_pristine()


class _Raises(ag.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * 2

    @staticmethod
    def backward(ctx, g):
        raise ValueError("in backward")


class _Sleeps(ag.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    async def backward(ctx, g):
        await asyncio.sleep(10)
        return g


async def test_backward_fails_inside_managers():
    x = ag.randn(3, requires_grad=True)
    with pytest.raises(ValueError, match="in backward"):
        with ag.autograd.detect_anomaly(), hooks_cls(lambda t: t, lambda t: t), ag.autograd.profiler.profile():
            await _Raises.apply(x).exp().sum().backward()
    await assert_pristine()


async def test_backward_cancelled_inside_managers():
    x = ag.randn(3, requires_grad=True)
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.05):
            with ag.autograd.detect_anomaly(), hooks_cls(lambda t: t, lambda t: t), ag.enable_grad():
                await _Sleeps.apply(x).exp().sum().backward()
    await assert_pristine()


# ----------------------------------------------------------------------------- 7: hooks that switch, never back
def _switching_hooks():
    return {
        "no_grad": lambda g: ag.no_grad().__enter__(),
        "set_grad_enabled": lambda g: ag.set_grad_enabled(True) and None,
        "set_detect_anomaly": lambda g: ag.set_detect_anomaly(True) and None,
        "inference_mode": lambda g: ag.inference_mode().__enter__(),
        "saved_tensors_hooks": lambda g: hooks_cls(lambda t: t, lambda t: t).__enter__(),
    }


@pytest.mark.parametrize("kind", list(_switching_hooks()))
async def test_hook_switches_during_backward(kind):
    x = ag.randn(3, requires_grad=True)
    y = x * 2
    y.register_hook(_switching_hooks()[kind])
    await y.sum().backward()
    await assert_pristine()


@pytest.mark.parametrize("kind", list(_switching_hooks()))
def test_hook_switches_during_sync_backward(kind):
    x = ag.randn(3, requires_grad=True)
    y = x * 2
    y.register_hook(_switching_hooks()[kind])
    y.sum().backward_sync()
    assert_pristine_sync()


# ----------------------------------------------------------------------------- 8: decorated generators
def test_decorated_generator_abandoned():
    @ag.no_grad()
    def numbers():
        yield ag.is_grad_enabled()
        yield ag.is_grad_enabled()

    gen = numbers()
    assert next(gen) is False
    assert ag.is_grad_enabled()
    del gen
    gen = numbers()
    next(gen)
    gen.close()
    assert_pristine_sync()


# ----------------------------------------------------------------------------- 9: allow_mutation_on_saved_tensors
def test_allow_mutation_left_by_an_exception_and_nested():
    with pytest.raises(ValueError):
        with ag.autograd.graph.allow_mutation_on_saved_tensors():
            a = ag.randn(3, requires_grad=True)
            b = a.clone()
            (b * b).sum()
            raise ValueError("inside")
    with ag.autograd.graph.allow_mutation_on_saved_tensors():
        with pytest.raises(RuntimeError, match="cannot be nested"):
            with ag.autograd.graph.allow_mutation_on_saved_tensors():
                pass
        assert mutation_context[0] is not None
    assert_pristine_sync()


# ----------------------------------------------------------------------------- 10: the profiler
async def test_profiler_left_by_an_exception_and_exited_in_another_task():
    with pytest.raises(ValueError):
        with ag.autograd.profiler.profile():
            raise ValueError("inside")
    prof = ag.autograd.profiler.profile()

    async def enter():
        prof.__enter__()

    async def leave():
        prof.__exit__(None, None, None)

    await asyncio.create_task(enter())
    await asyncio.create_task(leave())
    prof.__exit__(None, None, None)
    await assert_pristine()


# ----------------------------------------------------------------------------- 11: the function forms as managers
@pytest.mark.parametrize("switch", [lambda: ag.set_grad_enabled(False), lambda: ag.set_detect_anomaly(True),
                                    lambda: ag.set_multithreading_enabled(False)])
def test_function_forms_left_by_an_exception(switch):
    with pytest.raises(ValueError):
        with switch():
            raise ValueError("inside")
    assert_pristine_sync()


def test_multithreading_switch_as_torchs_test():
    """torch's test_set_multithreading_enabled_as_context_manager_and_function, on ag.autograd."""
    with ag.autograd.set_multithreading_enabled(False):
        assert not ag.autograd.is_multithreading_enabled()
    assert ag.autograd.is_multithreading_enabled()
    with ag.autograd.set_multithreading_enabled(False):
        ag.autograd.set_multithreading_enabled(True)
        assert ag.autograd.is_multithreading_enabled()
    assert ag.autograd.is_multithreading_enabled()
    ag.autograd.set_multithreading_enabled(False)
    assert not ag.autograd.is_multithreading_enabled()
    ag.autograd.set_multithreading_enabled(True)
    assert_pristine_sync()


async def test_unpack_hook_that_runs_a_backward_itself():
    """The unpack hook runs in a copy of the engine's context: a reentrant backward from it (the sync
    bridge, through the server's portal) still works, and leaves nothing behind."""
    seen = []

    def unpack(t):
        a = ag.tensor([1.0, 2.0], requires_grad=True)
        with ag.enable_grad():
            (g,) = ag.grad_sync((a * a).sum(), a)
        seen.append(g.tolist())
        return t

    x = ag.tensor([1.0, 2.0], requires_grad=True)
    with hooks_cls(lambda t: t, unpack):
        y = x.exp().sum()
    await y.backward()
    assert seen == [[2.0, 4.0]]
    np.testing.assert_allclose(x.grad.numpy(), np.exp([1.0, 2.0]), rtol=1e-6)
    await assert_pristine()
