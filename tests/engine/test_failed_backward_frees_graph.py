"""A failed backward frees its graph by reference counting (Note [A failed backward frees its graph]
in engine/scope.py): with the cyclic collector off, the tensors and nodes of a graph whose backward
raised, at every place user code or the engine can raise, or that was cancelled, are gone as soon
as the caller lets go of the exception, as torch's are."""

import asyncio
import weakref

import numpy as np
import pytest

import asyncgrad as ag


class Boom(Exception):
    pass


def _raise(*_):
    raise Boom("boom")  # a new exception at each call: nothing outside the backward keeps it


class PlainBoom(ag.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * 1.0

    @staticmethod
    def backward(ctx, g):
        raise Boom("plain")


class AsyncBoom(ag.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * 1.0

    @staticmethod
    async def backward(ctx, g):
        await asyncio.sleep(0)
        raise Boom("async")


class NestedBoom(ag.Function):
    """Reentrant backwards three deep; the innermost raises."""

    @staticmethod
    def forward(ctx, x, depth):
        ctx.save_for_backward(x)
        ctx.depth = depth
        return x * 1.0

    @staticmethod
    async def backward(ctx, g):
        if ctx.depth == 0:
            raise Boom("nested")
        (x,) = ctx.saved_tensors
        with ag.enable_grad():
            z = x.detach().requires_grad_()
            y = NestedBoom.apply(z, ctx.depth - 1)
        (gz,) = await ag.grad(y, z, g)
        return gz, None


class PlainNestedBoom(ag.Function):
    """A plain-def backward whose reentrant ``backward_sync`` raises."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * 1.0

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        with ag.enable_grad():
            z = x.detach().requires_grad_()
            y = PlainBoom.apply(z).sum()
        ag.backward_sync(y)
        return g


class Sleeps(ag.Function):
    """An ``async def`` backward still sleeping when the call is cancelled or a sibling fails."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * 1.0

    @staticmethod
    async def backward(ctx, g):
        await asyncio.sleep(30)
        return g


def _loss(site, x):
    """A loss of ``x`` whose backward fails at ``site``."""
    if site == "plain_backward":
        return (PlainBoom.apply(x).sin() * 2.0).sum()
    if site == "plain_backward_in_thread":
        ag.set_inline_threshold("cpu", 0)
        return (PlainBoom.apply(x).sin() * 2.0).sum()
    if site == "async_backward":
        return (AsyncBoom.apply(x).sin() * 2.0 + Sleeps.apply(x)).sum()
    if site == "reentrant_async":
        return (NestedBoom.apply(x, 3).sin() * 2.0).sum()
    if site == "reentrant_plain":
        return (PlainNestedBoom.apply(x).sin() * 2.0).sum()
    if site == "tensor_hook":
        y = x.sin()
        y.register_hook(_raise)
        return (y * 2.0).sum()
    if site == "leaf_hook":
        x.register_hook(_raise)
        return (x.sin() * 2.0).sum()
    if site == "pre_hook":
        y = x.sin()
        y.grad_fn.register_prehook(_raise)
        return (y * 2.0).sum()
    if site == "post_hook":
        y = x.sin()
        y.grad_fn.register_hook(_raise)
        return (y * 2.0).sum()
    if site == "post_accumulate_hook":
        x.register_post_accumulate_grad_hook(_raise)
        return (x.sin() * 2.0).sum()
    if site == "retain_grad_hook":
        y = x.sin()
        y.retain_grad()
        y.register_hook(_raise)
        return (y * 2.0).sum()
    if site == "unpack_hook":
        with ag.autograd.graph.saved_tensors_hooks(lambda t: t, _raise):
            y = x.sin()  # saves x: unpacked (and refused) by its backward
        return (y * 2.0).sum()
    if site == "final_callback":
        y = x.sin()
        y.register_hook(lambda g: ag.get_engine().queue_callback(_raise))
        return (y * 2.0).sum()
    if site == "kernel_in_thread":
        ag.set_inline_threshold("cpu", 10)
        ag.set_num_workers("cpu", 2)
        y = x.reshape(2, 4) @ x.reshape(4, 2)
        y.grad_fn.register_prehook(_raise)  # runs with the matmul's backward, in a kernel thread
        return (y.tanh().sum() + Sleeps.apply(x).sum())
    if site == "anomaly_nan":
        return (x * ag.full((8,), float("nan"), dtype=ag.float64)).sum()
    if site in ("cancelled", "timed_out"):
        return (Sleeps.apply(x).sin() * 2.0).sum()
    if site == "cancelled_in_thread":
        ag.set_inline_threshold("cpu", 10)
        return (Sleeps.apply(x).sin() * 2.0 + (x.reshape(2, 4) @ x.reshape(4, 2)).sum()).sum()
    raise ValueError(site)


SITES = ("plain_backward", "plain_backward_in_thread", "async_backward", "reentrant_async", "reentrant_plain",
         "tensor_hook", "leaf_hook", "pre_hook", "post_hook", "post_accumulate_hook", "retain_grad_hook",
         "unpack_hook",
         "final_callback", "kernel_in_thread", "anomaly_nan", "cancelled", "timed_out", "cancelled_in_thread")


async def _fail(site):
    """Run a failing backward at ``site``; weak references to its leaf, its loss, the loss's node and
    the node's saved tensor's node; the error's type."""
    x = ag.tensor(np.linspace(0.5, 1.5, 8), requires_grad=True)
    loss = _loss(site, x)
    refs = [weakref.ref(x), weakref.ref(loss), weakref.ref(loss.grad_fn)]
    node = loss.grad_fn
    while node.next_functions and node.next_functions[0][0] is not None:
        node = node.next_functions[0][0]
        refs.append(weakref.ref(node))
    del node
    caught = None
    try:
        if site == "anomaly_nan":
            with ag.detect_anomaly():
                await loss.backward()
        elif site == "cancelled" or site == "cancelled_in_thread":
            task = asyncio.ensure_future(loss.backward())
            for _ in range(5):
                await asyncio.sleep(0)
            task.cancel()
            await task
        elif site == "timed_out":
            await asyncio.wait_for(loss.backward(), 0.01)
        else:
            await loss.backward()
    except (Exception, asyncio.CancelledError) as exc:  # the caller drops it at the end of this block
        caught = type(exc)
    del x, loss
    if site in ("cancelled", "cancelled_in_thread"):
        del task
        # the loop's handle that resumed this task holds the awaited task, and so its CancelledError, until
        # this step ends (asyncio's own: any cancelled task is kept so by whoever awaited it)
        await asyncio.sleep(0)
    return refs, caught


@pytest.mark.parametrize("site", SITES)
async def test_a_failed_backward_frees_its_graph_without_the_collector(site, collector_off):
    saved = ag.device("cpu").inline_threshold, ag.device("cpu").num_workers
    try:
        refs, caught = await _fail(site)
    finally:
        ag.device("cpu").inline_threshold, ag.device("cpu").num_workers = saved
    expected = {"cancelled": asyncio.CancelledError, "cancelled_in_thread": asyncio.CancelledError,
                "timed_out": TimeoutError, "anomaly_nan": RuntimeError}.get(site, Boom)
    assert caught is expected
    alive = [type(ref()).__name__ for ref in refs if ref() is not None]
    assert not alive, f"{site}: still alive without the collector: {alive}"


async def test_the_check_sees_a_graph_kept_alive(collector_off):
    """The test above can fail: a graph whose exception is still held stays alive."""
    x = ag.tensor(np.linspace(0.5, 1.5, 8), requires_grad=True)
    loss = (PlainBoom.apply(x).sin() * 2.0).sum()
    ref = weakref.ref(loss.grad_fn)
    with pytest.raises(Boom) as info:
        await loss.backward()
    del x, loss
    assert ref() is not None  # the traceback's frames hold the graph while the exception lives
    del info
    assert ref() is None
