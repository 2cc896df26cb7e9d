"""The per-step overhead cuts of a training loop (Note [SGD's per-parameter work] in optim/sgd.py,
Note [nll_loss's common case] in ops/nn.py, the fast checks of Note [In place without a
temporary] in ops/inplace.py) change no bit and drop no error. What the cuts bought is in
benchmarks/HISTORY.md (2026-11-24: the Notes named above, and Note [Cheap checks first]).
"""

from __future__ import annotations

import numpy as np
import pytest

import asyncgrad as ag

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None

F = ag.nn.functional


def _bits(a: np.ndarray) -> bytes:
    return np.ascontiguousarray(a).tobytes()


# --------------------------------------------------------------------------- SGD
@pytest.mark.parametrize("settings", [
    dict(lr=0.01, momentum=0.9),
    dict(lr=0.1, momentum=0.5, dampening=0.25),
    dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01),
    dict(lr=0.3),
    dict(lr=1, momentum=0.9),
    dict(lr=0.01, momentum=0.9, maximize=True),
])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sgd_bits_are_the_reference_formula(settings, dtype):
    """Three steps equal, bit for bit, torch's update order computed in numpy out of place."""
    rng = np.random.default_rng(1)
    shapes = [(5, 3), (3,), (2, 2, 2)]
    values = [rng.standard_normal(s).astype(dtype) for s in shapes]
    params = [ag.tensor(v.copy(), requires_grad=True) for v in values]
    opt = ag.optim.SGD(params, **settings)
    lr, momentum = settings["lr"], settings.get("momentum", 0.0)
    dampening, wd = settings.get("dampening", 0.0), settings.get("weight_decay", 0.0)
    ref = [v.copy() for v in values]
    bufs: list = [None] * len(ref)
    for _ in range(3):
        grads = [rng.standard_normal(s).astype(dtype) for s in shapes]
        for p, g in zip(params, grads):
            p.grad = ag.tensor(g.copy())
        opt.step()
        for i, g in enumerate(grads):
            if settings.get("maximize"):
                g = -g
            if wd:
                g = g + ref[i] * wd
            if momentum:
                if bufs[i] is None:
                    bufs[i] = g.copy()
                else:
                    bufs[i] = bufs[i] * momentum + g * (1 - dampening) if dampening else bufs[i] * momentum + g
                g = g + bufs[i] * momentum if settings.get("nesterov") else bufs[i]
            ref[i] = ref[i] - g * lr
        for p, r in zip(params, ref):
            assert p.dtype == dtype
            assert _bits(p.detach().numpy()) == _bits(r)


@pytest.mark.skipif(torch is None, reason="torch not installed")
def test_sgd_agrees_with_torch():
    rng = np.random.default_rng(2)
    values = [rng.standard_normal(s) for s in [(4, 6), (6,)]]
    a = [ag.tensor(v, requires_grad=True) for v in values]
    t = [torch.tensor(v, requires_grad=True) for v in values]
    a_opt, t_opt = ag.optim.SGD(a, lr=0.01, momentum=0.9), torch.optim.SGD(t, lr=0.01, momentum=0.9)
    for _ in range(4):
        for pa, pt in zip(a, t):
            g = rng.standard_normal(pa.shape)
            pa.grad, pt.grad = ag.tensor(g), torch.tensor(g)
        a_opt.step()
        t_opt.step()
    for pa, pt in zip(a, t):
        np.testing.assert_allclose(pa.detach().numpy(), pt.detach().numpy(), rtol=1e-14, atol=1e-15)


def test_sgd_tensor_lr_keeps_the_tensor_product():
    p = ag.tensor([1.0, 2.0], requires_grad=True)
    opt = ag.optim.SGD([p], lr=ag.tensor(0.5))
    p.grad = ag.tensor([4.0, 8.0])
    opt.step()
    assert p.detach().numpy().tolist() == [-1.0, -2.0]


# --------------------------------------------------------------------------- in-place checks
def test_inplace_checks_still_raise():
    leaf = ag.tensor(np.ones(3), requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"):
        leaf.mul_(2.0)
    with ag.no_grad(), pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        ag.tensor(np.ones(1)).expand(3).add_(1.0)
    base = ag.tensor(np.arange(6.0))
    with ag.no_grad(), pytest.raises(RuntimeError, match="some elements of the input tensor and the written-to"):
        base[:4].add_(base[2:])
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output type Long"):
        ag.tensor([1, 2]).mul_(0.5)
    view = ag.tensor(np.ones(4), requires_grad=True)[1:]
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        view.add_(1.0)


def test_inplace_into_bits_and_version():
    rng = np.random.default_rng(3)
    b, g = rng.standard_normal((16, 16)), rng.standard_normal((16, 16))
    t, tg = ag.tensor(b.copy()), ag.tensor(g)
    version = t._version
    with ag.no_grad():
        t.mul_(0.9).add_(tg, alpha=0.1).sub_(tg, alpha=0.01)
    assert t._version == version + 3
    assert _bits(t.numpy()) == _bits((b * 0.9 + g * 0.1) - g * 0.01)


# --------------------------------------------------------------------------- cross_entropy
async def _loss_and_grad(logits: np.ndarray, target: np.ndarray, **kwargs) -> tuple[np.ndarray, np.ndarray]:
    x = ag.tensor(logits, requires_grad=True)
    loss = F.cross_entropy(x, ag.tensor(target), **kwargs)
    await loss.sum().backward()
    return loss.detach().numpy(), x.grad.numpy()


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(64, 10), (10,), (7, 3)])
async def test_cross_entropy_common_case_bits_equal_general_path(reduction, dtype, shape):
    """The common case (no weight, nothing ignored) against the general path, forced by an
    ignore_index that is a class no target names: the same value and gradient, bit for bit."""
    rng = np.random.default_rng(4)
    logits = rng.standard_normal(shape).astype(dtype)
    classes = shape[-1]
    target = rng.integers(0, classes - 1, shape[:-1])  # class classes - 1 never a target
    fast = await _loss_and_grad(logits, target, reduction=reduction)
    general = await _loss_and_grad(logits, target, reduction=reduction, ignore_index=classes - 1)
    for a, b in zip(fast, general):
        assert a.dtype == b.dtype == dtype and a.shape == b.shape
        assert _bits(a) == _bits(b)
    if torch is not None:
        t = torch.tensor(logits, requires_grad=True)
        loss = torch.nn.functional.cross_entropy(t, torch.tensor(target), reduction=reduction)
        loss.sum().backward()
        tol = 1e-5 if dtype == np.float32 else 1e-12
        np.testing.assert_allclose(fast[0], loss.detach().numpy(), rtol=tol, atol=tol)
        np.testing.assert_allclose(fast[1], t.grad.numpy(), rtol=tol, atol=tol)


async def test_cross_entropy_uint8_targets_and_ignored_rows():
    rng = np.random.default_rng(5)
    logits = rng.standard_normal((6, 4))
    target = np.array([0, 3, 1, 2, 2, 0])
    a = await _loss_and_grad(logits, target.astype(np.uint8))
    b = await _loss_and_grad(logits, target)
    assert all(_bits(x) == _bits(y) for x, y in zip(a, b))
    ignored = target.copy()
    ignored[2] = -100
    loss, grad = await _loss_and_grad(logits, ignored)
    assert not grad[2].any()
    if torch is not None:
        expected = torch.nn.functional.cross_entropy(torch.tensor(logits), torch.tensor(ignored))
        np.testing.assert_allclose(loss, expected.numpy(), rtol=1e-14)


@pytest.mark.parametrize("target, error, message", [
    ([0, 10, 1], IndexError, "Target 10 is out of bounds."),
    ([0, -1, 1], IndexError, "Target -1 is out of bounds."),
    ([0, 1], ValueError, r"Expected input batch_size \(3\) to match target batch_size \(2\)."),
])
def test_cross_entropy_bad_targets_still_raise(target, error, message):
    x = ag.tensor(np.zeros((3, 10)), requires_grad=True)
    with pytest.raises(error, match=message):
        F.cross_entropy(x, ag.tensor(target))
    with pytest.raises(error, match=message):
        F.nll_loss(x, ag.tensor(target))


def test_cross_entropy_argument_errors_keep_their_names():
    x = ag.tensor(np.zeros((3, 4)))
    with pytest.raises(RuntimeError, match="expected target dtype to be Long or Byte, but got Float"):
        F.cross_entropy(x, ag.tensor(np.zeros(3, dtype=np.float32)))
    with pytest.raises(ValueError, match="bogus is not a valid value for reduction"):
        F.cross_entropy(x, ag.tensor([0, 1, 2]), reduction="bogus")
    with pytest.raises(RuntimeError, match="weight tensor should be defined either for all 4 classes"):
        F.cross_entropy(x, ag.tensor([0, 1, 2]), weight=ag.tensor(np.ones(3)))
    with pytest.raises(TypeError, match="cross_entropy_loss"):
        F.cross_entropy(x.numpy(), ag.tensor([0, 1, 2]))
    with pytest.raises(TypeError, match="nll_loss_nd"):
        F.nll_loss(x.numpy(), ag.tensor([0, 1, 2]))
