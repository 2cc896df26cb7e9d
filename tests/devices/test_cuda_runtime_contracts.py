"""What cuda:N promises and only a GPU can show: streams and devices current in kernel threads,
events without timing, ``.grad`` complete after a backward on a side stream, forward ops on the
device of their inputs, numpy index arrays on CuPy arrays, ``to_host`` ordered after the work that
wrote the array, and creation functions' ``device=``. Runs only where CuPy sees a GPU."""

import threading

import numpy as np
import pytest

import asyncgrad as ag

cupy = pytest.importorskip("cupy", reason="CuPy is not installed: cuda devices are tested on a GPU machine only")
try:
    HAVE_GPU = cupy.cuda.runtime.getDeviceCount() > 0
except Exception:  # noqa: BLE001 - any CUDA runtime failure means no usable GPU
    HAVE_GPU = False
pytestmark = pytest.mark.skipif(not HAVE_GPU, reason="no CUDA GPU visible to CuPy")


class _Probe(ag.autograd.Function):
    """Identity whose backward records the thread, CuPy's current stream and current device it ran with."""

    seen: list = []

    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        _Probe.seen.append((threading.get_ident(), cupy.cuda.get_current_stream().ptr, cupy.cuda.runtime.getDevice()))
        return g * 1.0


async def test_a_kernel_thread_runs_with_the_forward_stream_and_device_current(monkeypatch):
    monkeypatch.setattr(ag.device("cuda:0"), "inline_threshold", 0)  # every kernel in a kernel thread
    side = ag.Stream("cuda:0")
    _Probe.seen.clear()
    x = ag.tensor(np.arange(4096.0).reshape(64, 64), device="cuda:0", requires_grad=True)
    with ag.stream(side):
        y = _Probe.apply(x * 2.0)
    await y.sum().backward()
    assert _Probe.seen, "the custom backward did not run"
    thread, stream_ptr, device = _Probe.seen[0]
    assert thread != threading.get_ident(), "expected the kernel in a kernel thread"
    assert stream_ptr == side._native.ptr
    assert device == 0
    np.testing.assert_allclose(x.grad.cpu().numpy(), np.full((64, 64), 2.0))


def test_an_event_without_timing_records_waits_and_completes():
    ev = ag.Event("cuda:0")
    assert ev.query(), "an event never recorded counts as complete"
    s = ag.Stream("cuda:0")
    with cupy.cuda.Device(0), s._native:
        a = cupy.random.rand(1024, 1024)
        for _ in range(10):
            a = a @ a / 1024.0
    ev.record(s)
    other = ag.Stream("cuda:0")
    ev.wait(other)
    ev.synchronize()
    assert ev.query() and ev.stream == s
    with pytest.raises(Exception):  # noqa: B017 - timing is disabled: CuPy refuses elapsed time
        cupy.cuda.get_elapsed_time(ev._native, ev._native)


async def test_grad_is_complete_after_a_backward_on_a_side_stream():
    rng = np.random.default_rng(0)
    x_np = rng.standard_normal((1024, 1024)) / 32.0
    side = ag.Stream("cuda:0")
    x = ag.tensor(x_np, device="cuda:0", requires_grad=True)
    with ag.stream(side):
        y = x
        for _ in range(8):  # long enough that an unordered read would see a partial result
            y = (y @ x).tanh()
    await y.sum().backward()
    got = cupy.asnumpy(x.grad.data)  # read on the loop thread's current (default) stream, no explicit sync
    xc = ag.tensor(x_np, requires_grad=True)
    yc = xc
    for _ in range(8):
        yc = (yc @ xc).tanh()
    await yc.sum().backward()
    np.testing.assert_allclose(got, xc.grad.numpy(), rtol=1e-9, atol=1e-12)


def test_forward_ops_compute_on_the_inputs_gpu():
    x = ag.tensor([1.0, 2.0, 3.0], device="cuda:0")
    for y in (x + 1, x * x, x.exp(), x @ x, x.sum(), x[1:], x.reshape(3, 1) * x):
        assert y.device == ag.device("cuda:0")
        assert isinstance(y.data, cupy.ndarray) and y.data.device.id == 0


async def test_numpy_index_arrays_in_getitem_setitem_and_scatter_add():
    base = np.arange(12.0).reshape(4, 3)
    idx = np.array([2, 0, 2])
    x = ag.tensor(base, device="cuda:0", requires_grad=True)
    y = x[idx]
    np.testing.assert_array_equal(y.detach().cpu().numpy(), base[idx])
    await y.sum().backward()
    expected = np.zeros_like(base)
    np.add.at(expected, idx, 1.0)
    np.testing.assert_array_equal(x.grad.cpu().numpy(), expected)

    z = ag.zeros(4, 3, device="cuda:0")
    z[np.array([1, 3])] = ag.tensor([5.0, 6.0, 7.0], device="cuda:0")
    np.testing.assert_array_equal(z.cpu().numpy()[[1, 3]], [[5.0, 6.0, 7.0]] * 2)
    z[np.array([True, False, False, False])] = 9.0
    assert z.cpu().numpy()[0].tolist() == [9.0, 9.0, 9.0]

    src = ag.ones(2, 3, device="cuda:0", requires_grad=True)
    index = ag.tensor(np.array([[0, 1, 2], [0, 1, 0]]), device="cuda:0")
    out = ag.zeros(3, 3, device="cuda:0").scatter_add(0, index, src)
    want = np.zeros((3, 3))
    np.add.at(want, (np.array([[0, 1, 2], [0, 1, 0]]), np.array([[0, 1, 2], [0, 1, 2]])), 1.0)
    np.testing.assert_array_equal(out.detach().cpu().numpy(), want)
    await (out * 2).sum().backward()
    np.testing.assert_array_equal(src.grad.cpu().numpy(), np.full((2, 3), 2.0))


def test_to_host_waits_for_the_work_that_wrote_the_array():
    side = ag.Stream("cuda:0")
    rng = np.random.default_rng(1)
    a_np = rng.standard_normal((2048, 2048)) / 45.0
    a = ag.tensor(a_np, device="cuda:0")
    with ag.stream(side):
        b = a
        for _ in range(6):
            b = b @ a
    host = b.cpu().numpy()  # no synchronize: to_host must order itself after the side stream's work
    want = a_np
    for _ in range(6):
        want = want @ a_np
    np.testing.assert_allclose(host, want, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize(
    "make",
    [
        lambda d: ag.zeros(2, 3, device=d),
        lambda d: ag.ones(2, 3, device=d),
        lambda d: ag.empty(2, 3, device=d),
        lambda d: ag.full((2, 3), 4.0, device=d),
        lambda d: ag.eye(3, device=d),
        lambda d: ag.arange(6, device=d),
        lambda d: ag.linspace(0, 1, 5, device=d),
        lambda d: ag.rand(2, 3, device=d),
        lambda d: ag.randn(2, 3, device=d),
        lambda d: ag.randint(0, 5, (2, 3), device=d),
        lambda d: ag.tensor([1.0, 2.0], device=d),
        lambda d: ag.zeros_like(ag.ones(2), device=d),
    ],
    ids=["zeros", "ones", "empty", "full", "eye", "arange", "linspace", "rand", "randn", "randint", "tensor", "like"],
)
def test_creation_functions_place_their_result_on_the_device(make):
    t = make("cuda:0")
    assert t.device == ag.device("cuda:0")
    assert isinstance(t.data, cupy.ndarray) and t.data.device.id == 0
