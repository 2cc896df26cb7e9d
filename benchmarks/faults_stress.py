"""`python -m benchmarks.faults_stress`: cancellation and error injection, counted (issue 8).

Each trial builds a small graph of one *kind* (``KINDS``: inline nodes, large kernels on one or
two executor threads, ``async def`` backwards, reentrant backwards three deep, a plain backward
running ``backward_sync`` in a kernel thread, checkpointed blocks, a chain hopping between the
cpu and two simulated devices), starts its backward, and either cancels it at a random point
(``task.cancel()`` after a random number of loop iterations or a random delay;
``asyncio.wait_for``, ``asyncio.timeout`` or ``anyio.fail_after`` with a random timeout; a
sibling in an ``asyncio.TaskGroup`` failing after a random delay) or makes user code raise at
one *site* (``SITES``). After every trial it counts what issue 8 forbids:

* ``leaked``: graph tasks left in ``engine.live`` the moment the call returned or raised, or later;
* ``slots``: executor slots still counted in flight (or a worker waiting for one) at that moment;
* ``hung``: the call, or the next backward, did not end within ``TIMEOUT_S``; or a kernel thread
  was still counted as waiting on a reentrant backward after the settle time;
* ``wrong_next``: the next backward (large kernels, one and two executor threads) is wrong;
* ``late_writes``: a leaf's ``.grad`` changed after ``CancelledError`` (or the error) reached the
  caller, over ``SETTLE_S`` in which abandoned kernel threads finish;
* ``partial``: after a cancel, the first leaf's ``.grad`` holds part of this call's gradient (it
  must hold all of it or none: its AccumulateGrad runs whole, on the loop);
* ``wrong_error``: the caller did not get the very exception raised (same object, so same type and
  message), an ``Exception`` without a note naming the node, or a ``BaseException`` with one;
* ``no_error``/``wrong_result``: a failing backward returned, or one that finished before its
  cancel landed has wrong gradients.

``back_to_back`` runs 100 faults in a row on one loop then a backward of every kind;
``concurrent_trial`` fails one backward among six concurrent ones of other kinds. The same
functions drive ``tests/engine/test_faults.py`` with small counts; this script runs the long version
(``--cancels 500 --errors 50``: trials until 500 cancellations have landed mid-backward, each
error site 50 times) and prints the counts as JSON (``problems`` sums them: all must be 0).
RELIABILITY.md has the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import time
from collections import Counter
from typing import Any, Callable

import anyio
import numpy as np

import asyncgrad as ag

SETTLE_S = 0.03
"""How long a trial waits after the cancel before comparing ``.grad``: abandoned kernel threads
(sleeping at most a few ms each) finish meanwhile, so a late write would show."""

TIMEOUT_S = 20.0
"""A call or a next backward that takes longer than this counts as a hang."""

KINDS = ("inline", "executor1", "executor2", "async", "reentrant", "kernel_thread", "checkpoint", "devices")


class Boom(ValueError):
    """The user error every error site raises."""


class Abort(BaseException):
    """A BaseException that is not an Exception (like pytest's Failed or trio's Cancelled)."""


# --------------------------------------------------------------------------- graph kinds
def _sin_chain_expected(x: np.ndarray, steps: int, a: float) -> np.ndarray:
    """d/dx sum(h_n) where h_{k+1} = sin(a * h_k), h_0 = x (chain rule in numpy)."""
    grad = np.ones_like(x)
    hs = [x]
    for _ in range(steps):
        hs.append(np.sin(a * hs[-1]))
    for k in reversed(range(steps)):
        grad = grad * a * np.cos(a * hs[k])
    return grad


class AsyncScale(ag.Function):
    """``x * a``; its ``async def`` backward suspends a few times, as one doing I/O would."""

    @staticmethod
    def forward(ctx, x, a):
        ctx.a = a
        return x * a

    @staticmethod
    async def backward(ctx, g):
        for _ in range(3):
            await asyncio.sleep(0)
        return g * ctx.a, None


class Reentrant(ag.Function):
    """``sin(x)``, whose ``async def`` backward runs a reentrant ``ag.backward`` ``depth`` deep.

    Every level's inner graph also adds ``side`` (a leaf the caller can watch), so reentrant
    children write a ``.grad`` the trial can check after a cancel: ``side.grad`` grows by the
    incoming gradient once per level.
    """

    @staticmethod
    def forward(ctx, x, side, depth):
        ctx.save_for_backward(x)
        ctx.side, ctx.depth = side, depth
        return x.sin()

    @staticmethod
    async def backward(ctx, g):
        (x,) = ctx.saved_tensors
        with ag.enable_grad():
            z = x.detach().requires_grad_()
            inner = Reentrant.apply(z, ctx.side, ctx.depth - 1) if ctx.depth > 1 else z.sin()
            y = inner + ctx.side * 1.0
        await ag.backward(y, g)
        return z.grad, None, None


class ThreadReentrant(ag.Function):
    """``sin(x)``; a plain backward that, run in a kernel thread, calls ``ag.backward_sync``.

    It sleeps a little first, so a cancel often lands while the thread is still in it, and
    its inner graph adds ``side`` like ``Reentrant``'s.
    """

    @staticmethod
    def forward(ctx, x, side):
        ctx.save_for_backward(x)
        ctx.side = side
        return x.sin()

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        time.sleep(0.001)
        with ag.enable_grad():
            z = x.detach().requires_grad_()
            y = z.sin() + ctx.side * 1.0
        ag.backward_sync(y, g)
        return z.grad, None


class Case:
    """One graph of one kind: its loss, the leaves to watch, their analytic gradients."""

    def __init__(self, loss: ag.Tensor, leaves: list[ag.Tensor], expected: list[np.ndarray]) -> None:
        self.loss = loss
        self.leaves = leaves
        self.expected = expected


def configure(kind: str) -> None:
    """Device settings a kind needs (tests restore them afterwards)."""
    cpu = ag.device("cpu")
    if kind in ("executor1", "executor2", "kernel_thread", "devices"):
        ag.set_inline_threshold("cpu", 0)  # every kernel but AccumulateGrad leaves the loop
        ag.set_num_workers("cpu", 2 if kind == "executor2" else 1)
        if kind == "devices":
            for sim in ("sim:0", "sim:1"):
                ag.set_inline_threshold(sim, 0)
                ag.set_num_workers(sim, 2)
    else:
        ag.set_inline_threshold("cpu", 200_000)
        ag.set_num_workers("cpu", max(cpu.num_workers, 1))


async def build(kind: str, rng: np.random.Generator) -> Case:
    """A fresh graph of ``kind`` (call ``configure(kind)`` first)."""
    a = 1.1
    if kind == "inline":
        x0 = rng.uniform(-1, 1, 16)
        x = ag.tensor(x0, requires_grad=True)
        h = x
        for _ in range(400):
            h = (h * a).sin()
        return Case(h.sum(), [x], [_sin_chain_expected(x0, 400, a)])
    if kind in ("executor1", "executor2"):
        x0 = rng.uniform(-1, 1, 4096)
        x = ag.tensor(x0, requires_grad=True)
        h = x
        for _ in range(12):
            h = (h * a).sin()
        return Case(h.sum(), [x], [_sin_chain_expected(x0, 12, a)])
    if kind == "async":
        x0 = rng.uniform(-1, 1, 16)
        x = ag.tensor(x0, requires_grad=True)
        h = x
        for _ in range(30):
            h = AsyncScale.apply(h, a).sin()
        return Case(h.sum(), [x], [_sin_chain_expected(x0, 30, a)])
    if kind in ("reentrant", "kernel_thread"):
        x0 = rng.uniform(-1, 1, 16)
        x = ag.tensor(x0, requires_grad=True)
        side = ag.zeros(16, dtype=ag.float64, requires_grad=True)
        h = x
        steps = 4
        for _ in range(steps):
            h = Reentrant.apply(h * a, side, 3) if kind == "reentrant" else ThreadReentrant.apply(h * a, side)
        # d side: each node adds its incoming gradient once per level
        hs = [x0]
        for _ in range(steps):
            hs.append(np.sin(a * hs[-1]))
        incoming = np.ones_like(x0)
        side_grad = np.zeros_like(x0)
        for k in reversed(range(steps)):
            side_grad += incoming * (3 if kind == "reentrant" else 1)
            incoming = incoming * a * np.cos(a * hs[k])
        return Case(h.sum(), [x, side], [incoming, side_grad])
    if kind == "checkpoint":
        # h_{k+1} = sin(w * h_k) through checkpointed blocks: each block's backward recomputes it
        # and runs a nested backward that accumulates into w, a leaf the trial watches.
        x0, w0 = rng.uniform(-1, 1, 16), rng.uniform(0.5, 1.5, 16)
        x = ag.tensor(x0, requires_grad=True)
        w = ag.tensor(w0, requires_grad=True)
        h = x
        steps = 4
        for _ in range(steps):
            h = await ag.checkpoint(lambda t: (t * w).sin(), h, use_reentrant=True)
        hs = [x0]
        for _ in range(steps):
            hs.append(np.sin(w0 * hs[-1]))
        incoming, w_grad = np.ones_like(x0), np.zeros_like(w0)
        for k in reversed(range(steps)):
            c = np.cos(w0 * hs[k])
            w_grad += incoming * c * hs[k]
            incoming = incoming * c * w0
        return Case(h.sum(), [x, w], [incoming, w_grad])
    if kind == "devices":
        # Three device workers, each with its own queue and kernel threads, gradients crossing
        # between them at every step.
        x0 = rng.uniform(-1, 1, 1024)
        x = ag.tensor(x0, requires_grad=True)
        h = x
        for i in range(12):
            h = (h.to(("sim:0", "sim:1", "cpu")[i % 3]) * a).sin()
        return Case(h.sum(), [x], [_sin_chain_expected(x0, 12, a)])
    raise ValueError(f"unknown graph kind {kind!r}")


def snapshot(leaves: list[ag.Tensor]) -> list[np.ndarray | None]:
    return [None if t.grad is None else t.grad.numpy().copy() for t in leaves]


def same(a: list, b: list) -> bool:
    return all((x is None and y is None) or (x is not None and y is not None and np.array_equal(x, y, equal_nan=True))
               for x, y in zip(a, b))


def grads_match(case: Case) -> bool:
    return all(t.grad is not None and np.allclose(t.grad.numpy(), e, rtol=1e-10, atol=1e-12)
               for t, e in zip(case.leaves, case.expected))


def slots_in_use() -> int:
    """Executor slots counted in flight, plus workers waiting for one, on this loop: 0 once any
    backward has returned, raised or been cancelled (Note [Wind-down] in engine/scope.py). A worker
    whose slot was freed but that has not resumed yet is not waiting."""
    return sum(w.in_flight + (w._slot is not None and not w._slot.done()) for w in ag.get_engine().workers.values())


def threads_waiting() -> int:
    """Kernel threads still counted as waiting on a reentrant backward. An abandoned kernel thread
    finishes into the void a moment after its call ended, so this is read after a settle time."""
    return sum(w.blocked for w in ag.get_engine().workers.values())


async def next_backward_ok(rng: np.random.Generator) -> tuple[bool, bool]:
    """(finished in time, correct): a backward with large kernels on one and on two threads."""
    saved = ag.device("cpu").inline_threshold, ag.device("cpu").num_workers
    try:
        for workers in (1, 2):
            ag.set_inline_threshold("cpu", 0)
            ag.set_num_workers("cpu", workers)
            case = await build("executor1", rng)
            try:
                async with asyncio.timeout(TIMEOUT_S):
                    await case.loss.backward()
            except asyncio.TimeoutError:
                return False, False
            if not grads_match(case):
                return True, False
        return True, True
    finally:
        ag.device("cpu").inline_threshold, ag.device("cpu").num_workers = saved


# --------------------------------------------------------------------------- cancellation
CANCEL_WAYS = ("cancel_after_steps", "cancel_after_delay", "wait_for", "timeout", "fail_after", "task_group")


def cancel_point(how: str, rng: np.random.Generator) -> float:
    """A random cancel point for ``how``: loop iterations to let pass, or a delay in seconds."""
    return float(rng.integers(0, 12)) if how == "cancel_after_steps" else float(rng.uniform(0, 0.004))


class Sibling(Exception):
    """Raised by the task beside a backward in a task group, which cancels the backward."""


async def _cancel_one(loss: ag.Tensor, how: str, point: float) -> tuple[bool, int, int]:
    """Run ``loss.backward()`` and cancel it at ``point`` the way ``how`` says: (True when it was
    cancelled and False when it finished first, graph tasks live and executor slots in use the
    moment the call ended, seen from the very task that awaited it). Any other outcome raises."""
    seen: list[tuple[int, int]] = []

    async def observed() -> None:
        try:
            await loss.backward()
        finally:
            seen.append((len(ag.get_engine().live), slots_in_use()))

    cancelled = await _cancel_how(observed, how, point)
    live, slots = seen[0] if seen else (len(ag.get_engine().live), slots_in_use())  # cancelled before it started
    return cancelled, live, slots


async def _cancel_how(backward: Callable[[], Any], how: str, point: float) -> bool:
    if how in ("cancel_after_steps", "cancel_after_delay"):
        task = asyncio.ensure_future(backward())
        if how == "cancel_after_steps":
            for _ in range(int(point)):
                await asyncio.sleep(0)
        else:
            await asyncio.sleep(point)
        task.cancel()
        await asyncio.wait({task})
        if task.cancelled():
            return True
        task.result()  # finished before the cancel landed, or raised: then that is the outcome
        return False
    if how == "wait_for":
        try:
            await asyncio.wait_for(backward(), point)
        except TimeoutError:
            return True
        return False
    if how == "timeout":
        try:
            async with asyncio.timeout(point):
                await backward()
        except TimeoutError:
            return True
        return False
    if how == "fail_after":
        try:
            with anyio.fail_after(point):
                await backward()
        except TimeoutError:
            return True
        return False
    if how == "task_group":
        async def sibling() -> None:
            await asyncio.sleep(point)
            raise Sibling()

        try:
            async with asyncio.TaskGroup() as group:
                task = group.create_task(backward())
                group.create_task(sibling())
        except* Sibling:
            pass
        if task.cancelled():
            return True
        task.result()
        return False
    raise ValueError(f"unknown way to cancel {how!r}")


async def cancel_trial(kind: str, how: str, point: float, rng: np.random.Generator, settle: float = SETTLE_S,
                       check_next: bool = True) -> Counter:
    """Cancel one backward of ``kind`` at ``point`` (see ``cancel_point``); count what went wrong.

    The counts are those of the module docstring, plus ``cancelled`` or ``completed`` (the
    backward finished before the cancel landed, and then its gradients must be right).
    """
    bad: Counter = Counter()
    configure(kind)
    case = await build(kind, rng)
    engine = ag.get_engine()
    runner = asyncio.ensure_future(_cancel_one(case.loss, how, point))
    done, _ = await asyncio.wait({runner}, timeout=TIMEOUT_S)
    if not done:
        runner.cancel()
        bad["hung"] += 1
        return bad
    if runner.exception() is not None:
        bad["wrong_error"] += 1
        return bad
    cancelled, live, slots = runner.result()
    bad["leaked"] += live
    bad["slots"] += slots
    after_cancel = snapshot(case.leaves)
    await asyncio.sleep(settle)
    if cancelled:
        bad["cancelled"] += 1
        bad["late_writes"] += not same(after_cancel, snapshot(case.leaves))
        # The first leaf is reached only through this graph task's own AccumulateGrad, which runs
        # whole on the loop: its .grad holds all of this call's gradient or none of it.
        first = after_cancel[0]
        bad["partial"] += first is not None and not np.allclose(first, case.expected[0], rtol=1e-10, atol=1e-12)
    else:
        bad["completed"] += 1
        bad["wrong_result"] += not grads_match(case)
    bad["leaked"] += len(engine.live)
    bad["slots"] += slots_in_use()
    bad["hung"] += bool(settle and threads_waiting())
    if check_next:
        finished, correct = await next_backward_ok(rng)
        bad["hung"] += not finished
        bad["wrong_next"] += finished and not correct
    return bad


# --------------------------------------------------------------------------- errors at each site
def _raiser(exc: BaseException) -> Callable[..., Any]:
    def hook(*_: Any) -> None:
        raise exc
    return hook


class PlainBoom(ag.Function):
    """A plain backward that raises ``PlainBoom.exc`` (portal on the loop, or a kernel thread)."""

    exc: BaseException = Boom("plain")

    @staticmethod
    def forward(ctx, x):
        return x * 1.0

    @staticmethod
    def backward(ctx, g):
        raise PlainBoom.exc


class AsyncBoom(ag.Function):
    exc: BaseException = Boom("async")

    @staticmethod
    def forward(ctx, x):
        return x * 1.0

    @staticmethod
    async def backward(ctx, g):
        await asyncio.sleep(0)
        raise AsyncBoom.exc


class NestedBoom(ag.Function):
    """Three levels of reentrant backward; the innermost raises ``NestedBoom.exc``."""

    exc: BaseException = Boom("nested")

    @staticmethod
    def forward(ctx, x, depth):
        ctx.save_for_backward(x)
        ctx.depth = depth
        return x * 1.0

    @staticmethod
    async def backward(ctx, g):
        if ctx.depth == 0:
            raise NestedBoom.exc
        (x,) = ctx.saved_tensors
        with ag.enable_grad():
            z = x.detach().requires_grad_()
            y = NestedBoom.apply(z, ctx.depth - 1)
        (gz,) = await ag.grad(y, z, g)
        return gz, None


SITES = ("plain_backward", "async_backward", "thread_backward", "tensor_hook", "leaf_hook", "pre_hook",
         "post_hook", "post_accumulate_hook", "retain_grad_hook", "nested_reentrant", "final_callback",
         "executor_kernel", "anomaly_nan")
"""Every place user code runs during a backward (``anomaly_nan``: the engine's own check)."""

BASE_SITES = tuple(site for site in SITES if site != "anomaly_nan")
"""Where user code can raise a BaseException (anomaly mode's check raises a RuntimeError of its own)."""

BASE_EXCEPTIONS = (Abort, KeyboardInterrupt, SystemExit)


def arm(site: str, exc: BaseException, rng: np.random.Generator) -> tuple[ag.Tensor, list[ag.Tensor], str | None]:
    """A loss whose backward raises ``exc`` at ``site``; the leaves; the node the note must name."""
    x = ag.tensor(rng.uniform(0.5, 1.5, 8), requires_grad=True)
    raiser = _raiser(exc)
    if site == "plain_backward":
        PlainBoom.exc = exc
        return (PlainBoom.apply(x).sin() * 2.0).sum(), [x], "PlainBoomBackward"
    if site == "thread_backward":
        PlainBoom.exc = exc
        ag.set_inline_threshold("cpu", 0)
        return (PlainBoom.apply(x).sin() * 2.0).sum(), [x], "PlainBoomBackward"
    if site == "async_backward":
        AsyncBoom.exc = exc
        return (AsyncBoom.apply(x).sin() * 2.0).sum(), [x], "AsyncBoomBackward"
    if site == "nested_reentrant":
        NestedBoom.exc = exc
        return (NestedBoom.apply(x, 3).sin() * 2.0).sum(), [x], "NestedBoomBackward"
    if site == "tensor_hook":  # runs before y's grad_fn, as in torch, and the note names that node
        y = x.sin()
        y.register_hook(raiser)
        return (y * 2.0).sum(), [x], "SinBackward0"
    if site == "leaf_hook":
        x.register_hook(raiser)
        return (x.sin() * 2.0).sum(), [x], "AccumulateGrad"
    if site == "pre_hook":
        y = x.sin()
        y.grad_fn.register_prehook(raiser)
        return (y * 2.0).sum(), [x], "SinBackward0"
    if site == "post_hook":
        y = x.sin()
        y.grad_fn.register_hook(raiser)
        return (y * 2.0).sum(), [x], "SinBackward0"
    if site == "post_accumulate_hook":
        x.register_post_accumulate_grad_hook(raiser)
        return (x.sin() * 2.0).sum(), [x], "AccumulateGrad"
    if site == "retain_grad_hook":
        y = x.sin()
        y.retain_grad()
        y.register_hook(raiser)
        return (y * 2.0).sum(), [x], "SinBackward0"
    if site == "final_callback":
        y = x.sin()

        def queue(grad: Any) -> None:
            ag.get_engine().queue_callback(raiser)

        y.register_hook(queue)
        return (y * 2.0).sum(), [x], None
    if site == "executor_kernel":
        ag.set_inline_threshold("cpu", 10_000)
        w = ag.tensor(rng.uniform(-1, 1, (128, 128)), requires_grad=True)
        y = w @ w
        y.grad_fn.register_prehook(raiser)  # runs with the matmul's backward, in a kernel thread
        return y.tanh().sum(), [w], "MmBackward0"
    if site == "anomaly_nan":  # MulBackward0 returns g * nan (torch: the same error, worded the same)
        return (x * ag.full((8,), float("nan"), dtype=ag.float64)).sum(), [x], "MulBackward0"
    raise ValueError(f"unknown site {site!r}")


async def error_trial(site: str, exc: BaseException, rng: np.random.Generator, settle: float = SETTLE_S / 3,
                      check_next: bool = True) -> Counter:
    """Raise ``exc`` at ``site``; count wrong errors, leaks, hangs and a wrong next backward.

    The call is awaited in this very task, under ``asyncio.timeout``: asyncio lets a
    KeyboardInterrupt or SystemExit that ends a task's coroutine stop the loop (so the inner
    task of ``wait_for`` would), while the engine must hand it to the awaiting caller unchanged.
    """
    bad: Counter = Counter()
    saved = ag.device("cpu").inline_threshold, ag.device("cpu").num_workers
    ag.set_num_workers("cpu", 2)
    engine = ag.get_engine()
    try:
        loss, leaves, node = arm(site, exc, rng)
        anomaly = site == "anomaly_nan"
        try:
            async with asyncio.timeout(TIMEOUT_S):
                if anomaly:
                    with ag.detect_anomaly():
                        await loss.backward()
                else:
                    await loss.backward()
        except TimeoutError:
            bad["hung"] += 1
        except BaseException as caught:  # noqa: BLE001  (the point is to see exactly what came back)
            if anomaly:
                ok = (type(caught) is RuntimeError and str(caught) ==
                      "Function 'MulBackward0' returned nan values in its 0th output.")
            else:
                ok = caught is exc
            if ok and isinstance(exc, Exception) and node is not None:
                ok = any(node in note for note in getattr(caught, "__notes__", ()))
            if ok and not isinstance(exc, Exception):
                ok = not getattr(caught, "__notes__", None)
            bad["wrong_error"] += not ok
        else:
            bad["no_error"] += 1
        bad["leaked"] += len(engine.live)
        bad["slots"] += slots_in_use()
        after = snapshot(leaves)
        await asyncio.sleep(settle)
        bad["late_writes"] += not same(after, snapshot(leaves))
        bad["leaked"] += len(engine.live)
        bad["slots"] += slots_in_use()
        bad["hung"] += bool(settle and threads_waiting())
    finally:
        ag.device("cpu").inline_threshold, ag.device("cpu").num_workers = saved
    if check_next:
        finished, correct = await next_backward_ok(rng)
        bad["hung"] += not finished
        bad["wrong_next"] += finished and not correct
    return bad


CONCURRENT_KINDS = ("executor1", "async", "reentrant", "kernel_thread", "checkpoint", "devices")


async def concurrent_trial(site: str, rng: np.random.Generator) -> Counter:
    """One backward failing at ``site`` among concurrent backwards of every kind, on two kernel
    threads with every kernel in the executor (so they interleave): the failing one must see
    its error, every other one its exact gradients, and the engine must end empty."""
    bad: Counter = Counter()
    saved = ag.device("cpu").inline_threshold, ag.device("cpu").num_workers
    try:
        exc = Boom(f"boom at {site} among others")
        loss, _, _ = arm(site, exc, rng)
        configure("executor2")
        cases = [await build(kind, rng) for kind in CONCURRENT_KINDS]

        async def failing() -> None:
            if site == "anomaly_nan":
                with ag.detect_anomaly():
                    await loss.backward()
            else:
                await loss.backward()

        calls = [case.loss.backward() for case in cases]
        calls.insert(int(rng.integers(0, len(calls) + 1)), failing())
        async with asyncio.timeout(TIMEOUT_S):
            results = await asyncio.gather(*calls, return_exceptions=True)
    except TimeoutError:
        bad["hung"] += 1
        return bad
    finally:
        ag.device("cpu").inline_threshold, ag.device("cpu").num_workers = saved
    errors = [r for r in results if r is not None]
    bad["wrong_error"] += len(errors) != 1 or not (errors[0] is exc or site == "anomaly_nan")
    bad["wrong_result"] += sum(not grads_match(case) for case in cases)
    bad["leaked"] += len(ag.get_engine().live)
    bad["slots"] += slots_in_use()
    return bad


async def back_to_back(faults: int, rng: np.random.Generator) -> Counter:
    """``faults`` errors and cancellations in a row on this loop, nothing correct in between;
    then one backward of every kind must be right."""
    bad: Counter = Counter()
    for i in range(faults):
        if i % 2:
            bad.update(await error_trial(SITES[i // 2 % len(SITES)], Boom("again"), rng, 0.0, False))
        else:
            kind, how = KINDS[i // 2 % len(KINDS)], CANCEL_WAYS[i // 2 % len(CANCEL_WAYS)]
            bad.update(await cancel_trial(kind, how, cancel_point(how, rng), rng, 0.0, False))
    for kind in KINDS:
        configure(kind)
        case = await build(kind, rng)
        try:
            async with asyncio.timeout(TIMEOUT_S):
                await case.loss.backward()
        except TimeoutError:
            bad["hung"] += 1
            continue
        bad["wrong_next"] += not grads_match(case)
    bad["leaked"] += len(ag.get_engine().live)
    bad["slots"] += slots_in_use()
    await asyncio.sleep(SETTLE_S)
    bad["hung"] += bool(threads_waiting())
    return bad


# --------------------------------------------------------------------------- the script
PROBLEMS = ("leaked", "slots", "hung", "wrong_next", "late_writes", "partial", "wrong_error", "no_error",
            "wrong_result")


def _problems(counts: Counter) -> dict[str, int]:
    return {p: counts[p] for p in PROBLEMS}


def _outcomes(counts: Counter) -> dict[str, int]:
    return {"cancelled": counts["cancelled"], "finished": counts["completed"],
            "problems": sum(_problems(counts).values())}


async def stress(cancels: int, errors: int, seed: int) -> dict[str, Any]:
    """The long run: every figure RELIABILITY.md quotes (``problems`` must all be 0)."""
    rng = np.random.default_rng(seed)
    pick = random.Random(seed)
    report: dict[str, Any] = {"seed": seed}
    total: Counter = Counter()

    per_kind: dict[str, Counter] = {k: Counter() for k in KINDS}
    per_way: dict[str, Counter] = {w: Counter() for w in CANCEL_WAYS}
    t0 = time.perf_counter()
    landed = trials = 0
    while landed < cancels and trials < 4 * cancels:  # trials whose backward finished first do not count
        kind, how = KINDS[trials % len(KINDS)], pick.choice(CANCEL_WAYS)
        result = await cancel_trial(kind, how, cancel_point(how, rng), rng)
        per_kind[kind].update(result)
        per_way[how].update(result)
        landed += result["cancelled"]
        trials += 1
    cancel_counts = sum(per_kind.values(), Counter())
    total.update(_problems(cancel_counts))
    report["cancellations"] = {
        "trials": trials, "seconds": round(time.perf_counter() - t0, 1), **_problems(cancel_counts),
        "cancelled": cancel_counts["cancelled"], "finished_before_the_cancel": cancel_counts["completed"],
        "per_kind": {k: _outcomes(c) for k, c in per_kind.items()},
        "per_way": {w: _outcomes(c) for w, c in per_way.items()},
    }

    t0 = time.perf_counter()
    sites: dict[str, dict[str, int]] = {}
    for site in SITES:
        counts: Counter = Counter()
        for _ in range(errors):
            counts.update(await error_trial(site, Boom(f"boom at {site}"), rng))
        sites[site] = _problems(counts)
        total.update(counts)
    report["errors"] = {"per_site": errors, "seconds": round(time.perf_counter() - t0, 1), "sites": sites}

    t0 = time.perf_counter()
    base: dict[str, dict[str, int]] = {}
    for site in BASE_SITES:
        counts = Counter()
        for i in range(errors):
            exc_type = BASE_EXCEPTIONS[i % len(BASE_EXCEPTIONS)]
            counts.update(await error_trial(site, exc_type(f"{exc_type.__name__} at {site}"), rng))
        base[site] = _problems(counts)
        total.update(counts)
    report["base_exceptions"] = {"per_site": errors, "types": [t.__name__ for t in BASE_EXCEPTIONS],
                                 "seconds": round(time.perf_counter() - t0, 1), "sites": base}

    counts = await back_to_back(100, rng)
    total.update(_problems(counts))
    report["back_to_back_100_then_every_kind"] = _problems(counts)

    counts = Counter()
    rounds = max(1, errors // 5)
    for site in SITES:
        for _ in range(rounds):
            counts.update(await concurrent_trial(site, rng))
    total.update(_problems(counts))
    report["one_failing_among_concurrent"] = {
        "trials": rounds * len(SITES), "others_per_trial": len(CONCURRENT_KINDS), **_problems(counts)}
    report["problems"] = _problems(total)
    return report


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m benchmarks.faults_stress", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cancels", type=int, default=500,
                        help="cancellations that land while the backward runs (trials that finish first are extra)")
    parser.add_argument("--errors", type=int, default=50, help="errors per site")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(stress(args.cancels, args.errors, args.seed)), indent=1))
