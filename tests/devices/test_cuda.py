"""cuda:N on CuPy: runs only where CuPy and a GPU are present."""

import numpy as np
import pytest

import asyncgrad as ag

cupy = pytest.importorskip("cupy", reason="CuPy is not installed: cuda devices are tested on a GPU machine only")
try:
    HAVE_GPU = cupy.cuda.runtime.getDeviceCount() > 0
except Exception:  # noqa: BLE001 - any CUDA runtime failure means no usable GPU
    HAVE_GPU = False
pytestmark = pytest.mark.skipif(not HAVE_GPU, reason="no CUDA GPU visible to CuPy")


async def test_gradients_on_cuda_match_cpu():
    x_np = np.linspace(-1, 1, 6).reshape(2, 3)
    x = ag.tensor(x_np, requires_grad=True)
    y = (x.cuda().tanh() * 3).sum()
    await y.backward()
    np.testing.assert_allclose(x.grad.numpy(), 3 * (1 - np.tanh(x_np) ** 2), rtol=1e-10)


# ---- streams: Note [Streams per device], Note [Streaming backwards] (run by a GPU session)
def test_current_stream_is_cupys():
    s = ag.Stream("cuda:0")
    assert ag.current_stream("cuda:0") == ag.default_stream("cuda:0")
    with ag.stream(s):
        assert cupy.cuda.get_current_stream() == s._native
        assert ag.current_stream("cuda:0") == s
    assert ag.current_stream("cuda:0") == ag.default_stream("cuda:0")


def test_event_orders_a_consumer_stream_after_a_producer_stream():
    producer, consumer = ag.Stream("cuda:0"), ag.Stream("cuda:0")
    with cupy.cuda.Device(0):
        a = cupy.random.rand(2048, 2048)
        out = cupy.zeros_like(a)
        with producer._native:
            for _ in range(20):  # long enough that the consumer would overtake it unordered
                a = a @ a / 2048.0
            out[...] = a
        event = producer.record_event()
        consumer.wait_event(event)
        with consumer._native:
            seen = out.copy()
        consumer.synchronize()
        assert event.query() and producer.query()
        np.testing.assert_array_equal(seen.get(), a.get())


async def test_backward_on_a_side_stream_matches_cpu(monkeypatch):
    from asyncgrad.engine import stream_sync

    entered = []
    real_enter = stream_sync.enter
    monkeypatch.setattr(stream_sync, "enter", lambda s: entered.append(s) or real_enter(s))
    monkeypatch.setattr(ag.device("cuda:0"), "inline_threshold", 0)  # every kernel in a kernel thread
    x_np = np.random.default_rng(0).standard_normal((256, 256))
    side = ag.Stream("cuda:0")
    x = ag.tensor(x_np, device="cuda:0", requires_grad=True)
    with ag.stream(side):
        y = (x @ x).tanh()
    z = (y * 2).sum() + x.sin().sum()
    await z.backward()
    xc = ag.tensor(x_np, requires_grad=True)
    await (((xc @ xc).tanh() * 2).sum() + xc.sin().sum()).backward()
    np.testing.assert_allclose(x.grad.cpu().numpy(), xc.grad.numpy(), rtol=1e-10, atol=1e-12)
    assert side in entered and ag.default_stream("cuda:0") in entered


@pytest.mark.skipif(not HAVE_GPU or cupy.cuda.runtime.getDeviceCount() < 2, reason="needs 2 GPUs")
async def test_cuda1_kernels_run_with_device_1_current(monkeypatch):
    from asyncgrad.engine import stream_sync

    devices = []
    real_on_stream = stream_sync.on_stream

    def on_stream(s, kernel, *args):
        return real_on_stream(s, lambda *a: (devices.append(cupy.cuda.runtime.getDevice()), kernel(*a))[1], *args)

    monkeypatch.setattr(stream_sync, "on_stream", on_stream)
    monkeypatch.setattr(ag.device("cuda:1"), "inline_threshold", 0)
    x_np = np.linspace(-1, 1, 64).reshape(8, 8)
    x = ag.tensor(x_np, device="cuda:1", requires_grad=True)
    with ag.stream(ag.current_stream("cuda:1")):  # forward ops compute on CuPy's current device: make it 1
        y = (x @ x).exp().sum()
    await y.backward()
    assert devices and set(devices) == {1}
    assert x.grad.data.device.id == 1
    xc = ag.tensor(x_np, requires_grad=True)
    await (xc @ xc).exp().sum().backward()
    np.testing.assert_allclose(x.grad.cpu().numpy(), xc.grad.numpy(), rtol=1e-10)


def test_a_device_past_the_last_gpu_is_refused():
    count = cupy.cuda.runtime.getDeviceCount()
    with pytest.raises(RuntimeError, match="^CUDA error: invalid device ordinal$"):
        ag.device(f"cuda:{count}")


def test_cuda_tensor_to_numpy_needs_cpu():
    x = ag.tensor([1.0, 2.0], device="cuda:0")
    with pytest.raises(TypeError, match=r"^can't convert cuda:0 device type tensor to numpy\. Use Tensor\.cpu\(\)"):
        x.numpy()
    np.testing.assert_array_equal(x.cpu().numpy(), [1.0, 2.0])
