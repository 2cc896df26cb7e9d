"""Streams and events (Note [Streams per device]) and the engine's routing between streams (Note
[Streaming backwards]), on sim:0/sim:1, whose streams are host lanes with real ordering, and the
cuda errors that can be checked without a GPU (by faking a machine without CuPy or GPUs)."""

from __future__ import annotations

import importlib
import sys
import threading
import types

import numpy as np
import pytest

import asyncgrad as ag
from asyncgrad.devices import streams as streams_module
from asyncgrad.engine import stream_sync

try:
    import torch
except ImportError:  # pragma: no cover - torch is in the test environment
    torch = None

WAIT_S = 10.0
device_module = importlib.import_module("asyncgrad.devices.device")


def _gate_job(gate: threading.Event, box: list, value: object):
    def job():
        assert gate.wait(WAIT_S), "the test never opened the gate"
        box.append(value)
    return job


# ---------------------------------------------------------------- streams and events alone
def test_default_and_current_streams():
    dev = ag.device("sim:0")
    assert ag.current_stream(dev) is ag.default_stream(dev)
    assert ag.current_stream("sim:1") is not ag.current_stream("sim:0")
    s = ag.Stream("sim:0")
    with ag.stream(s):
        assert ag.current_stream("sim:0") is s
        assert ag.current_stream("sim:1") is ag.default_stream("sim:1")  # per device
        seen = []
        t = threading.Thread(target=lambda: seen.append(ag.current_stream("sim:0")))
        t.start()
        t.join()
        assert seen == [ag.default_stream("sim:0")]  # per thread, as CuPy's
    assert ag.current_stream("sim:0") is ag.default_stream("sim:0")
    cpu = ag.current_stream("cpu")
    assert cpu.query() and cpu is ag.default_stream("cpu")
    with pytest.raises(RuntimeError, match="cpu has one stream"):
        ag.Stream("cpu")


def test_work_on_one_stream_runs_in_order():
    s = ag.Stream("sim:0")
    gate, box = threading.Event(), []
    s.launch(_gate_job(gate, box, 1))
    second = s.launch(lambda: list(box))
    assert not s.query()
    gate.set()
    assert second.result(WAIT_S) == [1]
    s.synchronize()
    assert s.query()


def test_launch_runs_with_its_stream_current():
    s = ag.Stream("sim:1")
    assert s.launch(lambda: ag.current_stream("sim:1")).result(WAIT_S) is s


def test_an_event_orders_a_consumer_after_its_producer():
    producer, consumer = ag.Stream("sim:0"), ag.Stream("sim:0")
    gate, box = threading.Event(), []
    producer.launch(_gate_job(gate, box, "produced"))
    event = producer.record_event()
    assert not event.query()
    consumer.wait_event(event)
    seen = consumer.launch(lambda: list(box))
    assert not seen.done()
    gate.set()
    assert seen.result(WAIT_S) == ["produced"]
    assert event.query()


def test_without_the_event_the_consumer_does_not_wait():
    """The ordering above comes from the event: without it the consumer runs first."""
    producer, consumer = ag.Stream("sim:0"), ag.Stream("sim:0")
    gate, box = threading.Event(), []
    producer.launch(_gate_job(gate, box, "produced"))
    try:
        assert consumer.launch(lambda: list(box)).result(WAIT_S) == []
    finally:
        gate.set()
    producer.synchronize()


def test_event_across_devices_and_host_waits():
    producer, consumer = ag.Stream("sim:0"), ag.Stream("sim:1")
    gate, box = threading.Event(), []
    producer.launch(_gate_job(gate, box, 0))
    event = ag.Event("sim:0")
    event.record(producer)
    event.wait(consumer)
    seen = consumer.launch(lambda: list(box))
    threading.Timer(0.05, gate.set).start()
    event.synchronize()  # the host waits for the producer
    assert box == [0] and event.query()
    assert seen.result(WAIT_S) == [0]


def test_wait_stream_and_rerecorded_event():
    a, b = ag.Stream("sim:0"), ag.Stream("sim:0")
    gate, box = threading.Event(), []
    a.launch(_gate_job(gate, box, "a"))
    b.wait_stream(a)
    seen = b.launch(lambda: list(box))
    gate.set()
    assert seen.result(WAIT_S) == ["a"]
    event = ag.Event("sim:0")
    assert event.query()  # never recorded: complete, as torch's
    event.record(a)
    a.synchronize()
    assert event.query()
    with pytest.raises(RuntimeError, match="does not match recording stream's device"):
        event.record(ag.Stream("sim:1"))


# ---------------------------------------------------------------- the engine on streams
def _spy(monkeypatch):
    """Log each stream a node's backward made current, and each wait between two streams."""
    entered, waits = [], []
    real_enter, real_wait = streams_module.enter, streams_module.Stream.wait_event

    def enter(s):
        entered.append((s, threading.get_ident()))
        return real_enter(s)

    def wait_event(self, event):
        waits.append((event.stream, self))
        return real_wait(self, event)

    monkeypatch.setattr(stream_sync, "enter", enter)
    monkeypatch.setattr(streams_module.Stream, "wait_event", wait_event)
    return entered, waits


def _torch_grads(x_np, fn):
    if torch is None:
        pytest.skip("torch is not installed")
    x = torch.tensor(x_np, requires_grad=True)
    fn(x).backward()
    return x.grad.numpy()


@pytest.mark.parametrize("threshold", [10**9, 0], ids=["inline", "kernel-threads"])
async def test_backward_runs_each_node_on_its_forward_stream(monkeypatch, threshold):
    ag.set_inline_threshold("sim:0", threshold)
    x_np = np.linspace(-1.0, 1.0, 6).reshape(2, 3)
    side = ag.Stream("sim:0")
    entered, waits = _spy(monkeypatch)
    x = ag.tensor(x_np, device="sim:0", requires_grad=True)
    with ag.stream(side):
        y = (x * x).exp()          # MulBackward0, ExpBackward0 on the side stream
    z = (y * 2).sum() + x.sin().sum()  # on the default stream
    await z.backward()
    expected = _torch_grads(x_np, lambda t: ((t * t).exp() * 2).sum() + t.sin().sum())
    np.testing.assert_allclose(x.grad.cpu().numpy(), expected, rtol=1e-12)
    default = ag.default_stream("sim:0")
    assert side in {s for s, _ in entered} and default in {s for s, _ in entered}
    # ExpBackward0 (side) consumes MulBackward0's (default) gradient; AccumulateGrad (default)
    # consumes the side stream's MulBackward0: both cross over with an event
    assert (default, side) in waits and (side, default) in waits
    if threshold == 0:  # large kernels: the stream was made current in a kernel thread
        assert any(t != threading.get_ident() for _, t in entered)
    assert ag.current_stream("sim:0") is default  # the loop thread's stream is back


async def test_grad_is_complete_when_backward_returns():
    """A leaf's stream has queued work when the backward starts: ``.grad`` waits for it."""
    side = ag.Stream("sim:0")
    x = ag.tensor(np.ones(4), device="sim:0", requires_grad=True)
    with ag.stream(side):
        y = x * 3
    gate, box = threading.Event(), []
    side.launch(_gate_job(gate, box, "side work"))
    threading.Timer(0.05, gate.set).start()
    await y.sum().backward()
    assert box == ["side work"]  # the node on ``side`` ran after the work queued there
    assert side.query()
    np.testing.assert_array_equal(x.grad.cpu().numpy(), np.full(4, 3.0))


@pytest.mark.parametrize("threshold", [10**9, 0], ids=["inline", "kernel-threads"])
async def test_a_node_runs_after_the_work_queued_on_its_stream(threshold):
    """Work queued on the node's stream before the backward fills an array its formula reads (as a
    GPU kernel still running would): the backward sees the filled values, not the early ones."""
    ag.set_inline_threshold("sim:0", threshold)
    side = ag.Stream("sim:0")
    x = ag.tensor(np.ones(4), device="sim:0", requires_grad=True)
    w = ag.zeros(4, device="sim:0", dtype=ag.float64)
    with ag.stream(side):
        y = x * w
    gate = threading.Event()
    backend = ag.device("sim:0").backend
    side.launch(lambda: (gate.wait(WAIT_S), backend.setitem(w.data, slice(None), 5.0)))
    threading.Timer(0.05, gate.set).start()
    await y.sum().backward()
    np.testing.assert_array_equal(x.grad.cpu().numpy(), np.full(4, 5.0))


async def test_grad_captured_on_a_side_stream():
    side = ag.Stream("sim:1")
    x = ag.tensor(np.arange(3.0), device="sim:1", requires_grad=True)
    with ag.stream(side):
        y = (x ** 2).sum()
    (g,) = await ag.grad(y, x)
    np.testing.assert_array_equal(g.cpu().numpy(), 2 * np.arange(3.0))


async def test_cross_device_backward_sim0_to_sim1(monkeypatch):
    entered, waits = _spy(monkeypatch)
    x_np = np.array([0.5, -1.5, 2.0])
    s0, s1 = ag.Stream("sim:0"), ag.Stream("sim:1")
    x = ag.tensor(x_np, device="sim:0", requires_grad=True)
    with ag.stream(s0):
        h = x.tanh()
    y = h.to("sim:1")
    with ag.stream(s1):
        z = (y * y).sum()
    await z.backward()
    expected = _torch_grads(x_np, lambda t: (t.tanh() ** 2).sum())
    np.testing.assert_allclose(x.grad.cpu().numpy(), expected, rtol=1e-12)
    assert {s for s, _ in entered} >= {s0, s1}
    assert any(src.device is ag.device("sim:1") and dst.device is ag.device("sim:0") for src, dst in waits)


async def test_two_producers_on_two_streams_accumulate_in_order(monkeypatch):
    """One leaf, two branches on two streams: the second producer's stream waits for the first
    producer's before adding into the buffer (Note [Streaming backwards])."""
    entered, waits = _spy(monkeypatch)
    a, b = ag.Stream("sim:0"), ag.Stream("sim:0")
    x = ag.tensor(np.array([1.0, 2.0]), device="sim:0", requires_grad=True)
    u = x * 1.0
    with ag.stream(a):
        p = u.exp()
    with ag.stream(b):
        q = u.cos()
    await (p.sum() + q.sum()).backward()
    np.testing.assert_allclose(x.grad.cpu().numpy(), np.exp([1.0, 2.0]) - np.sin([1.0, 2.0]), rtol=1e-12)
    assert (a, b) in waits or (b, a) in waits


async def test_plain_streams_take_the_chain_step(monkeypatch):
    """Note [Plain streams]: with no node recorded on a side stream, a sim:0 backward runs every node on
    the default stream without entering it (the chain step); once one is, its nodes enter their streams."""
    entered, waits = _spy(monkeypatch)
    x_np = np.linspace(-1.0, 1.0, 5)
    x = ag.tensor(x_np, device="sim:0", requires_grad=True)
    await ((x * 3).tanh().exp() + x.sin()).sum().backward()
    expected = _torch_grads(x_np, lambda t: ((t * 3).tanh().exp() + t.sin()).sum())
    np.testing.assert_allclose(x.grad.cpu().numpy(), expected, rtol=1e-12)
    assert entered == [] and waits == []
    side = ag.Stream("sim:0")
    with ag.stream(side):
        y = (x * 3).tanh()
    await y.exp().sum().backward()
    assert side in {s for s, _ in entered}


async def test_plain_streams_across_devices_wait_for_the_producer(monkeypatch):
    """Default streams only, sim:0 -> sim:1: the gradient crossing back to sim:0 gets its event, and
    the sim:0 node consuming it waits for it, although both workers take the chain step otherwise."""
    entered, waits = _spy(monkeypatch)
    x_np = np.array([0.5, -1.5, 2.0])
    x = ag.tensor(x_np, device="sim:0", requires_grad=True)
    z = (x.tanh().to("sim:1") * 2).exp().sum()
    await z.backward()
    np.testing.assert_allclose(x.grad.cpu().numpy(), _torch_grads(x_np, lambda t: (t.tanh() * 2).exp().sum()),
                               rtol=1e-12)
    assert any(src.device is ag.device("sim:1") and dst.device is ag.device("sim:0") for src, dst in waits)


async def test_cpu_backward_touches_no_stream(monkeypatch):
    entered, waits = _spy(monkeypatch)
    x = ag.tensor(np.ones(3), requires_grad=True)
    await (x * 2).sum().backward()
    assert entered == [] and waits == []


# ---------------------------------------------------------------- cuda errors without a GPU
def _forget_cuda(monkeypatch):
    for key in [k for k in device_module._DEVICES if k.startswith("cuda")]:
        monkeypatch.delitem(device_module._DEVICES, key)


def test_cuda_without_cupy_names_the_extra(monkeypatch):
    _forget_cuda(monkeypatch)
    monkeypatch.setitem(sys.modules, "cupy", None)  # import cupy raises ImportError
    extra = r"install asyncgrad with the 'cuda' extra \(pip install 'asyncgrad\[cuda\]'\)"
    with pytest.raises(RuntimeError, match=extra):
        ag.device("cuda:0")


def _fake_cupy(count):
    """A CuPy whose runtime reports ``count`` GPUs (or no driver): enough for the device check,
    which runs before anything else of CuPy's is touched; nothing computes with it."""
    class CUDARuntimeError(RuntimeError):
        pass

    def get_count():
        if count is None:
            raise CUDARuntimeError("cudaErrorNoDevice: no CUDA-capable device is detected")
        return count

    runtime = types.SimpleNamespace(getDeviceCount=get_count, CUDARuntimeError=CUDARuntimeError)
    cupy = types.ModuleType("cupy")
    cupy.cuda = types.SimpleNamespace(runtime=runtime)
    return cupy


@pytest.mark.parametrize("count, spec, message", [
    (1, "cuda:3", "CUDA error: invalid device ordinal"),
    (2, "cuda:2", "CUDA error: invalid device ordinal"),
    (0, "cuda:0", "No CUDA GPUs are available"),
    (None, "cuda", "No CUDA GPUs are available"),
])
def test_cuda_device_this_machine_lacks(monkeypatch, count, spec, message):
    _forget_cuda(monkeypatch)
    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy(count))
    monkeypatch.setitem(sys.modules, "cupyx", types.ModuleType("cupyx"))
    with pytest.raises(RuntimeError, match=f"^{message}$"):
        ag.device(spec)
    assert spec not in device_module._DEVICES  # nothing half-made is kept


def test_accelerator_tensor_to_numpy_needs_cpu():
    """torch's wording for ``.numpy()`` on an accelerator tensor (sim here; the check is by device type)."""
    x = ag.tensor([1.0, 2.0], device="sim:1")
    wording = r"^can't convert sim:1 device type tensor to numpy\. Use Tensor\.cpu\(\) to copy the tensor to host"
    with pytest.raises(TypeError, match=wording):
        x.numpy()
    np.testing.assert_array_equal(x.cpu().numpy(), [1.0, 2.0])


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs os.fork")
def test_a_forked_child_gets_working_lanes():
    import os

    s = ag.Stream("sim:0")
    gate = threading.Event()
    s.launch(gate.wait, WAIT_S)  # the parent's lane thread is busy at the fork
    pid = os.fork()
    if pid == 0:  # the child: the lane has no thread here; new work must still run
        code = 1
        try:
            code = 0 if s.launch(lambda: 7).result(2.0) == 7 else 1
        finally:
            os._exit(code)  # never back into pytest
    gate.set()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
