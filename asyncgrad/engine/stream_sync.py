"""Which stream a node's backward runs on, and the events between streams (non-cpu devices only)."""

# Note [Streaming backwards] (torch's note of that name, in its engine and input_buffer.cpp):
# a node's backward runs on the stream its forward ran on (``forward_stream``: ``record`` keeps
# it, Note [Streams per device] in devices/streams.py), with that stream current and its device
# the current device in the thread that runs the kernel (the loop for an inline node, a kernel
# thread for a large one). Where a gradient produced on one stream is consumed on another:
#
# * after the producer ran and its outputs were routed, an event is recorded on the producer's
#   stream for each consumer on another stream (and, for a consumer on another device, on that
#   device's current stream in this thread, where ``route`` copied the gradient), and kept for the
#   consumer in the graph task's table;
# * before the consumer runs, its stream waits on those events;
# * before a producer runs, its stream also waits on the events already kept for its consumers:
#   ``route`` adds its gradient into a buffer that may hold another producer's, on this producer's
#   stream, which must come after that other producer's work (torch picks an accumulation stream;
#   waiting here orders the same work, at the price of also ordering this producer's kernel);
# * nodes with no outputs (AccumulateGrad: the leaves) and nodes whose gradients ``grad()``
#   captures record their stream as a leaf stream; when the graph task finishes, before any final
#   callback, the current stream of each leaf stream's device (in the thread finishing it: the
#   engine's loop) waits for it, so ``.grad`` and captured gradients are safe to read there.
#
# The cpu worker never comes here (Note [Per-node cost] in worker.py): cpu streams are no-ops; nor does
# a non-cpu worker's chain step while streams are plain (Note [Plain streams] below).
#
# Where this differs from torch, and why:
# * an ``async def`` custom backward (OWN_TASK) awaits on the loop: its stream cannot stay
#   current across the await without leaking into every other coroutine of the loop thread, so
#   only its waits, routing and events are on its stream; a kernel it launches goes to the loop
#   thread's current stream. A plain-def backward (PORTAL) runs like any node, its stream current;
#   if it reenters (``backward_sync``, Note [Servers] in worker.py) its server is suspended with
#   that stream still current in the loop thread, which the nested backward's nodes, entering and
#   leaving their own streams, restore in LIFO order;
# * the "caller's current stream" of the leaf sync is the finishing thread's (the engine's loop)
#   when the graph task finishes, not the streams current when ``backward`` was called: the
#   engine does not see the caller's thread (a ``backward_sync`` from another thread);
# * a gradient that ``route`` copies between devices, or that a cpu node sends to a device, is
#   copied on that device's current stream of the loop thread. With CuPy's default (legacy null)
#   stream, which every ``Stream`` (blocking, as torch's) synchronises with, that copy is ordered
#   with the consumer's stream; with ``CUPY_CUDA_PER_THREAD_DEFAULT_STREAM=1`` only the event
#   recorded on it after a producer on another device orders it.

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from asyncgrad.devices import cpu
from asyncgrad.devices.streams import (
    Event,
    Stream,
    current_stream,
    default_stream,
    enter,
    forward_stream,
    leave,
    streams_in_use,
)
from asyncgrad.engine.input_buffer import buffer_device

if TYPE_CHECKING:
    from asyncgrad.devices import Device
    from asyncgrad.engine.graph_task import GraphTask
    from asyncgrad.engine.roles import EngineRole
    from asyncgrad.graph.node import Node

def before(graph_task: GraphTask, node: Node, s: Stream) -> None:
    """Make ``s`` (``node``'s stream) wait for its producers and for its consumers' earlier producers;
    then wait for ``s``'s queued work, so the kernel may run here (Note [Streaming backwards])."""
    table = graph_task.stream_events
    if table:
        for event in table.pop(node, ()):
            s.wait_event(event)
        for fn in node.edge_fns:
            for event in table.get(fn, ()):
                if event.stream != s:  # ``!=``: two wrappers of one CuPy stream are equal
                    s.wait_event(event)
    s.ready()


def after(graph_task: GraphTask, node: Node, s: Stream) -> None:
    """Events on ``s`` for the consumers on other streams; ``s`` as a leaf stream where it is one."""
    fns = node.edge_fns
    if not fns or graph_task.exec_info is not None:
        _leaf(graph_task, s)
    event: Event | None = None
    for fn in fns:
        if fn is None:
            continue
        consumer_device = buffer_device(fn, cpu)
        if consumer_device.is_cpu:
            continue  # the gradient came to the host through to_host, which waits for the copy
        if consumer_device is s.device and not streams_in_use():
            continue  # no node was recorded on a side stream: producer and consumer share the default
        consumer = forward_stream(fn, consumer_device)
        if consumer == s:
            continue
        if event is None:
            event = s.record_event()
        table = graph_task.stream_events
        if table is None:
            table = graph_task.stream_events = {}
        waits = table.setdefault(fn, [])
        waits.append(event)
        if consumer_device is not s.device:  # route copied the gradient there on the current stream
            waits.append(current_stream(consumer_device).record_event())


def _leaf(graph_task: GraphTask, s: Stream) -> None:
    leaves = graph_task.leaf_streams
    if leaves is None:
        leaves = graph_task.leaf_streams = set()
        # first: final callbacks may read any gradient on their device's current stream
        graph_task.final_callbacks.insert(0, lambda: sync_leaves(graph_task))
    leaves.add(s)


def sync_leaves(graph_task: GraphTask) -> None:
    """The caller's current stream of each leaf stream's device waits for that leaf stream."""
    leaves, graph_task.leaf_streams = graph_task.leaf_streams, None
    for s in leaves or ():
        caller = current_stream(s.device)
        if caller != s:
            caller.wait_event(s.record_event())
        caller.ready()


# Note [Plain streams]: while no live node was recorded on a side stream (``streams_in_use``), the
# loop thread's current stream of a device is that device's default (and, on cuda, that device the
# current one), and no event is kept for a graph task (none of its gradients crossed streams or
# devices), every node of that graph task on that device runs on the default stream, which is
# current already, and needs no event before it: its worker may take the cpu worker's chain step
# (Note [One evaluate path] in worker.py) instead of ``evaluate_on_stream``. What must still happen
# is ``after``'s work for what the chain step hands to ``route`` (consumers on other devices, which
# get their events, and the leaves, whose streams are synced at the end): ``router`` does it. The
# first two conditions are checked when the worker switches to a graph task (``on_defaults``), the
# others before each node (``plain``), since a cross-device gradient may add an event at any time.
# What it buys: the per-node cost of a non-cpu device (``python -m benchmarks.cuda``, sim:0's op suite
# runs the same code in CI).


def on_defaults(device: Device) -> bool:
    """Whether this thread runs ``device``'s default stream now (Note [Plain streams]), its queued work done."""
    if streams_in_use():
        return False
    s = default_stream(device)
    if current_stream(device) != s:
        return False
    if s._native is not None and device.backend.cupy.cuda.runtime.getDevice() != device.index:
        return False
    s.ready()
    return True


def plain(graph_task: GraphTask) -> bool:
    """Whether the next node of ``graph_task`` may take the chain step (Note [Plain streams])."""
    return not streams_in_use() and not graph_task.stream_events


def router(engine: EngineRole, device: Device) -> Callable:
    """``engine.route`` followed by ``after`` on ``device``'s default stream (Note [Plain streams])."""
    route = engine.route
    s = default_stream(device)

    def route_on_default(graph_task: GraphTask, node: Node, outputs: Any, chain: Any = None) -> tuple | None:
        chained = route(graph_task, node, outputs, chain)
        after(graph_task, node, s)
        return chained

    return route_on_default


def evaluator(engine: EngineRole, device: Device) -> Callable[[GraphTask, Node, list], None]:
    """``engine.evaluate_function`` for a non-cpu device's worker: the node on its forward stream."""
    evaluate = engine.evaluate_function

    def evaluate_on_stream(graph_task: GraphTask, node: Node, inputs: list) -> None:
        s = forward_stream(node, device)
        token = enter(s)
        try:
            before(graph_task, node, s)
            evaluate(graph_task, node, inputs)
            after(graph_task, node, s)
        finally:
            leave(token)

    return evaluate_on_stream


def on_stream(s: Stream, kernel: Callable, *args: Any) -> Any:
    """Run ``kernel(*args)`` with ``s`` current (and its device, on cuda): a kernel thread's call."""
    token = enter(s)
    try:
        return kernel(*args)
    finally:
        leave(token)


def route(engine: EngineRole, graph_task: GraphTask, node: Node, outputs: Any, s: Stream) -> None:
    """``engine.route`` for a node that ran elsewhere (a kernel thread, a task): on its stream."""
    token = enter(s)
    try:
        engine.route(graph_task, node, outputs)
        after(graph_task, node, s)
    finally:
        leave(token)
