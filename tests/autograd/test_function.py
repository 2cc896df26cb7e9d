"""Custom Functions, reentrant backward, checkpointing."""

import asyncio
import gc
import tracemalloc

import numpy as np
import pytest

import asyncgrad as ag
from asyncgrad.engine.graph_task import current_graph_task


class Cube(ag.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    async def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * 3 * x ** 2


class CubePlain(ag.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * 3 * x ** 2


@pytest.mark.parametrize("fn", [Cube, CubePlain])
async def test_custom_function_first_and_second_order(fn):
    x = ag.tensor([1.0, 2.0, -1.5], dtype=ag.float64, requires_grad=True)
    y = fn.apply(x)
    assert y.grad_fn.name() == f"{fn.__name__}Backward"
    (g,) = await ag.grad(y.sum(), x, create_graph=True)
    (gg,) = await ag.grad(g.sum(), x)
    xv = x.detach().numpy()
    np.testing.assert_allclose(g.detach().numpy(), 3 * xv ** 2)
    np.testing.assert_allclose(gg.numpy(), 6 * xv)
    assert await ag.gradcheck(fn.apply, (x,))
    assert await ag.gradgradcheck(fn.apply, (x,))


class MulAdd(ag.Function):
    """Several inputs and outputs, a non-tensor argument, a non-differentiable output."""

    @staticmethod
    def forward(ctx, a, b, scale):
        ctx.scale = scale
        ctx.save_for_backward(a, b)
        index = (a > 0).long()
        ctx.mark_non_differentiable(index)
        return a * b * scale, a + b, index

    @staticmethod
    def backward(ctx, g_prod, g_sum, g_index):
        a, b = ctx.saved_tensors
        assert ctx.needs_input_grad == (True, False, False)
        assert g_index is None or float(g_index.abs().sum()) == 0
        return g_prod * b * ctx.scale + g_sum, None, None


async def test_multiple_outputs_needs_input_grad_non_differentiable():
    a = ag.tensor([1.0, -2.0], dtype=ag.float64, requires_grad=True)
    b = ag.tensor([3.0, 4.0], dtype=ag.float64)
    prod, total, index = MulAdd.apply(a, b, 2.0)
    assert not index.requires_grad and prod.output_nr == 0 and total.output_nr == 1
    await (prod.sum() + total.sum()).backward()
    np.testing.assert_allclose(a.grad.numpy(), b.numpy() * 2 + 1)


class NoMaterialize(ag.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.set_materialize_grads(False)
        return x * 2, x * 3

    @staticmethod
    def backward(ctx, g1, g2):
        assert g2 is None
        return g1 * 2


async def test_set_materialize_grads_false_passes_none():
    x = ag.tensor([1.0], requires_grad=True)
    first, _ = NoMaterialize.apply(x)
    await first.sum().backward()
    assert x.grad.item() == 2.0


class InplaceDouble(ag.Function):
    @staticmethod
    def forward(ctx, x):
        x.data *= 2
        ctx.mark_dirty(x)
        return x

    @staticmethod
    def backward(ctx, g):
        return g * 2


async def test_mark_dirty_in_place_custom_op():
    leaf = ag.tensor([1.0, 2.0], requires_grad=True)
    x = leaf * 1
    y = InplaceDouble.apply(x)
    assert y is x and x._version == 1 and x.grad_fn.name() == "InplaceDoubleBackward"
    await y.sum().backward()
    np.testing.assert_allclose(leaf.grad.numpy(), [2, 2])
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad has been used in an in-place operation"):
        InplaceDouble.apply(ag.tensor([1.0], requires_grad=True))


class WrongCount(ag.Function):
    @staticmethod
    def forward(ctx, x, y):
        return x + y

    @staticmethod
    def backward(ctx, g):
        return g


class WrongShape(ag.Function):
    @staticmethod
    def forward(ctx, x):
        return x.sum()

    @staticmethod
    def backward(ctx, g):
        return ag.ones(5)


async def test_wrong_gradient_count_and_shape_get_torchs_errors():
    x = ag.randn(3, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"function WrongCountBackward returned an incorrect number of gradients "
                                           r"\(expected 2, got 1\)"):
        await WrongCount.apply(x, x).sum().backward()
    with pytest.raises(RuntimeError, match=r"Function WrongShapeBackward returned an invalid gradient at index 0 - "
                                           r"got \[5\] but expected shape compatible with \[3\]"):
        await WrongShape.apply(x).backward()


class Twice(ag.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    @ag.once_differentiable
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 2 * x


async def test_once_differentiable_refuses_double_backward():
    x = ag.tensor([3.0], requires_grad=True)
    (g,) = await ag.grad((Twice.apply(x) * x).sum(), x, create_graph=True)
    assert g.item() == 27.0
    with pytest.raises(RuntimeError, match="trying to differentiate twice a function that was marked with "
                                           "@once_differentiable"):
        await g.sum().backward()


async def test_custom_function_with_hooks_anomaly_and_devices():
    x = ag.tensor([1.0, 2.0], dtype=ag.float64, requires_grad=True)
    with ag.detect_anomaly():
        y = Cube.apply(x.to("sim:0"))
        y.register_hook(lambda g: g * 2)
        await y.to("cpu").sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * 3 * x.detach().numpy() ** 2)
    assert "test_function.py" in y.grad_fn.metadata["traceback_"]


# --------------------------------------------------------------------------- reentrant backward
class Nested(ag.Function):
    """Backward runs a nested backward of a fresh graph holding the same function, one level down."""

    depths = []

    @staticmethod
    def forward(ctx, x, depth):
        ctx.depth = depth
        return x * 2

    @staticmethod
    async def backward(ctx, g):
        Nested.depths.append(current_graph_task.get().reentrant_depth)
        if ctx.depth > 0:
            inner = ag.ones(1, requires_grad=True)
            with ag.enable_grad():
                loss = Nested.apply(inner, ctx.depth - 1).sum()
            await loss.backward()
            assert inner.grad.item() == 2.0
        return g * 2, None


class NestedPlain(ag.Function):
    depths = []
    fail_at = None

    @staticmethod
    def forward(ctx, x, depth):
        ctx.depth = depth
        return x * 2

    @staticmethod
    def backward(ctx, g):
        depth = current_graph_task.get().reentrant_depth
        NestedPlain.depths.append(depth)
        if depth == NestedPlain.fail_at:
            raise KeyError(f"failed at depth {depth}")
        if ctx.depth > 0:
            inner = ag.ones(1, requires_grad=True)
            with ag.enable_grad():
                loss = NestedPlain.apply(inner, ctx.depth - 1).sum()
            loss.backward_sync()
            assert inner.grad.item() == 2.0
        return g * 2, None


@pytest.mark.parametrize("fn", [Nested, NestedPlain])
async def test_reentrant_depth_1000_with_one_thread(fn):
    """PyTorch caps nested reentrant backwards at 60 per thread; here 1000 need one thread."""
    ag.set_num_workers("cpu", 1)
    fn.depths.clear()
    x = ag.ones(3, requires_grad=True)
    await fn.apply(x, 1000).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [2, 2, 2])
    assert max(fn.depths) == 1000 and sorted(fn.depths) == list(range(1001))


async def test_reentrant_plain_backward_in_kernel_threads_with_one_thread():
    """Every node large: plain backwards run in the (one-thread) executor, calling backward_sync there."""
    ag.set_num_workers("cpu", 1)
    ag.set_inline_threshold("cpu", 0)
    NestedPlain.depths.clear()
    x = ag.ones(3, requires_grad=True)
    await NestedPlain.apply(x, 60).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [2, 2, 2])
    assert max(NestedPlain.depths) == 60


async def test_error_in_nested_backward_reaches_outermost_caller():
    NestedPlain.fail_at = 50
    try:
        x = ag.ones(2, requires_grad=True)
        with pytest.raises(KeyError, match="failed at depth 50"):
            await NestedPlain.apply(x, 80).sum().backward()
    finally:
        NestedPlain.fail_at = None
    y = ag.ones(2, requires_grad=True)
    await (y * 3).sum().backward()
    np.testing.assert_allclose(y.grad.numpy(), [3, 3])


# --------------------------------------------------------------------------- checkpointing
def make_mlp(rng, width=64, layers=8):
    return [(ag.tensor(rng.standard_normal((width, width)) / np.sqrt(width), requires_grad=True),
             ag.tensor(rng.standard_normal(width) * 0.1, requires_grad=True)) for _ in range(layers)]


def mlp_block(params):
    def run(h):
        for w, b in params:
            h = (h @ w.T + b).tanh()
        return h
    return run


@pytest.mark.parametrize("use_reentrant, bound", [(True, 0.5), (False, 0.6)])
async def test_checkpoint_gives_same_gradients_with_less_memory(rng, use_reentrant, bound):
    """The non-reentrant variant keeps the region's graph (its nodes, not their tensors), as torch's."""
    params = make_mlp(rng)
    x_np = rng.standard_normal((256, 64))

    async def grads(checkpointed):
        for w, b in params:
            w.grad = b.grad = None
        x = ag.tensor(x_np, requires_grad=True)
        gc.collect()
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        if checkpointed:
            h = x
            for i in range(0, 8, 2):
                h = await ag.checkpoint(mlp_block(params[i:i + 2]), h, use_reentrant=use_reentrant)
        else:
            h = mlp_block(params)(x)
        loss = (h * h).mean()
        kept = tracemalloc.get_traced_memory()[0] - base
        await loss.backward()
        tracemalloc.stop()
        return kept, [t.grad.numpy().copy() for pair in params for t in pair] + [x.grad.numpy().copy()]

    kept_plain, plain = await grads(False)
    kept_ckpt, ckpt = await grads(True)
    for a, b in zip(plain, ckpt):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
    assert kept_ckpt < bound * kept_plain, (kept_ckpt, kept_plain)


@pytest.mark.parametrize("use_reentrant", [True, False])
async def test_checkpoint_accepts_async_functions(use_reentrant):
    w = ag.tensor([2.0], requires_grad=True)

    async def fn(x):
        await asyncio.sleep(0)
        return (x * w).exp()

    x = ag.tensor([0.5], requires_grad=True)
    y = await ag.checkpoint(fn, x, use_reentrant=use_reentrant)
    await y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.exp(1.0), rtol=1e-6)
    np.testing.assert_allclose(w.grad.numpy(), 0.5 * np.exp(1.0), rtol=1e-6)


class Probe(ag.Function):
    seen = []

    @staticmethod
    def forward(ctx, x):
        return x * 1

    @staticmethod
    def backward(ctx, g):
        import threading

        Probe.seen.append((ag.is_grad_enabled(), current_graph_task.get() is not None,
                           threading.current_thread() is threading.main_thread()))
        return g


@pytest.mark.parametrize("create_graph", [False, True])
async def test_context_variables_reach_kernel_threads(create_graph):
    """A large plain backward runs in a worker thread, with the graph task's grad mode and identity."""
    ag.set_inline_threshold("cpu", 0)
    Probe.seen.clear()
    x = ag.randn(3, requires_grad=True)
    await Probe.apply(x).sum().backward(create_graph=create_graph)
    assert Probe.seen == [(create_graph, True, False)]
