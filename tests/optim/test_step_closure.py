"""``step(closure)`` of SGD, Adam, AdamW, RMSprop and Adagrad against torch (Note [step(closure)]
in asyncgrad/optim/optimizer.py): an ``async def`` closure is awaited through ``await
opt.step(closure)``, a ``def`` closure runs at once, ``step()`` stays synchronous."""

from __future__ import annotations

import asyncio
import inspect

import numpy as np
import pytest

import asyncgrad as ag

torch = pytest.importorskip("torch")

_X = np.random.default_rng(0).standard_normal((6, 3))
_Y = np.random.default_rng(1).standard_normal(6)
_W0 = np.array([0.5, -1.0, 2.0])

OPTIMIZERS = {
    "SGD": ("SGD", dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01)),
    "Adam": ("Adam", dict(lr=0.05, amsgrad=True)),
    "AdamW": ("AdamW", dict(lr=0.05, weight_decay=0.1)),
    "RMSprop": ("RMSprop", dict(lr=0.01, momentum=0.5, centered=True)),
    "Adagrad": ("Adagrad", dict(lr=0.1, lr_decay=0.01)),
}


def _torch_run(name, kwargs, steps):
    w = torch.tensor(_W0, requires_grad=True)
    opt = getattr(torch.optim, name)([w], **kwargs)
    x, y = torch.tensor(_X), torch.tensor(_Y)

    def closure():
        opt.zero_grad()
        loss = ((x @ w - y) ** 2).mean()
        loss.backward()
        return loss

    with torch.no_grad():  # torch's step turns grad mode on for the closure
        losses = [opt.step(closure).item() for _ in range(steps)]
    return losses, w.detach().numpy()


def _ours(name, kwargs):
    w = ag.tensor(_W0, requires_grad=True)
    opt = getattr(ag.optim, name)([w], **kwargs)
    x, y = ag.tensor(_X), ag.tensor(_Y)

    def forward():
        opt.zero_grad()
        return ((x @ w - y) ** 2).mean()

    return w, opt, forward


@pytest.mark.parametrize("label", list(OPTIMIZERS))
async def test_async_closure_matches_torch(label):
    name, kwargs = OPTIMIZERS[label]
    expected_losses, expected_w = _torch_run(name, kwargs, 5)
    w, opt, forward = _ours(name, kwargs)

    async def closure():
        loss = forward()
        await loss.backward()
        return loss

    losses = []
    with ag.no_grad():  # the closure still runs in grad mode
        for _ in range(5):
            pending = opt.step(closure)
            assert asyncio.iscoroutine(pending)
            losses.append((await pending).item())
    np.testing.assert_allclose(losses, expected_losses, rtol=1e-12)
    np.testing.assert_allclose(w.detach().numpy(), expected_w, rtol=1e-12)


@pytest.mark.parametrize("label", list(OPTIMIZERS))
def test_sync_closure_matches_torch(label):
    name, kwargs = OPTIMIZERS[label]
    expected_losses, expected_w = _torch_run(name, kwargs, 3)
    w, opt, forward = _ours(name, kwargs)

    def closure():
        loss = forward()
        ag.backward_sync(loss)
        return loss

    losses = [opt.step(closure).item() for _ in range(3)]
    np.testing.assert_allclose(losses, expected_losses, rtol=1e-12)
    np.testing.assert_allclose(w.detach().numpy(), expected_w, rtol=1e-12)


async def test_step_without_closure_stays_synchronous_and_update_waits_for_await():
    w, opt, forward = _ours("SGD", dict(lr=0.1))
    await forward().backward()
    assert opt.step() is None and opt.step(None) is None and opt.step(closure=None) is None
    for name in OPTIMIZERS:
        assert inspect.signature(getattr(ag.optim, name).step).parameters["closure"].default is None
    before = w.detach().numpy().copy()

    async def closure():
        loss = forward()
        await loss.backward()
        return loss

    pending = opt.step(closure=closure)
    np.testing.assert_array_equal(w.detach().numpy(), before)  # nothing happens until awaited
    await pending
    assert not np.array_equal(w.detach().numpy(), before)


async def test_unawaited_backward_in_closure_is_refused():
    w, opt, forward = _ours("Adam", dict(lr=0.1))

    async def forgetful():
        loss = forward()
        loss.backward()  # not awaited: step closes it and says so
        return loss

    with pytest.raises(RuntimeError, match="optimizer.step()"):
        await opt.step(forgetful)
    np.testing.assert_array_equal(w.detach().numpy(), _W0)


def test_bad_closures_use_torchs_words():
    for call in (lambda o: o.step(1), lambda o: o.step(None, 2), lambda o: o.step(foo=1)):
        with pytest.raises(TypeError) as theirs:
            call(torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1))
        with pytest.raises(TypeError) as ours:
            call(ag.optim.SGD([ag.zeros(1, requires_grad=True)], lr=0.1))
        assert str(ours.value) == str(theirs.value)


async def test_scheduler_and_own_closure_step_pass_the_closure_through():
    w, opt, forward = _ours("SGD", dict(lr=0.1))
    scheduler = ag.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)

    async def closure():
        loss = forward()
        await loss.backward()
        return loss

    loss = await opt.step(closure)
    assert loss.item() == pytest.approx(float(((_X @ _W0 - _Y) ** 2).mean()))
    scheduler.step()
    assert opt.param_groups[0]["lr"] == 0.05

    class Custom(ag.optim.Optimizer):
        def __init__(self, params):
            super().__init__(params, {})

        def step(self, closure=None):
            return ("own", closure)

    assert Custom([w]).step(closure) == ("own", closure)
