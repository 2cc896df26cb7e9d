"""Note [Recycled product buffers] (devices/buffers.py): large gradient products on the cpu are
written into cached slabs, reused once nothing sees them, never while something does."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

import asyncgrad as ag
from asyncgrad.devices import backend as backend_module
from asyncgrad.devices import buffers
from asyncgrad.devices.buffers import MIN_BYTES, BufferCache

ROWS, FEATURES, OUT = 64, 784, 256  # W3's first layer: a 1.6 MB weight gradient


def _data(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((ROWS, FEATURES)), rng.standard_normal((FEATURES, OUT)),
            rng.standard_normal((ROWS, OUT)))


async def _weight_grad(x: np.ndarray, w: np.ndarray, g: np.ndarray) -> ag.Tensor:
    """d(sum((x @ w) * g))/dw = x.T @ g, through MmBackward0."""
    wt = ag.tensor(w, requires_grad=True)
    await ((ag.tensor(x) @ wt) * ag.tensor(g)).sum().backward()
    return wt.grad


def _slab_of(t: ag.Tensor) -> object:
    return t.numpy().base


@pytest.fixture
def cache(monkeypatch: pytest.MonkeyPatch) -> BufferCache:
    """A fresh cache for one test, so slabs other tests left free do not count."""
    fresh = BufferCache()
    monkeypatch.setattr(buffers, "CACHE", fresh)
    monkeypatch.setattr(backend_module, "CACHE", fresh)
    return fresh


async def test_a_large_weight_gradient_is_stolen_from_a_slab(cache: BufferCache) -> None:
    x, w, g = _data(0)
    grad = await _weight_grad(x, w, g)
    np.testing.assert_allclose(grad.numpy(), x.T @ g, rtol=1e-12, atol=1e-12)
    assert type(_slab_of(grad)).__name__ == "_Slab"  # the product's own buffer, not a copy
    assert cache.cached_bytes() == (FEATURES * OUT * 8, 0)


async def test_a_freed_gradient_buffer_is_reused_and_the_values_are_the_new_ones(cache: BufferCache) -> None:
    x, w, g = _data(1)
    first = await _weight_grad(x, w, g)
    slab = id(_slab_of(first))  # the cache keeps it alive: the id stays its own
    del first
    assert cache.cached_bytes() == (FEATURES * OUT * 8, FEATURES * OUT * 8)
    x2, w2, g2 = _data(2)
    second = await _weight_grad(x2, w2, g2)
    assert id(_slab_of(second)) == slab
    np.testing.assert_allclose(second.numpy(), x2.T @ g2, rtol=1e-12, atol=1e-12)
    assert cache.cached_bytes()[0] == FEATURES * OUT * 8  # no second slab


async def test_a_gradient_still_held_is_never_overwritten(cache: BufferCache) -> None:
    x, w, g = _data(3)
    kept = await _weight_grad(x, w, g)
    expected = kept.numpy().copy()
    view = (await _weight_grad(x, w, g))[0]  # only a view of the second survives
    third = await _weight_grad(*_data(4))
    np.testing.assert_array_equal(kept.numpy(), expected)
    np.testing.assert_array_equal(view.numpy(), expected[0])
    slabs = {id(_slab_of(kept)), id(_slab_of(third))}
    assert len(slabs) == 2 and cache.cached_bytes()[0] == 3 * FEATURES * OUT * 8


async def test_a_second_backward_accumulates_into_the_stolen_gradient() -> None:
    x, w, g = _data(5)
    wt = ag.tensor(w, requires_grad=True)
    loss = ((ag.tensor(x) @ wt) * ag.tensor(g)).sum()
    await loss.backward(retain_graph=True)
    await loss.backward()
    np.testing.assert_allclose(wt.grad.numpy(), 2 * (x.T @ g), rtol=1e-12, atol=1e-12)


async def test_a_shared_slab_is_not_stolen_by_grad(cache: BufferCache) -> None:
    """ag.grad hands its result back without a copy only when it owns its memory: a slab some other
    view also sees is copied, so writing into one result changes nothing else."""
    x, w, g = _data(6)
    wt = ag.tensor(w, requires_grad=True)
    (gw,) = await ag.grad(((ag.tensor(x) @ wt) * ag.tensor(g)).sum(), [wt])
    assert type(_slab_of(gw)).__name__ == "_Slab"
    np.testing.assert_allclose(gw.numpy(), x.T @ g, rtol=1e-12, atol=1e-12)


async def test_linear_and_addmm_products_match_torch(cache: BufferCache) -> None:
    torch = pytest.importorskip("torch")
    x, w, g = _data(7)
    b = np.random.default_rng(8).standard_normal(OUT)
    for _step in range(2):  # the second step reuses the first's freed slabs
        mine = [ag.tensor(a, requires_grad=True) for a in (x, w.T.copy(), x, w, b)]
        theirs = [torch.tensor(a, requires_grad=True) for a in (x, w.T.copy(), x, w, b)]
        for lib, (xl, wl, xa, wa, ba) in ((ag, mine), (torch, theirs)):
            gl = lib.tensor(g)
            await_or_not = (lib.nn.functional.linear(xl, wl) * gl).sum().backward()
            if lib is ag:
                await await_or_not
            await_or_not = (lib.addmm(ba, xa, wa, beta=0.5, alpha=2.0) * gl).sum().backward()
            if lib is ag:
                await await_or_not
        for a, t in zip(mine, theirs):
            np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), rtol=1e-10, atol=1e-10)
        assert type(_slab_of(mine[1].grad)).__name__ == "_Slab"  # (256, 784): g.T @ x
        assert type(_slab_of(mine[3].grad)).__name__ == "_Slab"  # (784, 256): x.T @ (2 g)
        del mine
    assert cache.cached_bytes()[1] > 0


async def test_concurrent_products_on_kernel_threads_never_share_a_slab(cache: BufferCache) -> None:
    """Backwards whose products run on the engine's kernel threads at once (inline threshold 0):
    each gradient is its own product, exactly."""
    before = ag.device("cpu").inline_threshold
    ag.set_inline_threshold("cpu", 0)
    try:
        data = [_data(10 + i) for i in range(6)]
        for _ in range(3):
            grads = await asyncio.gather(*(_weight_grad(*d) for d in data))
            for (x, _w, g), grad in zip(data, grads):
                np.testing.assert_allclose(grad.numpy(), x.T @ g, rtol=1e-12, atol=1e-12)
            # a gradient made on a kernel thread may be copied rather than stolen (a plain array)
            slabs = [id(base) for t in grads if (base := _slab_of(t)) is not None]
            assert slabs and len(set(slabs)) == len(slabs)
            del grads
    finally:
        ag.set_inline_threshold("cpu", before)


async def test_the_limit_evicts_free_slabs_then_makes_plain_products(
        cache: BufferCache, monkeypatch: pytest.MonkeyPatch) -> None:
    size = FEATURES * OUT * 8
    monkeypatch.setattr(buffers, "LIMIT_BYTES", 2 * size)
    x, w, g = _data(11)
    a = await _weight_grad(x, w, g)
    b = await _weight_grad(x, w, g)
    c = await _weight_grad(x, w, g)  # both slabs in use: a plain array
    assert c.numpy().base is None
    np.testing.assert_allclose(c.numpy(), x.T @ g, rtol=1e-12, atol=1e-12)
    del a
    rng = np.random.default_rng(12)
    other = rng.standard_normal((FEATURES, OUT))
    grad = await _weight_grad(x, other, rng.standard_normal((ROWS, OUT)))
    assert type(_slab_of(grad)).__name__ == "_Slab" and b.numpy().base is not _slab_of(grad)
    assert cache.cached_bytes()[0] <= 2 * size


async def test_empty_cache_frees_only_slabs_nothing_uses(cache: BufferCache) -> None:
    x, w, g = _data(13)
    kept = await _weight_grad(x, w, g)
    dropped = await _weight_grad(x, w, g)
    del dropped
    assert ag.empty_cache() == FEATURES * OUT * 8
    assert cache.cached_bytes() == (FEATURES * OUT * 8, 0)
    np.testing.assert_allclose(kept.numpy(), x.T @ g, rtol=1e-12, atol=1e-12)


def test_small_and_non_matrix_products_are_plain() -> None:
    cache = BufferCache()
    a = np.ones((4, 4))
    assert cache.matmul(a, a).base is None
    assert cache.matmul(np.ones(4), np.ones((4, 3))).shape == (3,)
    rows = MIN_BYTES // (8 * 16)
    big = cache.matmul(np.ones((rows, 3)), np.ones((3, 16)))
    assert type(big.base).__name__ == "_Slab" and big.dtype == np.float64
    mixed = cache.matmul(np.ones((rows, 3), np.float32), np.ones((3, 16)))
    assert mixed.dtype == np.float64
    with pytest.raises(ValueError, match="matmul"):
        cache.matmul(np.ones((rows, 3)), np.ones((4, 16)))
