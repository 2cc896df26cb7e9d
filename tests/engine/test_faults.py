"""Fault injection (issue 8): cancellation at many points of every graph kind, an error at every
place user code runs, BaseExceptions, faults back to back, one failure among concurrent backwards.

The trials are those of ``benchmarks/faults_stress.py`` (``python -m benchmarks.faults_stress``
runs them by the thousand; RELIABILITY.md has its figures). Each trial returns counts of what
must never happen (see that module's docstring): a graph task left in ``engine.live``, an
executor slot still counted, a hang, a ``.grad`` written after the caller saw the exception, a
wrong or rewrapped exception, a wrong next backward. Here every count must be 0. A few tests
below spell single scenarios out by hand, so that a failure reads as the issue's own words.
"""

import _thread
import asyncio
import signal

import numpy as np
import pytest

import asyncgrad as ag
from benchmarks import faults_stress as fs

NO_PROBLEMS = dict.fromkeys(fs.PROBLEMS, 0)


def problems(counts) -> dict[str, int]:
    return {p: counts[p] for p in fs.PROBLEMS}


def engine_is_clean() -> bool:
    return not ag.get_engine().live and not fs.slots_in_use()


async def outcome(task: asyncio.Future):
    """The task's result, or its exception raised; a failure rather than a hung suite if it never ends."""
    done, _ = await asyncio.wait({task}, timeout=fs.TIMEOUT_S)
    assert done, "the backward hung"
    return task.result()


async def within(call):
    """Await a backward, failing rather than hanging if it never ends."""
    return await asyncio.wait_for(call, fs.TIMEOUT_S)


# --------------------------------------------------------------------------- cancellation
CANCEL_POINTS = [
    ("cancel_after_steps", 0),  # before the call ever started
    ("cancel_after_steps", 1),  # right after it started (the issue's `await asyncio.sleep(0); t.cancel()`)
    ("cancel_after_delay", 0.001),
    ("wait_for", 0.0005),
    ("timeout", 0.001),
    ("fail_after", 0.002),
    ("task_group", 0.001),  # a sibling fails
]


@pytest.mark.parametrize("kind", fs.KINDS)
async def test_cancel_at_every_point_leaves_nothing_behind(kind, rng):
    assert {how for how, _ in CANCEL_POINTS} == set(fs.CANCEL_WAYS)
    for how, point in CANCEL_POINTS:
        counts = await fs.cancel_trial(kind, how, point, rng)
        assert problems(counts) == NO_PROBLEMS, (how, point)
        assert counts["cancelled"] + counts["completed"] == 1
        if how == "cancel_after_steps" and point == 0:
            assert counts["cancelled"] == 1


async def test_cancel_right_after_start_twice_then_large_kernels_on_two_threads():
    """The issue's hang: two cancellations right after the start, then a backward with large
    kernels on two executor threads on the same loop."""
    ag.set_num_workers("cpu", 2)
    ag.set_inline_threshold("cpu", 0)
    for _ in range(2):
        x = ag.tensor(np.linspace(-1, 1, 4096), requires_grad=True)
        task = asyncio.ensure_future(((x * 1.1).sin() * 2.0).sin().sum().backward())
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await outcome(task)
        assert engine_is_clean()
    x0 = np.linspace(-1, 1, 4096)
    x = ag.tensor(x0, requires_grad=True)
    await within((x * 1.1).sin().sum().backward())
    np.testing.assert_allclose(x.grad.numpy(), 1.1 * np.cos(1.1 * x0), rtol=1e-12)


async def test_no_grad_write_after_cancelled_error_from_a_kernel_thread_child(rng):
    """A plain backward in a kernel thread runs ``backward_sync``; the caller is cancelled while
    the thread is still inside it. Once CancelledError has reached the caller, neither the
    thread (it finishes into the void) nor its reentrant child writes ``side.grad`` again."""
    fs.configure("kernel_thread")
    for _ in range(5):
        case = await fs.build("kernel_thread", rng)
        task = asyncio.ensure_future(case.loss.backward())
        await asyncio.sleep(0.0005)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await outcome(task)
        seen = fs.snapshot(case.leaves)
        await asyncio.sleep(0.05)  # every abandoned thread sleeps 1 ms, then returns
        assert fs.same(seen, fs.snapshot(case.leaves))
        assert engine_is_clean() and not fs.threads_waiting()


async def test_cancel_while_a_large_graph_is_being_prepared():
    """Preparation walks a huge graph in slices (Note [Slices]); a cancel between two slices ends
    it there, with nothing left behind, and the same graph then runs right."""
    x = ag.tensor([0.5, -0.25], requires_grad=True)
    h = x
    for _ in range(30_000):
        h = h * 1.0
    loss = (h * 2.0).sum()
    for steps in (1, 2, 5):
        task = asyncio.ensure_future(loss.backward(retain_graph=True))
        for _ in range(steps):
            await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await outcome(task)
        assert engine_is_clean()
        assert x.grad is None  # cancelled before any node ran: nothing accumulated
    await within(loss.backward())
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0])


@pytest.mark.parametrize("kind", ["executor2", "async", "reentrant"])
async def test_cancelled_grad_calls_leave_nothing_behind(kind, rng):
    """``ag.grad`` (captures instead of accumulation, ``init_to_execute``) cancelled at several points."""
    fs.configure(kind)
    for steps in range(6):
        case = await fs.build(kind, rng)
        task = asyncio.ensure_future(ag.grad(case.loss, case.leaves[0]))
        for _ in range(steps):
            await asyncio.sleep(0)
        task.cancel()
        try:
            (g,) = await outcome(task)
        except asyncio.CancelledError:
            pass
        else:
            np.testing.assert_allclose(g.numpy(), case.expected[0], rtol=1e-10)
        assert engine_is_clean()
        assert case.leaves[0].grad is None
    case = await fs.build(kind, rng)
    (g,) = await within(ag.grad(case.loss, case.leaves[0]))
    np.testing.assert_allclose(g.numpy(), case.expected[0], rtol=1e-10)


# --------------------------------------------------------------------------- an error at every site
@pytest.mark.parametrize("site", fs.SITES)
async def test_error_at_every_site_reaches_the_caller_unchanged_and_leaves_nothing(site, rng):
    """An Exception (with a note naming the node), then each BaseException (untouched, no note:
    a custom subclass, KeyboardInterrupt, SystemExit) where user code can raise one."""
    counts = await fs.error_trial(site, fs.Boom(f"boom at {site}"), rng)
    assert problems(counts) == NO_PROBLEMS
    if site in fs.BASE_SITES:
        for exc_type in fs.BASE_EXCEPTIONS:
            counts = await fs.error_trial(site, exc_type(f"{exc_type.__name__} at {site}"), rng)
            assert problems(counts) == NO_PROBLEMS, exc_type


async def test_base_exception_in_a_custom_backward_is_never_success():
    """The issue's case, spelled out: a BaseException subclass raised in a custom backward (plain,
    on the loop) used to let the backward return with the gradient silently missing."""
    exc = fs.Abort("not an Exception")
    fs.PlainBoom.exc = exc
    x = ag.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(fs.Abort) as caught:
        await within((fs.PlainBoom.apply(x) * 2.0).sum().backward())
    assert caught.value is exc and not getattr(exc, "__notes__", None)
    assert x.grad is None and engine_is_clean()
    await within((x * 3.0).sum().backward())
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 3.0])


class CtrlC(ag.Function):
    """Its backward does what a Ctrl-C does while the backward runs, then waits for ever."""

    @staticmethod
    def forward(ctx, x):
        return x * 1.0

    @staticmethod
    async def backward(ctx, g):
        _thread.interrupt_main()
        await asyncio.sleep(3600)
        return g


@pytest.mark.skipif(signal.getsignal(signal.SIGINT) is not signal.default_int_handler,
                    reason="asyncio's runner handles SIGINT only where Python's default handler is installed")
def test_ctrl_c_during_backward_sync_reaches_the_caller_and_the_engine_stays_usable():
    """SIGINT in a plain script's ``backward_sync``: asyncio's runner cancels the backward and
    raises KeyboardInterrupt; nothing was accumulated and the next backward on that thread's
    loop is right."""
    x = ag.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(KeyboardInterrupt):
        ag.backward_sync((CtrlC.apply(x) * 2.0).sum())
    assert x.grad is None
    ag.backward_sync((x * 3.0).sum())
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 3.0])


async def test_exception_note_names_the_node_and_keeps_type_and_message():
    exc = fs.Boom("the user's words")
    fs.AsyncBoom.exc = exc
    x = ag.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(fs.Boom) as caught:
        await within(fs.AsyncBoom.apply(x).sum().backward())
    assert caught.value is exc and type(exc) is fs.Boom and str(exc) == "the user's words"
    assert caught.value.__notes__ == ["[asyncgrad] raised while running AsyncBoomBackward in the backward pass"]


async def test_queue_callback_from_a_hook_running_in_a_kernel_thread():
    """A hook of a node run in the executor is user code in a kernel thread; the engine it can
    reach there is its loop's, so a final callback queued from it runs once, on the loop."""
    ag.set_inline_threshold("cpu", 0)
    ran = []
    x = ag.tensor(np.ones(64), requires_grad=True)
    y = x.sin()
    y.grad_fn.register_prehook(lambda grads: ag.get_engine().queue_callback(lambda: ran.append(x.grad is not None)))
    await within((y * 2.0).sum().backward())
    assert ran == [True]


async def test_anomaly_mode_on_a_scalar_loss():
    """Anomaly mode's NaN check reads the fast path's numpy scalars (the issue's AttributeError)."""
    x = ag.tensor([1.0, 2.0, 3.0], requires_grad=True)
    with ag.detect_anomaly():
        await within((x.sum() * 2.0).backward())
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0, 2.0])


# --------------------------------------------------------------------------- many faults
async def test_100_faults_back_to_back_then_every_kind_is_right(rng):
    counts = await fs.back_to_back(100, rng)
    assert problems(counts) == NO_PROBLEMS
    assert counts["cancelled"] > 10  # the cancellations among them did land


async def test_one_failing_among_concurrent_backwards_leaves_the_others_exact(rng):
    """For each error site: one backward failing there among six concurrent ones of the other kinds."""
    for site in fs.SITES:
        counts = await fs.concurrent_trial(site, rng)
        assert problems(counts) == NO_PROBLEMS, site


# --------------------------------------------------------------------------- the harness's own oracle
# Last in the file: importing torch makes every later gc.collect() (conftest's teardown) 3x slower.
async def test_every_graph_kind_agrees_with_torch_when_nothing_goes_wrong(rng, torch):
    """The analytic gradients the trials compare with are right: checked against torch's on the
    same computation (reentrant, async and checkpointed graphs compute the same chain)."""
    for kind in fs.KINDS:
        fs.configure(kind)
        case = await fs.build(kind, rng)
        await case.loss.backward()
        assert fs.grads_match(case), kind
        x = torch.tensor(case.leaves[0].detach().numpy(), requires_grad=True)
        h = x
        if kind == "checkpoint":
            w = torch.tensor(case.leaves[1].detach().numpy(), requires_grad=True)
            for _ in range(4):
                h = (h * w).sin()
            h.sum().backward()
            np.testing.assert_allclose(case.leaves[1].grad.numpy(), w.grad.numpy(), rtol=1e-12, atol=1e-14)
        else:
            for _ in range({"inline": 400, "executor1": 12, "executor2": 12, "async": 30, "devices": 12}.get(kind, 4)):
                h = (h * 1.1).sin()
            h.sum().backward()
        np.testing.assert_allclose(case.leaves[0].grad.numpy(), x.grad.numpy(), rtol=1e-12, atol=1e-14)
        assert engine_is_clean()


@pytest.mark.slow
async def test_the_long_stress_run_finds_no_problem():
    """``python -m benchmarks.faults_stress --cancels 500 --errors 50`` as a test (2-3 minutes here)."""
    report = await fs.stress(500, 50, seed=0)
    assert report["problems"] == NO_PROBLEMS
    assert report["cancellations"]["cancelled"] == 500
