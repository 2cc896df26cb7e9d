"""The engine: backward()/grad() semantics, hooks, errors, cancellation, concurrency, devices."""

import asyncio
import gc
import threading
import time

import numpy as np
import pytest

import asyncgrad as ag
from asyncgrad.engine.graph_task import current_graph_task


def numeric_grad(f, arrays, eps=1e-6):
    """Central differences of a scalar numpy function, for each array."""
    grads = []
    for a in arrays:
        g = np.zeros_like(a)
        for idx in np.ndindex(a.shape):
            orig = a[idx]
            a[idx] = orig + eps
            plus = f(*arrays)
            a[idx] = orig - eps
            minus = f(*arrays)
            a[idx] = orig
            g[idx] = (plus - minus) / (2 * eps)
        grads.append(g)
    return grads


def leaves(*arrays):
    return [ag.tensor(a, requires_grad=True) for a in arrays]


# --------------------------------------------------------------------------- the seed examples
async def test_seed_example_gradient():
    x = ag.ones(2, 2, requires_grad=True)
    out = ((x + 2) * (x + 2) * 3).mean()
    await out.backward()
    np.testing.assert_allclose(x.grad.numpy(), np.full((2, 2), 4.5))


def test_backward_sync_in_a_plain_script():
    x = ag.ones(2, 2, requires_grad=True)
    ((x + 2) * (x + 2) * 3).mean().backward_sync()
    np.testing.assert_allclose(x.grad.numpy(), np.full((2, 2), 4.5))
    (g,) = ag.grad_sync((x * x).sum(), x)
    np.testing.assert_allclose(g.numpy(), 2 * np.ones((2, 2)))


async def test_backward_sync_inside_a_running_loop_refuses():
    x = ag.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="cannot be called while an event loop is running.*await"):
        (x * 2).sum().backward_sync()


async def test_seed_engine_py_network_matches_finite_differences(rng):
    """Seed 004: two linear layers, a relu, an add and an index."""
    inp, w1, b1, w2, b2 = (rng.standard_normal(s) for s in [(1, 3), (3, 3), (3,), (3, 3), (3,)])

    def net_numpy(inp, w1, b1, w2, b2):
        x = inp @ w1.T + b1
        return (np.maximum(x, 0) + (x @ w2.T + b2))[0].sum()

    tensors = leaves(inp, w1, b1, w2, b2)
    ti, tw1, tb1, tw2, tb2 = tensors
    x = ag.nn.functional.linear(ti, tw1, tb1) if hasattr(ag, "nn") else ti @ tw1.T + tb1
    out = (x.relu() + (x @ tw2.T + tb2))[0].sum()
    await out.backward()
    for t, g in zip(tensors, numeric_grad(net_numpy, [inp, w1, b1, w2, b2])):
        np.testing.assert_allclose(t.grad.numpy(), g, rtol=1e-6, atol=1e-8)


# --------------------------------------------------------------------------- random DAGs
def random_dag(rng, n_leaves=3, n_nodes=25, n_roots=2):
    """A random program over broadcastable shapes; returns a function of (namespace, leaves)."""
    shapes = [(3, 4), (4,), (1, 4)]
    program = []
    count = n_leaves
    for _ in range(n_nodes):
        op = rng.choice(["add", "mul", "tanh", "sin", "sub", "exp_small", "sum_keep"])
        a, b = rng.integers(0, count, size=2)
        program.append((op, int(a), int(b)))
        count += 1
    roots = rng.choice(np.arange(n_leaves, count), size=n_roots, replace=False)

    def run(ns, values):
        vals = list(values)
        for op, a, b in program:
            x, y = vals[a], vals[b]
            if op == "add":
                vals.append(x + y)
            elif op == "mul":
                vals.append(x * y)
            elif op == "sub":
                vals.append(x - y)
            elif op == "tanh":
                vals.append(ns.tanh(x))
            elif op == "sin":
                vals.append(ns.sin(x))
            elif op == "exp_small":
                vals.append(ns.exp(x * 0.1))
            else:
                vals.append(ns.sum_keep(x) * 0.25)
        return [vals[int(r)] for r in roots]

    return shapes, run


class _NumpyNS:
    tanh, sin, exp = np.tanh, np.sin, np.exp

    @staticmethod
    def sum_keep(x):
        return x.sum(axis=-1, keepdims=True)


class _AgNS:
    tanh, sin, exp = ag.tanh, ag.sin, ag.exp

    @staticmethod
    def sum_keep(x):
        return x.sum(-1, keepdim=True)


@pytest.mark.parametrize("seed", range(6))
async def test_random_dags_match_finite_differences(seed):
    rng = np.random.default_rng(seed)
    shapes, run = random_dag(rng)
    arrays = [rng.standard_normal(s) for s in shapes]
    weights = [rng.standard_normal((3, 4)) for _ in range(2)]

    def loss_numpy(*arrs):
        return sum((np.broadcast_to(r, (3, 4)) * w).sum() for r, w in zip(run(_NumpyNS, arrs), weights))

    tensors = leaves(*arrays)
    roots = run(_AgNS, tensors)
    grads = [ag.tensor(np.broadcast_to(w, (3, 4)).copy()) for w in weights]
    roots = [r.expand(3, 4) if r.shape != (3, 4) else r for r in roots]
    await ag.backward(roots, grads)
    for t, g in zip(tensors, numeric_grad(loss_numpy, arrays)):
        got = t.grad.numpy() if t.grad is not None else np.zeros_like(g)
        np.testing.assert_allclose(got, g, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("seed", range(4))
async def test_random_dags_match_torch(seed, torch):
    rng = np.random.default_rng(100 + seed)
    shapes, run = random_dag(rng, n_nodes=40)
    arrays = [rng.standard_normal(s) for s in shapes]

    class TorchNS:
        tanh, sin, exp = torch.tanh, torch.sin, torch.exp

        @staticmethod
        def sum_keep(x):
            return x.sum(-1, keepdim=True)

    tt = [torch.tensor(a, requires_grad=True) for a in arrays]
    torch.autograd.backward([r.sum() for r in run(TorchNS, tt)])
    at = leaves(*arrays)
    await ag.backward([r.sum() for r in run(_AgNS, at)])
    for a, t in zip(at, tt):
        if t.grad is None:
            assert a.grad is None
        else:
            np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), rtol=1e-10, atol=1e-12)


# --------------------------------------------------------------------------- grad() and backward() options
async def test_grad_returns_without_touching_dot_grad():
    x = ag.tensor([1.0, 2.0], requires_grad=True)
    (g,) = await ag.grad((x ** 3).sum(), x)
    np.testing.assert_allclose(g.numpy(), 3 * np.array([1.0, 4.0]))
    assert x.grad is None


async def test_grad_allow_unused_and_materialize():
    x, y = ag.randn(2, requires_grad=True), ag.randn(2, requires_grad=True)
    out = (x * 2).sum()
    with pytest.raises(RuntimeError, match="The differentiated Tensor at index 1 appears to not have been used in "
                                           "the graph. Set allow_unused=True if this is the desired behavior."):
        await ag.grad(out, [x, y], retain_graph=True)
    gx, gy = await ag.grad(out, [x, y], allow_unused=True, retain_graph=True)
    assert gy is None and np.allclose(gx.numpy(), 2)
    gx, gy = await ag.grad(out, [x, y], materialize_grads=True)
    np.testing.assert_array_equal(gy.numpy(), np.zeros(2))
    with pytest.raises(ValueError, match="Expected allow_unused to be True"):
        await ag.grad(out, [x, y], materialize_grads=True, allow_unused=False)


async def test_grad_with_respect_to_non_leaf_and_pruning():
    x = ag.randn(3, requires_grad=True)
    h = x.exp()
    out = (h * h).sum()
    (gh,) = await ag.grad(out, h, retain_graph=True)
    np.testing.assert_allclose(gh.numpy(), 2 * h.detach().numpy(), rtol=1e-6)
    (gx,) = await ag.grad(out, x)
    np.testing.assert_allclose(gx.numpy(), 2 * np.exp(2 * x.detach().numpy()), rtol=1e-5)


async def test_create_graph_gives_higher_order_gradients():
    x = ag.tensor([0.5, 1.5], dtype=ag.float64, requires_grad=True)
    y = (x ** 4).sum()
    (g1,) = await ag.grad(y, x, create_graph=True)
    (g2,) = await ag.grad(g1.sum(), x, create_graph=True)
    (g3,) = await ag.grad(g2.sum(), x)
    xv = x.detach().numpy()
    np.testing.assert_allclose(g1.detach().numpy(), 4 * xv ** 3)
    np.testing.assert_allclose(g2.detach().numpy(), 12 * xv ** 2)
    np.testing.assert_allclose(g3.numpy(), 24 * xv)


async def test_backward_create_graph_records_grad():
    x = ag.tensor([2.0], dtype=ag.float64, requires_grad=True)
    await (x ** 3).sum().backward(create_graph=True)
    assert x.grad.grad_fn is not None
    (gg,) = await ag.grad(x.grad.sum(), x)
    np.testing.assert_allclose(gg.numpy(), [12.0])


async def test_backward_inputs_only_accumulates_those():
    x, y = ag.randn(2, requires_grad=True), ag.randn(2, requires_grad=True)
    h = x * y
    await (h * 3).sum().backward(inputs=[x, h])
    assert y.grad is None
    np.testing.assert_allclose(x.grad.numpy(), 3 * y.detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(h.grad.numpy(), [3, 3])
    with pytest.raises(RuntimeError, match="`inputs` argument to `backward\\(\\)` cannot be empty."):
        await (x * 2).sum().backward(inputs=[])


async def test_backward_error_texts():
    x = ag.randn(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="element 0 of tensors does not require grad and does not have a grad_fn"):
        await ag.randn(3).sum().backward()
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar outputs"):
        await (x * 2).backward()
    with pytest.raises(RuntimeError, match="Mismatch in shape: grad_output\\[0\\]"):
        await (x * 2).backward(ag.ones(2))


async def test_gradient_argument_and_multiple_roots():
    x = ag.tensor([1.0, 2.0], requires_grad=True)
    a, b = x * 2, x * x
    await ag.backward([a, b], [ag.tensor([1.0, 1.0]), ag.tensor([0.5, 0.5])])
    np.testing.assert_allclose(x.grad.numpy(), [2 + 1.0, 2 + 2.0])


async def test_retain_grad_on_non_leaf():
    x = ag.randn(3, requires_grad=True)
    h = x * 2
    h.retain_grad()
    await (h * h).sum().backward()
    np.testing.assert_allclose(h.grad.numpy(), 2 * h.detach().numpy(), rtol=1e-6)
    with pytest.warns(UserWarning, match="is not a leaf Tensor is being accessed"):
        assert (x * 3).grad is None


# --------------------------------------------------------------------------- hooks
async def test_tensor_hooks_on_leaf_and_non_leaf():
    x = ag.tensor([1.0, 2.0], requires_grad=True)
    seen = []
    x.register_hook(lambda g: seen.append(("leaf", g.tolist())))
    h = x * 3
    handle = h.register_hook(lambda g: g * 10)
    await h.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [30, 30])
    assert seen == [("leaf", [30.0, 30.0])]
    handle.remove()
    x.grad = None
    await (x * 3).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [3, 3])


async def test_node_pre_and_post_hooks():
    x = ag.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    calls = []
    y.grad_fn.register_prehook(lambda go: (go[0] * 2,))

    def post(grad_inputs, grad_outputs):
        calls.append((grad_inputs[0].tolist(), grad_outputs[0].tolist()))

    y.grad_fn.register_hook(post)
    await y.sum().backward()
    assert calls == [([4.0, 4.0], [2.0, 2.0])]
    np.testing.assert_allclose(x.grad.numpy(), [4, 4])


async def test_post_accumulate_grad_hook():
    x = ag.tensor([1.0, 2.0], requires_grad=True)
    seen = []
    x.register_post_accumulate_grad_hook(lambda t: seen.append(t.grad.tolist()))
    await (x * 2).sum().backward()
    assert seen == [[2.0, 2.0]]
    with pytest.raises(RuntimeError, match="post accumulate grad hooks cannot be registered on non-leaf tensors"):
        (x * 2).register_post_accumulate_grad_hook(lambda t: None)


async def test_hooks_see_tensors_under_create_graph():
    x = ag.tensor([1.0], dtype=ag.float64, requires_grad=True)
    y = x ** 2
    y.register_hook(lambda g: g * x)
    (g,) = await ag.grad(y.sum(), x, create_graph=True)
    (gg,) = await ag.grad(g.sum(), x)
    np.testing.assert_allclose(g.detach().numpy(), [2.0])
    np.testing.assert_allclose(gg.numpy(), [4.0])


async def test_queue_callback_runs_after_all_nodes():
    x = ag.randn(2, requires_grad=True)
    order = []

    def hook(g):
        ag.get_engine().queue_callback(lambda: order.append(("callback", x.grad is not None)))
        order.append("hook")

    y = x * 2
    y.register_hook(hook)
    await y.sum().backward()
    assert order == ["hook", ("callback", True)]
    with pytest.raises(RuntimeError, match="Final callbacks can only be installed during backward pass."):
        ag.get_engine().queue_callback(lambda: None)


# --------------------------------------------------------------------------- anomaly mode
@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")
async def test_anomaly_mode_detects_nan_and_names_the_forward():
    x = ag.zeros(2, requires_grad=True)
    with ag.detect_anomaly():
        y = (x * 0).sqrt() * 0
        with pytest.raises(RuntimeError, match="Function 'SqrtBackward0' returned nan values in its 0th output.") as e:
            await y.sum().backward()
    notes = "\n".join(getattr(e.value, "__notes__", []))
    assert "Traceback of forward call" in notes and "test_engine.py" in notes


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
async def test_without_anomaly_nan_passes_silently():
    x = ag.zeros(2, requires_grad=True)
    await (x - x).sqrt().sum().backward()
    assert np.isnan(x.grad.numpy()).all()


# --------------------------------------------------------------------------- errors and cancellation
class Boom(ValueError):
    pass


async def test_error_in_a_node_reaches_caller_with_type_and_note():
    x = ag.randn(3, requires_grad=True)
    y = x * 2

    def bad(_):
        raise Boom("no")

    y.register_hook(bad)
    with pytest.raises(Boom) as info:
        await (y * 3).sum().backward()
    assert any("MulBackward0" in note for note in info.value.__notes__)
    x.grad = None
    await (x * 5).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [5, 5, 5])


async def test_first_error_wins_and_rest_is_skipped():
    x = ag.randn(3, requires_grad=True)
    a, b = x * 2, x * 3

    def first(_):
        raise Boom("first")

    def second(_):
        raise KeyError("second")

    b.register_hook(first)
    a.register_hook(second)
    with pytest.raises(Boom):
        await (a + b).sum().backward()
    assert x.grad is None


class Sleepy(ag.Function):
    cancelled = []

    @staticmethod
    def forward(ctx, x):
        return x * 1

    @staticmethod
    async def backward(ctx, g):
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            Sleepy.cancelled.append(True)
            raise
        return g


async def test_cancelling_the_caller_cancels_the_graph_task():
    Sleepy.cancelled.clear()
    x = ag.randn(3, requires_grad=True)
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(Sleepy.apply(x).sum().backward(), 0.05)
    await asyncio.sleep(0)
    assert Sleepy.cancelled == [True]
    assert x.grad is None
    await (x * 2).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [2, 2, 2])


async def test_suspended_async_node_does_not_hold_its_worker():
    x = ag.randn(3, requires_grad=True)
    slow = asyncio.create_task(Sleepy.apply(x).sum().backward())
    await asyncio.sleep(0.01)
    y = ag.randn(3, requires_grad=True)
    await asyncio.wait_for((y * 4).sum().backward(), 1.0)
    np.testing.assert_allclose(y.grad.numpy(), [4, 4, 4])
    slow.cancel()
    with pytest.raises(asyncio.CancelledError):
        await slow


# --------------------------------------------------------------------------- concurrency
async def test_hundred_concurrent_backwards_sum_exactly():
    x = ag.tensor(np.arange(4.0), dtype=ag.float64, requires_grad=True)
    losses = [((x * float(k)).tanh() * 0 + x * float(k)).sum() for k in range(100)]
    await asyncio.gather(*(loss.backward() for loss in losses))
    np.testing.assert_allclose(x.grad.numpy(), np.full(4, sum(range(100))))


async def test_concurrent_backwards_sharing_large_leaves_in_executor():
    ag.set_inline_threshold("cpu", 0)
    x = ag.tensor(np.ones((64, 64)), requires_grad=True)
    await asyncio.gather(*((x * float(k)).sum().backward() for k in range(1, 21)))
    np.testing.assert_allclose(x.grad.numpy(), np.full((64, 64), 210.0))


# --------------------------------------------------------------------------- devices and workers
async def test_nodes_run_on_their_devices_workers_and_accumulate_across_devices():
    x = ag.tensor(np.linspace(-1, 1, 4), requires_grad=True)
    with ag.profiler.trace() as prof:
        a = (x * 2).to("sim:0")
        b = a.tanh().to("sim:1")
        c = (b * b).to("cpu")
        d = (c + x).sum() + (x.to("sim:1") * 3).sum().to("cpu")
        await d.backward()
    xv = x.detach().numpy()
    expected = 2 * np.tanh(2 * xv) * (1 - np.tanh(2 * xv) ** 2) * 2 + 1 + 3
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-6)
    where = {(e.name, e.device) for e in prof.events}
    assert ("TanhBackward0", "sim:0") in where
    assert ("MulBackward0", "sim:1") in where
    assert ("AccumulateGrad", "cpu") in where
    for e in prof.events:
        assert e.worker.startswith(e.device)


async def test_large_kernels_run_in_the_executor_and_overlap():
    ag.set_inline_threshold("cpu", 10_000)
    ag.set_num_workers("cpu", 2)
    w = ag.randn(300, 300, dtype=ag.float64, requires_grad=True)
    branches = [(w @ w).tanh().sum() for _ in range(4)]
    with ag.profiler.trace() as prof:
        await ag.backward(branches)
    off_loop = [e for e in prof.events if not e.inline]
    assert {e.name for e in off_loop} == {"MmBackward0", "TanhBackward0"}
    assert sum(e.name == "MmBackward0" for e in off_loop) == 4
    assert all(e.inline for e in prof.events if e.name == "AccumulateGrad")

    # That independent kernels are in flight at the same time, proven without timing (which the
    # OS scheduler decides on a loaded runner): two kernels that can only finish together.
    meet = threading.Barrier(2, timeout=20)

    class Meet(ag.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):  # plain def, in a kernel thread (inline threshold 0)
            meet.wait()  # BrokenBarrierError unless the other kernel runs meanwhile
            return g

    ag.set_inline_threshold("cpu", 0)
    x = ag.ones(3, requires_grad=True)
    await ag.backward([Meet.apply(x).sum(), Meet.apply(x).sum()])
    assert x.grad.tolist() == [2.0] * 3


async def test_chain_of_100k_nodes_runs_backward():
    x = ag.tensor([1.0], dtype=ag.float64, requires_grad=True)
    y = x
    for _ in range(100_000):
        y = y * 1.0
    await y.sum().backward()
    assert x.grad.item() == 1.0
    del y
    gc.collect()


def test_engine_state_is_per_loop_and_leaves_nothing_behind():
    before = threading.active_count()

    async def once():
        ag.set_inline_threshold("cpu", 0)
        x = ag.randn(8, requires_grad=True)
        await (x * 2).sum().backward()
        engine = ag.get_engine()
        assert current_graph_task.get() is None
        return id(engine), x.grad.tolist()

    first = asyncio.run(once())
    second = asyncio.run(once())
    assert first[1] == second[1] == [2.0] * 8
    gc.collect()
    deadline = time.monotonic() + 5
    while threading.active_count() > before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert threading.active_count() <= before, [t.name for t in threading.enumerate()]


async def test_no_pending_worker_tasks_after_backward():
    x = ag.randn(3, requires_grad=True)
    await (x * 2).sum().backward()
    await asyncio.sleep(0)
    names = [t.get_name() for t in asyncio.all_tasks() if not t.done()]
    assert not any(n.startswith("asyncgrad worker") for n in names)


# --------------------------------------------------------------------------- anyio
async def test_anyio_task_group_cancel_scope_and_to_thread():
    anyio = pytest.importorskip("anyio")
    x = ag.tensor([1.0, 2.0], requires_grad=True)
    async with anyio.create_task_group() as tg:
        for k in range(1, 4):
            tg.start_soon((x * float(k)).sum().backward)
    np.testing.assert_allclose(x.grad.numpy(), [6, 6])

    Sleepy.cancelled.clear()
    with pytest.raises(TimeoutError):
        with anyio.fail_after(0.05):
            await Sleepy.apply(x).sum().backward()
    await asyncio.sleep(0)
    assert Sleepy.cancelled == [True]

    y = ag.tensor([1.0, 2.0], requires_grad=True)
    loss = (y * 7).sum()
    await anyio.to_thread.run_sync(loss.backward_sync)
    np.testing.assert_allclose(y.grad.numpy(), [7, 7])
