"""The engine's parts on their own: ready queue order, input buffers, dependencies, exec_info."""

import asyncio
import threading
from heapq import heappop

import numpy as np
import pytest

import asyncgrad as ag
from asyncgrad.engine.engine import compute_dependencies, init_to_execute
from asyncgrad.engine.graph_task import GraphTask
from asyncgrad.engine.input_buffer import accumulate
from asyncgrad.engine.ready_queue import GRAPH_TASK, NODE, ReadyQueue
from asyncgrad.variable.accumulate import grad_accumulator


def graph_task(depth=0):
    loop = asyncio.new_event_loop()
    try:
        return GraphTask(loop.create_future(), False, False, depth, False, False)
    finally:
        loop.close()


def test_ready_queue_order_depth_then_sequence():
    x = ag.randn(2, requires_grad=True)
    early, late = x * 2, x * 3
    queue = ReadyQueue()
    shallow, deep = graph_task(0), graph_task(3)
    queue.push(shallow, early.grad_fn, [])
    queue.push(shallow, late.grad_fn, [])
    queue.push(deep, early.grad_fn, [])
    queue.push(deep, early.grad_fn, [])  # a tie on depth and sequence_nr: the counter decides
    order = [heappop(queue.heap) for _ in range(len(queue.heap))]
    # entries are (-depth, -sequence_nr, count, graph_task, node, inputs): ready_queue.node_task
    assert [e[GRAPH_TASK] for e in order[:2]] == [deep, deep] and order[0][2] < order[1][2]
    assert [e[NODE] for e in order[2:]] == [late.grad_fn, early.grad_fn]


async def test_a_waiting_queue_wakes_on_push_and_on_wake():
    queue = ReadyQueue()
    waiting = asyncio.ensure_future(queue.wait())
    await asyncio.sleep(0)
    queue.wake()
    await asyncio.wait_for(waiting, 1)
    waiting = asyncio.ensure_future(queue.wait())
    await asyncio.sleep(0)
    queue.push(graph_task(0), (ag.randn(2, requires_grad=True) * 2).grad_fn, [])
    await asyncio.wait_for(waiting, 1)


async def test_workers_exit_when_the_engine_is_idle():
    """Note [Idle workers]: no worker task outlives the backwards, also after kernels in threads."""
    engine = ag.get_engine()
    x = ag.randn(3, requires_grad=True)
    await (x * 2).sum().backward()
    ag.set_inline_threshold("cpu", 0)
    await (x.tanh() * 2).sum().backward()
    for _ in range(5):
        await asyncio.sleep(0)
    assert all(worker.task is None for worker in engine.workers.values())


def test_input_buffer_accumulates_in_place_only_when_unshared():
    owned = np.ones(3)
    buffer = [owned]
    del owned
    before = id(buffer[0])
    accumulate(buffer, 0, np.ones(3))
    assert id(buffer[0]) == before and buffer[0].tolist() == [2, 2, 2]

    shared = np.ones(3)
    buffer = [shared]
    accumulate(buffer, 0, np.ones(3))
    assert buffer[0] is not shared and shared.tolist() == [1, 1, 1]

    view_base = np.ones(6)
    buffer = [view_base[:3]]
    accumulate(buffer, 0, np.ones(3))
    assert view_base.tolist() == [1] * 6


async def test_compute_dependencies_counts_edges_and_prunes_by_topological_nr():
    x = ag.randn(2, requires_grad=True)
    h = x * 2
    a, b = h.exp(), h.sin()
    out = (a + b).sum()
    gt = graph_task()
    await compute_dependencies(out.grad_fn, gt, 0)
    assert gt.dependencies[h.grad_fn] == 2
    assert gt.dependencies[grad_accumulator(x)] == 1
    assert out.grad_fn not in gt.dependencies  # the root: nothing points at it

    pruned = graph_task()
    await compute_dependencies(out.grad_fn, pruned, h.grad_fn.topological_nr + 1)
    assert h.grad_fn in pruned.dependencies
    assert grad_accumulator(x) not in pruned.dependencies


async def test_init_to_execute_marks_only_paths_to_the_outputs():
    x, y = ag.randn(2, requires_grad=True), ag.randn(2, requires_grad=True)
    a, b = x.exp(), y.sin()
    out = (a + b).sum()
    gt = graph_task()
    await compute_dependencies(out.grad_fn, gt, 0)
    await init_to_execute(gt, out.grad_fn, [(grad_accumulator(x), 0)], False, 0)
    info = gt.exec_info
    assert info[grad_accumulator(x)].captures == [(0, 0)] and not info[grad_accumulator(x)].needed
    assert info[a.grad_fn].needed and info[out.grad_fn].needed
    assert b.grad_fn not in info


async def test_graph_task_fields_after_a_backward():
    x = ag.randn(2, requires_grad=True)
    seen = {}

    def hook(g):
        from asyncgrad.engine.graph_task import current_graph_task

        gt = current_graph_task.get()
        seen.update(depth=gt.reentrant_depth, keep=gt.keep_graph, create=gt.create_graph,
                    outstanding=gt.outstanding_tasks, future=gt.future.done())

    y = x * 2
    y.register_hook(hook)
    await y.sum().backward(retain_graph=True)
    assert seen == {"depth": 0, "keep": True, "create": False, "outstanding": 1, "future": False}


@pytest.mark.skipif(not ag.device("cpu").is_cpu, reason="sanity")
def test_cuda_device_needs_cupy():
    try:
        import cupy  # noqa: F401
    except ImportError:
        with pytest.raises(RuntimeError, match="cuda devices need CuPy"):
            ag.device("cuda:0")
    else:
        pytest.skip("CuPy is installed: covered by test_cuda.py")


async def test_accumulate_grad_steals_only_unshared_gradients():
    x = ag.tensor(np.ones((4, 4)), requires_grad=True)
    y = x * 3.0
    await y.sum().backward()
    assert x.grad.data.flags.owndata and x.grad.tolist() == [[3.0] * 4] * 4

    leaf = ag.tensor(np.ones(3), requires_grad=True)
    given = ag.tensor(np.array([1.0, 2.0, 3.0]))
    await leaf.backward(given)
    given.data[:] = 0
    assert leaf.grad.tolist() == [1.0, 2.0, 3.0]

    seen = []
    z = ag.tensor(np.ones(2), requires_grad=True)
    z.register_hook(lambda g: seen.append(g))
    await (z * 2.0).sum().backward()
    z.grad.data += 1
    assert seen[0].tolist() == [2.0, 2.0] and z.grad.tolist() == [3.0, 3.0]


async def test_get_engine_in_a_loop_callback_and_in_a_kernel_thread():
    """Note [Engine per loop, not a RunVar]: outside any Task (a plain loop callback) and in a kernel
    thread (no running loop) get_engine() still finds the running backward's engine."""
    engine = ag.get_engine()
    loop = asyncio.get_running_loop()
    seen = loop.create_future()
    loop.call_soon(lambda: seen.set_result(ag.get_engine()))
    assert await seen is engine

    ag.set_inline_threshold("cpu", 0)  # the hook runs in a kernel thread with its node
    x = ag.ones(2, requires_grad=True)
    y = x * 2
    found = []
    y.grad_fn.register_prehook(lambda grads: found.append((ag.get_engine(), threading.get_ident())))
    await y.sum().backward()
    assert found[0][0] is engine and found[0][1] != threading.get_ident()
