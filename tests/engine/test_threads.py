"""Threads: one leaf fed from several threads and loops, the blocking bridge's per-thread loops,
kernel threads that never hold the interpreter, and a reentrant backward_sync in a kernel thread
that is cancelled with its parent (issue 8)."""

from __future__ import annotations

import asyncio
import gc
import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import asyncgrad as ag
from asyncgrad.variable.accumulate import grad_accumulator


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


needs_proc = pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts /proc/self/fd")


# --------------------------------------------------------------------------- one leaf, many writers
@pytest.mark.parametrize("n", [50, pytest.param(200, marks=pytest.mark.slow)])
async def test_two_threads_and_the_loop_accumulate_exactly_into_one_leaf(n):
    """n backwards each from two threads (backward_sync, each on its thread's loop) and from this
    loop into one 2M-element leaf: numpy adds without the GIL, so only the leaf's lock keeps it exact
    (without it, 100 each lost updates in every element, measured)."""
    size = 2_000_000
    x = ag.zeros(size, dtype=ag.float64, requires_grad=True)
    start = threading.Barrier(3)
    errors = []

    def from_thread():
        try:
            start.wait()
            for _ in range(n):
                ag.backward_sync((x * 1.0).sum())
        except BaseException as exc:  # reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=from_thread) for _ in range(2)]
    for t in threads:
        t.start()
    await asyncio.to_thread(start.wait)
    for _ in range(n):
        await (x * 1.0).sum().backward()
        await asyncio.sleep(0)  # let the threads in between
    await asyncio.to_thread(lambda: [t.join() for t in threads])
    assert not errors
    grad = x.grad.numpy()
    assert grad.min() == grad.max() == 3 * n


def test_two_loops_in_two_threads_accumulate_exactly_with_post_accumulate_hooks():
    """Post-accumulate hooks run under the leaf's lock, as torch's do: each sees a total no other
    thread is halfway through changing, so every hook call observes a distinct multiple of 2."""
    x = ag.zeros(1_000_000, dtype=ag.float64, requires_grad=True)
    seen = []
    x.register_post_accumulate_grad_hook(lambda t: seen.append(float(t.grad.data[-1])))

    def run():
        async def main():
            for _ in range(50):
                await (x * 2.0).sum().backward()
        asyncio.run(main())

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    np.testing.assert_array_equal(x.grad.numpy(), np.full(1_000_000, 200.0))
    assert sorted(seen) == [2.0 * k for k in range(1, 101)]


def test_threads_racing_to_a_fresh_leaf_get_one_accumulator():
    """One AccumulateGrad, hence one lock, per leaf: creating it is guarded (without the guard,
    13 of 300 such races made several, measured with the same switch interval)."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for _ in range(200):
            x = ag.zeros(3, requires_grad=True)
            got = [None] * 4
            barrier = threading.Barrier(4)

            def grab(i, x=x, got=got, barrier=barrier):
                barrier.wait()
                got[i] = grad_accumulator(x)

            threads = [threading.Thread(target=grab, args=(i,)) for i in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert got[0] is not None and all(a is got[0] for a in got)
    finally:
        sys.setswitchinterval(interval)


# --------------------------------------------------------------------------- the bridge's loops
@needs_proc
def test_short_lived_threads_using_backward_sync_leave_no_file_descriptors():
    """Each thread's loop (three descriptors) is closed as the thread ends, not at exit."""
    x = ag.ones(4, requires_grad=True)

    def body():
        ag.backward_sync((x * 2).sum())

    def threads(count):
        for _ in range(count):
            t = threading.Thread(target=body)
            t.start()
            t.join()

    threads(5)
    gc.collect()
    before = _open_fds()
    threads(1000)
    gc.collect()
    assert _open_fds() <= before
    assert x.grad.numpy().tolist() == [2.0 * 1005] * 4


def test_backward_sync_reuses_its_threads_loop_while_the_thread_lives():
    loops = []
    x = ag.ones(2, requires_grad=True)

    class Spy(ag.Function):
        @staticmethod
        def forward(ctx, t):
            return t * 1

        @staticmethod
        async def backward(ctx, g):
            loops.append(asyncio.get_running_loop())
            return g

    def body():
        for _ in range(3):
            ag.backward_sync(Spy.apply(x).sum())

    t = threading.Thread(target=body)
    t.start()
    t.join()
    assert len(loops) == 3 and loops[0] is loops[1] is loops[2]
    assert loops[0].is_closed(), "closed when its thread ended"


# --------------------------------------------------------------------------- interpreter exit
_EXIT_SCRIPT = textwrap.dedent("""
    import asyncio, sys, threading
    import asyncgrad as ag

    waiting = threading.Event()

    class Block(ag.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        async def backward(ctx, g):
            await asyncio.Event().wait()  # never set
            return g

    class Outer(ag.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):  # plain def, in a kernel thread (inline threshold 0)
            inner = ag.ones(1, requires_grad=True)
            with ag.enable_grad():
                loss = Block.apply(inner).sum()
            waiting.set()
            loss.backward_sync()  # waits on the loop for a child that never ends
            return g

    ag.set_inline_threshold("cpu", 0)
    loss = Outer.apply(ag.ones(3, requires_grad=True)).sum()

    async def go():
        await loss.backward()

    loop = asyncio.new_event_loop()
    loop.create_task(go())
    if sys.argv[1] == "run_forever":  # no root task that ever ends
        loop.call_later(0.3, loop.stop)
        loop.run_forever()
    else:
        loop.run_until_complete(asyncio.sleep(0.3))
    assert waiting.is_set()
    loop.close()
    print("closed", flush=True)
""")


@pytest.mark.parametrize("how", ["run_forever", "run_until_complete"])
def test_a_loop_closed_while_a_kernel_thread_waits_in_backward_sync_lets_the_interpreter_exit(how):
    proc = subprocess.run([sys.executable, "-c", _EXIT_SCRIPT, how], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "closed"


_FORK_SCRIPT = textwrap.dedent("""
    import asyncio, gc, os
    import asyncgrad as ag
    from asyncgrad.engine.gcfreeze import FrozenWhileBusy

    ag.set_inline_threshold("cpu", 0)  # every node a kernel
    x = ag.ones(3, requires_grad=True)

    async def run():
        await (x * 2).sum().backward()

    asyncio.run(run())  # the pool keeps idle kernel threads
    class Running:  # a graph task's stand-in: its future's loop is the one busy
        future = asyncio.new_event_loop().create_future()

    running = Running()
    FrozenWhileBusy.enter(running)  # as if a backward were running in the parent
    assert gc.get_freeze_count() > 0
    pid = os.fork()
    if pid == 0:
        ok = gc.get_freeze_count() == 0
        asyncio.run(run())
        os._exit(0 if ok and x.grad.tolist() == [4.0] * 3 else 1)
    FrozenWhileBusy.exit(running)
    print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), gc.get_freeze_count(), flush=True)
""")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_starts_its_own_kernel_threads_and_nothing_frozen():
    """The parent's kernel threads do not exist in a forked child: it must not queue work for them."""
    proc = subprocess.run([sys.executable, "-c", _FORK_SCRIPT], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["0", "0"]


# --------------------------------------------------------------------------- cancellation
class Reenter(ag.Function):
    """A plain backward, run in a kernel thread, that runs a long reentrant backward_sync into
    ``leaf``: its child graph's nodes keep accumulating for as long as it is allowed to."""

    leaf: ag.Tensor
    started: threading.Event
    outcome: list

    @staticmethod
    def forward(ctx, x):
        return x * 1

    @staticmethod
    def backward(ctx, g):
        with ag.enable_grad():
            h = Reenter.leaf
            losses = []
            for _ in range(400):
                losses.append((h * 1.0).sum())
        Reenter.started.set()
        try:
            for loss in losses:  # 400 reentrant backwards, one after another
                loss.backward_sync()
        except BaseException as exc:
            Reenter.outcome.append(type(exc).__name__)
            raise
        Reenter.outcome.append("finished")
        return g


async def test_cancelled_parent_stops_a_kernel_thread_reentrant_backward_from_writing_grad():
    ag.set_inline_threshold("cpu", 0)  # Reenter runs in a kernel thread
    Reenter.leaf = ag.zeros(1000, dtype=ag.float64, requires_grad=True)
    Reenter.started = threading.Event()
    Reenter.outcome = []
    x = ag.ones(3, requires_grad=True)
    task = asyncio.ensure_future(Reenter.apply(x).sum().backward())
    await asyncio.to_thread(Reenter.started.wait, 10)
    while Reenter.leaf.grad is None:
        await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    seen = Reenter.leaf.grad.numpy().copy()
    for _ in range(100):  # the kernel thread would go on with its 400 backwards
        await asyncio.sleep(0.001)
    np.testing.assert_array_equal(Reenter.leaf.grad.numpy(), seen)
    assert 0 < seen[0] < 400
    assert x.grad is None
    assert not ag.get_engine().live
    for _ in range(1000):
        if Reenter.outcome:
            break
        await asyncio.sleep(0.001)
    assert Reenter.outcome == ["CancelledError"], "the child saw its cancellation"
    y = ag.ones(2, requires_grad=True)
    await (y * 3).sum().backward()
    assert y.grad.numpy().tolist() == [3.0, 3.0]
