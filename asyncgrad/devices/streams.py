"""Streams and events: the order in which a device runs its work, and how two orders meet."""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import queue
import threading
import weakref
from collections.abc import Iterator
from typing import Any, Callable

from asyncgrad.devices.backend import STREAMS_ACTIVE as ACTIVE
from asyncgrad.devices.device import Device, device

# ``ACTIVE[0]``: whether a non-cpu stream other than the default can be current: set once a
# ``stream(s)`` context entered a sim stream, or a cuda device was used (CuPy's current stream may be set by
# CuPy itself). Until then ``record`` does not look for the forward stream (Note [Streams per device]).


# Note [Streams per device]: torch's CUDA model, on every device type, so the engine has one
# routing and synchronisation code path (Note [Streaming backwards] in engine/stream_sync.py):
#
# * A ``Stream`` is an ordered lane of work on one device. Work issued to one stream runs in
#   issue order; work on two streams is unordered unless an ``Event`` joins them:
#   ``event.record(s1)`` marks the work issued to ``s1`` so far, ``s2.wait_event(event)`` makes
#   everything issued to ``s2`` afterwards wait for it. ``synchronize`` blocks the host.
# * Each host thread has its own current stream per device (``current_stream``, changed by the
#   ``stream(s)`` context manager), as CuPy and CUDA have: a current stream is a per-thread
#   setting, never shared between the loop thread and a kernel thread.
# * ``cuda:N``: CuPy's ``cupy.cuda.Stream``/``cupy.cuda.Event``, the current stream being CuPy's
#   own (``cupy.cuda.get_current_stream()`` with device N current), so CuPy kernels an op
#   launches go where ``current_stream`` says. Entering a stream also makes device N current in
#   the thread (CuPy launches on the current device: a ``cuda:1`` kernel needs device 1).
# * ``sim:N``: a host-side stream: a FIFO lane, one thread of its own that runs the work
#   ``launch``-ed to it in order; an event is a ``threading.Event`` set when the lane reaches the
#   point where it was recorded, and ``wait_event`` puts a wait for it in the lane, so events
#   order work for real. Ops on ``sim`` compute when they are called, in the calling thread:
#   the engine runs a node's kernel in its thread after its stream's queued work (``ready``),
#   which is when a GPU would start it.
# * ``cpu``: one stream that is always idle; events are no-ops. Nothing here costs anything on
#   the cpu path: the engine asks for streams only on non-cpu devices, and ``record`` only once
#   a non-cpu stream was made current or a cuda device exists (``ACTIVE``).


_local = threading.local()
"""``_local.streams``: this thread's current stream of each sim device (absent: its default)."""

_DEFAULTS: dict[Device, Stream] = {}

IDLE_EXIT_S = 1.0
"""How long a sim lane's thread waits for work before it ends (a new one starts at the next launch)."""


def _dev(spec: str | Device | None) -> Device:
    return device(spec)


class _Lane:
    """A sim stream's FIFO: jobs run in submission order in one daemon thread of the lane's own."""

    __slots__ = ("_lock", "_jobs", "_pending", "_running", "_name", "__weakref__")

    def __init__(self, name: str) -> None:
        self._name = name
        self._reset()
        _LANES.add(self)

    def _reset(self) -> None:
        """Empty and without a thread: new, or in a forked child, where the parent's lane thread does not exist."""
        self._lock = threading.Lock()
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._pending = 0
        self._running = False

    def idle(self) -> bool:
        return self._pending == 0

    def submit(self, fn: Callable, *args: Any) -> concurrent.futures.Future:
        future: concurrent.futures.Future = concurrent.futures.Future()
        with self._lock:
            self._pending += 1
            self._jobs.put((fn, args, future))
            if not self._running:
                self._running = True
                threading.Thread(target=self._serve, name=self._name, daemon=True).start()
        return future

    def _serve(self) -> None:
        while True:
            try:
                fn, args, future = self._jobs.get(timeout=IDLE_EXIT_S)
            except queue.Empty:
                with self._lock:
                    if not self._pending:
                        self._running = False
                        return
                continue
            try:
                future.set_result(fn(*args))
            except BaseException as exc:  # the launcher reads it from its future
                future.set_exception(exc)
            with self._lock:
                self._pending -= 1
            del fn, args, future


_LANES: weakref.WeakSet = weakref.WeakSet()


def _forget_lanes() -> None:
    for lane in list(_LANES):
        lane._reset()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_lanes)


class Stream:
    """A lane of work on one device (torch's ``torch.cuda.Stream``; Note [Streams per device]).

    ``Stream("sim:0")`` or ``Stream("cuda:1")`` makes a new stream; ``current_stream`` and
    ``default_stream`` give the existing ones.
    """

    __slots__ = ("device", "_native", "_lane", "__weakref__")

    def __init__(self, device: str | Device, *, _native: Any = None, _cpu: bool = False) -> None:
        dev = _dev(device)
        self.device = dev
        self._native = None
        self._lane: _Lane | None = None
        if dev.type == "cuda":
            backend = dev.backend
            if _native is None:
                with backend.cupy.cuda.Device(dev.index):
                    _native = backend.cupy.cuda.Stream()
            self._native = _native
        elif dev.type == "sim":
            self._lane = _Lane(f"asyncgrad {dev} stream")
        elif not _cpu:
            raise RuntimeError("cpu has one stream only: use current_stream('cpu')")

    def __repr__(self) -> str:
        return f"<asyncgrad.Stream device={self.device} {self._key():#x}>"

    def _key(self) -> int:
        return self._native.ptr if self._native is not None else id(self)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Stream) and other.device is self.device and other._key() == self._key()

    def __hash__(self) -> int:
        return hash((self.device, self._key()))

    # ---- work
    def launch(self, fn: Callable, *args: Any) -> concurrent.futures.Future:
        """Issue ``fn(*args)`` as work of this stream, with this stream current, after the work
        issued before it; a future of its result. On sim it runs later, in the lane's thread; on
        cuda and cpu it runs now in this thread (the CuPy kernels it launches are what is queued)."""
        if self._lane is not None:
            return self._lane.submit(_run_current, self, fn, args)
        future: concurrent.futures.Future = concurrent.futures.Future()
        try:
            future.set_result(_run_current(self, fn, args))
        except BaseException as exc:
            future.set_exception(exc)
        return future

    def ready(self) -> None:
        """Return once this host thread may run work of this stream in place: a sim lane has run
        everything queued before now (a GPU stream needs nothing: its kernels queue)."""
        lane = self._lane
        if lane is not None and not lane.idle():
            lane.submit(_nothing).result()

    # ---- ordering
    def record_event(self, event: Event | None = None) -> Event:
        """Record ``event`` (a new one if None) on this stream; return it."""
        if event is None:
            event = Event(self.device)
        event.record(self)
        return event

    def wait_event(self, event: Event) -> None:
        """Make all work issued to this stream from now on wait for ``event`` (does not block)."""
        if self._native is not None:
            if event._native is not None:
                self._native.wait_event(event._native)
            return
        lane = self._lane
        flag = event._flag
        if lane is None or flag is None or (flag.is_set() and lane.idle()):
            return
        lane.submit(flag.wait)

    def wait_stream(self, other: Stream) -> None:
        """Make future work of this stream wait for all work issued to ``other`` so far."""
        if other is not self:
            self.wait_event(other.record_event())

    def synchronize(self) -> None:
        """Block until all work issued to this stream has finished."""
        if self._native is not None:
            self._native.synchronize()
        else:
            self.ready()

    def query(self) -> bool:
        """Whether all work issued to this stream has finished."""
        if self._native is not None:
            return bool(self._native.done)
        return self._lane is None or self._lane.idle()


class Event:
    """A point in a stream's work (torch's ``torch.cuda.Event``): ``record``, ``wait``,
    ``synchronize``, ``query``. An event never recorded counts as complete, as torch's."""

    __slots__ = ("device", "stream", "_native", "_flag")

    def __init__(self, device: str | Device) -> None:
        dev = _dev(device)
        self.device = dev
        self.stream: Stream | None = None
        """The stream it was last recorded on."""
        self._native = None
        self._flag: threading.Event | None = None
        if dev.type == "cuda":
            cupy = dev.backend.cupy
            with cupy.cuda.Device(dev.index):  # an event is recorded on streams of its own device only
                self._native = cupy.cuda.Event(disable_timing=True)

    def record(self, stream: Stream | None = None) -> None:
        """Mark the work issued to ``stream`` (the device's current stream if None) so far."""
        if stream is None:
            stream = current_stream(self.device)
        if stream.device is not self.device:
            raise RuntimeError(
                f"Event device {self.device} does not match recording stream's device {stream.device}."
            )
        self.stream = stream
        if self._native is not None:
            self._native.record(stream._native)
            return
        lane = stream._lane
        if lane is None:
            self._flag = None
            return
        flag = threading.Event()  # a new one: a wait queued for the previous record keeps its point
        self._flag = flag
        if lane.idle():
            flag.set()
        else:
            lane.submit(flag.set)

    def wait(self, stream: Stream | None = None) -> None:
        """Make future work of ``stream`` (the current stream of the event's device if None) wait for this event."""
        (current_stream(self.device) if stream is None else stream).wait_event(self)

    def synchronize(self) -> None:
        """Block until the work this event marks has finished."""
        if self._native is not None:
            self._native.synchronize()
        elif self._flag is not None:
            self._flag.wait()

    def query(self) -> bool:
        """Whether the work this event marks has finished."""
        if self._native is not None:
            return bool(self._native.done)
        return self._flag is None or self._flag.is_set()


def _nothing() -> None:
    return None


def _run_current(s: Stream, fn: Callable, args: tuple) -> Any:
    token = enter(s)
    try:
        return fn(*args)
    finally:
        leave(token)


_CPU_STREAM: Stream | None = None


def default_stream(device: str | Device) -> Stream:
    """The device's default stream (CuPy's null stream on cuda)."""
    global _CPU_STREAM
    dev = _dev(device)
    found = _DEFAULTS.get(dev)
    if found is None:
        if dev.type == "cpu":
            found = _CPU_STREAM = Stream(dev, _cpu=True)
        elif dev.type == "cuda":
            found = Stream(dev, _native=dev.backend.cupy.cuda.Stream.null)  # one object for every thread
        else:
            found = Stream(dev)
        found = _DEFAULTS.setdefault(dev, found)
    return found


def current_stream(device: str | Device) -> Stream:
    """This thread's current stream of ``device`` (its default unless a ``stream(s)`` is entered)."""
    dev = _dev(device)
    if dev.type == "cuda":
        cupy = dev.backend.cupy
        with cupy.cuda.Device(dev.index):  # CuPy keeps a current stream per thread and device
            return Stream(dev, _native=cupy.cuda.get_current_stream())
    current = getattr(_local, "streams", None)
    found = current.get(dev) if current else None
    return found if found is not None else default_stream(dev)


def enter(s: Stream) -> tuple:
    """Make ``s`` this thread's current stream of its device (and, on cuda, its device the current
    device); a token for ``leave``. The engine's form of ``stream(s)``, without a context manager."""
    dev = s.device
    if s._native is not None:
        # Only what changes is set, and only that is undone (``leave``): the worker enters its
        # device's stream for every node, and it is usually current already.
        cupy = dev.backend.cupy
        runtime = cupy.cuda.runtime
        previous_device = runtime.getDevice()
        if previous_device == dev.index:
            previous_device = -1
        else:
            runtime.setDevice(dev.index)
        previous = cupy.cuda.get_current_stream()
        if previous.ptr == s._native.ptr:
            previous = None
        else:
            s._native.use()
        return (dev, previous, previous_device)
    if not ACTIVE[0] and dev.type != "cpu" and s is not _DEFAULTS.get(dev):
        ACTIVE[0] = True  # from now on ``record`` asks which stream is current
    current = getattr(_local, "streams", None)
    if current is None:
        current = _local.streams = {}
    previous = current.get(dev)
    current[dev] = s
    return (dev, previous, None)


def leave(token: tuple) -> None:
    """Undo ``enter``: the previous current stream (and device) come back."""
    dev, previous, previous_device = token
    if previous_device is not None:  # cuda: -1 where the device did not change, None where the stream did not
        if previous is not None:
            previous.use()  # device ``dev`` is still current: the stream goes back on it
        if previous_device >= 0:
            dev.backend.cupy.cuda.runtime.setDevice(previous_device)
        return
    current = _local.streams
    if previous is None:
        current.pop(dev, None)
    else:
        current[dev] = previous


@contextlib.contextmanager
def stream(s: Stream | None) -> Iterator[Stream | None]:
    """torch's ``torch.cuda.stream(s)``: ``s`` is this thread's current stream of its device inside
    the block; ops issued there run on it and their backward nodes run on it too (Note
    [Streaming backwards]). On cuda it also makes the stream's GPU CuPy's current device, which
    forward ops on ``cuda:N`` (N > 0) need: they compute on the current device (the backward
    sets it itself). ``None`` changes nothing."""
    if s is None:
        yield None
        return
    token = enter(s)
    try:
        yield s
    finally:
        leave(token)


def synchronize(device: str | Device) -> None:
    """Block until all work issued to ``device``'s current stream in this thread has finished
    (sim: that stream's lane; cuda: the whole device, as torch's ``torch.cuda.synchronize``)."""
    dev = _dev(device)
    if dev.type == "cuda":
        with dev.backend.cupy.cuda.Device(dev.index):
            dev.backend.cupy.cuda.runtime.deviceSynchronize()
    else:
        current_stream(dev).synchronize()


# ---- the forward stream of each node (Note [Streaming backwards] in engine/stream_sync.py)
_FORWARD: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
"""node -> the stream its forward ran on, for nodes recorded on a stream other than their
device's default (absent: the default). A side table, so a node costs nothing more on cpu."""


def note_forward(node: Any, device: Device) -> None:
    """Remember the stream ``node``'s forward ran on, when it is not ``device``'s default."""
    if device.type == "cpu":
        return
    s = current_stream(device)
    if s != default_stream(device):
        _FORWARD[node] = s


def streams_in_use() -> bool:
    """Whether any live node was recorded on a stream other than its device's default."""
    return bool(_FORWARD)


def forward_stream(node: Any, device: Device) -> Stream:
    """The stream ``node``'s backward runs on: the one its forward ran on (torch's rule)."""
    found = _FORWARD.get(node) if _FORWARD else None  # empty until a node is recorded on a side stream
    if found is not None:
        return found
    found = _DEFAULTS.get(device)
    return found if found is not None else default_stream(device)
