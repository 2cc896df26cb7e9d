"""ag.optim.lr_scheduler against torch.optim.lr_scheduler: the same learning rates (and cycled
momenta), bit for bit, over 30+ steps on two parameter groups; state dicts resume exactly."""

import io
import math
import re
import warnings

import numpy as np
import pytest

import asyncgrad as ag
from asyncgrad import optim
from asyncgrad.optim import lr_scheduler

STEPS = 35


def _groups(lib, make):
    params = [lib.zeros(2, requires_grad=True), lib.zeros(3, requires_grad=True)]
    return make([{"params": params[:1]}, {"params": params[1:], "lr": 0.05}])


def _optimizers(torch, name="SGD", **settings):
    settings = {"lr": 0.1, **settings}
    ours = _groups(ag, lambda groups: getattr(optim, name)(groups, **settings))
    theirs = _groups(torch, lambda groups: getattr(torch.optim, name)(groups, **settings))
    return ours, theirs


def _hyper(opt):
    """What a scheduler may change: lr, momentum, betas."""
    return [(g["lr"], g.get("momentum"), g.get("betas")) for g in opt.param_groups]


def _run(ours_sched, theirs_sched, steps=STEPS, metrics=None):
    ours_opt, theirs_opt = ours_sched.optimizer, theirs_sched.optimizer
    assert ours_sched.get_last_lr() == theirs_sched.get_last_lr()
    for step in range(steps):
        ours_opt.step()
        theirs_opt.step()
        if metrics is None:
            ours_sched.step()
            theirs_sched.step()
        else:
            ours_sched.step(metrics[step])
            theirs_sched.step(metrics[step])
        assert ours_sched.get_last_lr() == theirs_sched.get_last_lr(), step
        assert _hyper(ours_opt) == _hyper(theirs_opt), step


SCHEDULERS = [
    ("StepLR", dict(step_size=4)),
    ("StepLR", dict(step_size=3, gamma=0.5)),
    ("MultiStepLR", dict(milestones=[3, 7, 7, 20], gamma=0.3)),
    ("ExponentialLR", dict(gamma=0.9)),
    ("CosineAnnealingLR", dict(T_max=10)),
    ("CosineAnnealingLR", dict(T_max=7, eta_min=0.01)),
    ("OneCycleLR", dict(max_lr=1.0, total_steps=STEPS)),
    ("OneCycleLR", dict(max_lr=[1.0, 0.5], epochs=5, steps_per_epoch=7, anneal_strategy="linear")),
    ("OneCycleLR", dict(max_lr=0.3, total_steps=40, three_phase=True, pct_start=0.25, div_factor=10.0)),
    ("OneCycleLR", dict(max_lr=0.3, total_steps=40, cycle_momentum=False)),
    ("ConstantLR", dict(factor=0.25, total_iters=6)),
    ("LinearLR", dict()),
    ("LinearLR", dict(start_factor=0.1, end_factor=0.8, total_iters=12)),
]


@pytest.mark.parametrize("name,settings", SCHEDULERS, ids=[f"{n}-{s}" for n, s in SCHEDULERS])
def test_matches_torch(torch, name, settings):
    ours_opt, theirs_opt = _optimizers(torch, momentum=0.9)
    ours, theirs = getattr(lr_scheduler, name), getattr(torch.optim.lr_scheduler, name)
    _run(ours(ours_opt, **settings), theirs(theirs_opt, **settings))


def test_one_cycle_cycles_adams_beta1(torch):
    ours_opt, theirs_opt = _optimizers(torch, "Adam", betas=(0.9, 0.99))
    settings = dict(max_lr=0.01, total_steps=STEPS, base_momentum=0.8, max_momentum=0.9)
    _run(lr_scheduler.OneCycleLR(ours_opt, **settings), torch.optim.lr_scheduler.OneCycleLR(theirs_opt, **settings))
    assert ours_opt.param_groups[0]["betas"][1] == 0.99


def test_one_cycle_refuses_to_step_past_the_end(torch):
    ours_opt, theirs_opt = _optimizers(torch, momentum=0.9)
    ours, theirs = lr_scheduler.OneCycleLR(ours_opt, 0.1, total_steps=3), \
        torch.optim.lr_scheduler.OneCycleLR(theirs_opt, 0.1, total_steps=3)
    _run(ours, theirs, steps=3)
    with pytest.raises(ValueError) as torchs:
        theirs.step()
    with pytest.raises(ValueError, match=f"^{re.escape(str(torchs.value))}$"):
        ours.step()


def test_lambda_lr(torch):
    lambdas = [lambda epoch: 0.95**epoch, lambda epoch: 1.0 / (1 + epoch // 5)]
    ours_opt, theirs_opt = _optimizers(torch)
    _run(lr_scheduler.LambdaLR(ours_opt, lambdas), torch.optim.lr_scheduler.LambdaLR(theirs_opt, lambdas))
    ours_opt, theirs_opt = _optimizers(torch)
    _run(lr_scheduler.LambdaLR(ours_opt, lambdas[0]), torch.optim.lr_scheduler.LambdaLR(theirs_opt, lambdas[0]))


METRICS = [1.0, 0.9, 0.95, 0.95, 0.96, 0.97, 0.85, 0.85, 0.86, 0.9, 0.9, 0.9, 0.9, 0.84, 0.9, 0.9, 0.9, 0.9] * 2


@pytest.mark.parametrize("settings", [dict(patience=2), dict(mode="max", patience=1, factor=0.5, cooldown=2),
                                      dict(patience=0, threshold=0.05, threshold_mode="abs", min_lr=[0.01, 0.02]),
                                      dict(patience=1, min_lr=0.04, eps=1e-3)], ids=str)
def test_reduce_lr_on_plateau(torch, settings):
    ours_opt, theirs_opt = _optimizers(torch)
    ours = lr_scheduler.ReduceLROnPlateau(ours_opt, **settings)
    theirs = torch.optim.lr_scheduler.ReduceLROnPlateau(theirs_opt, **settings)
    _run(ours, theirs, len(METRICS), METRICS)
    assert ours.best == theirs.best and ours.num_bad_epochs == theirs.num_bad_epochs
    assert ours_opt.param_groups[0]["lr"] < 0.1  # it did reduce


def test_reduce_lr_on_plateau_takes_a_tensor_metric():
    opt = optim.SGD([ag.zeros(1, requires_grad=True)], lr=1.0)
    sched = lr_scheduler.ReduceLROnPlateau(opt, patience=0)
    sched.step(ag.tensor(1.0))
    sched.step(ag.tensor(2.0))
    assert sched.get_last_lr() == [0.1]


@pytest.mark.parametrize("name,settings", [("StepLR", dict(step_size=3)), ("MultiStepLR", dict(milestones=[2, 5])),
                                           ("CosineAnnealingLR", dict(T_max=6)),
                                           ("OneCycleLR", dict(max_lr=0.5, total_steps=STEPS + 5)),
                                           ("ReduceLROnPlateau", dict(patience=1))])
def test_state_dict_resumes_exactly(torch, name, settings):
    """Twelve steps, then a fresh optimizer and scheduler take over both state dicts (through
    ag.save/ag.load) and continue exactly as torch's uninterrupted pair."""
    ours_opt, theirs_opt = _optimizers(torch, momentum=0.9)
    ours = getattr(lr_scheduler, name)(ours_opt, **settings)
    theirs = getattr(torch.optim.lr_scheduler, name)(theirs_opt, **settings)
    metrics = METRICS if name == "ReduceLROnPlateau" else None
    _run(ours, theirs, 12, metrics)
    buffer = io.BytesIO()
    ag.save({"optimizer": ours_opt.state_dict(), "scheduler": ours.state_dict()}, buffer)
    buffer.seek(0)
    saved = ag.load(buffer)
    resumed_opt, _ = _optimizers(torch, momentum=0.9)
    resumed_opt.load_state_dict(saved["optimizer"])
    resumed = getattr(lr_scheduler, name)(resumed_opt, **settings)
    resumed.load_state_dict(saved["scheduler"])
    assert resumed.get_last_lr() == theirs.get_last_lr()
    _run(resumed, theirs, 15, None if metrics is None else metrics[12:])


def test_lambda_lr_state_dict_keeps_callable_objects_state():
    class Warmup:
        def __init__(self, steps):
            self.steps = steps

        def __call__(self, epoch):
            return min(1.0, (epoch + 1) / self.steps)

    opt = optim.SGD([ag.zeros(1, requires_grad=True)], lr=1.0)
    sched = lr_scheduler.LambdaLR(opt, [Warmup(4)])
    state = sched.state_dict()
    assert state["lr_lambdas"] == [{"steps": 4}]
    other = lr_scheduler.LambdaLR(optim.SGD([ag.zeros(1, requires_grad=True)], lr=1.0), [Warmup(10)])
    other.load_state_dict(state)
    assert other.lr_lambdas[0].steps == 4
    plain = lr_scheduler.LambdaLR(opt, lambda epoch: 1.0)
    assert plain.state_dict()["lr_lambdas"] == [None]


def test_warns_when_the_scheduler_steps_before_the_optimizer():
    opt = optim.SGD([ag.zeros(1, requires_grad=True)], lr=1.0)
    sched = lr_scheduler.StepLR(opt, step_size=1)
    with pytest.warns(UserWarning, match=re.escape("Detected call of `lr_scheduler.step()` before `optimizer.step()`")):
        sched.step()
    opt2 = optim.SGD([ag.zeros(1, requires_grad=True)], lr=1.0)
    sched2 = lr_scheduler.StepLR(opt2, step_size=1)
    opt2.step()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sched2.step()


async def test_lbfgs_async_step_counts_as_an_optimizer_step():
    x = ag.tensor([1.5, -0.5], dtype=ag.float64, requires_grad=True)
    opt = optim.LBFGS([x], max_iter=2)
    sched = lr_scheduler.ExponentialLR(opt, gamma=0.5)

    async def closure():
        opt.zero_grad()
        loss = (x**2).sum()
        await loss.backward()
        return loss

    await opt.step(closure)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sched.step()
    assert sched.get_last_lr() == [0.5]


def test_epoch_argument_uses_the_closed_form_and_warns(torch):
    ours_opt, theirs_opt = _optimizers(torch)
    ours = lr_scheduler.CosineAnnealingLR(ours_opt, T_max=10)
    theirs = torch.optim.lr_scheduler.CosineAnnealingLR(theirs_opt, T_max=10)
    ours_opt.step()
    theirs_opt.step()
    with pytest.warns(UserWarning, match="The epoch parameter in `scheduler.step\\(\\)` was not necessary"):
        ours.step(5)
    with pytest.warns(UserWarning):
        theirs.step(5)
    assert ours.get_last_lr() == theirs.get_last_lr()
    assert math.isclose(ours.get_last_lr()[0], 0.05, rel_tol=1e-15)


BAD = [
    ("StepLR", lambda opt: dict(optimizer=object(), step_size=1)),
    ("LambdaLR", lambda opt: dict(optimizer=opt, lr_lambda=[lambda e: 1.0])),
    ("OneCycleLR", lambda opt: dict(optimizer=opt, max_lr=0.1)),
    ("OneCycleLR", lambda opt: dict(optimizer=opt, max_lr=0.1, total_steps=0)),
    ("OneCycleLR", lambda opt: dict(optimizer=opt, max_lr=0.1, epochs=2, steps_per_epoch=-1)),
    ("OneCycleLR", lambda opt: dict(optimizer=opt, max_lr=0.1, total_steps=5, pct_start=1.5)),
    ("OneCycleLR", lambda opt: dict(optimizer=opt, max_lr=0.1, total_steps=5, anneal_strategy="square")),
    ("OneCycleLR", lambda opt: dict(optimizer=opt, max_lr=[0.1], total_steps=5)),
    ("ConstantLR", lambda opt: dict(optimizer=opt, factor=1.5)),
    ("LinearLR", lambda opt: dict(optimizer=opt, start_factor=0.0)),
    ("LinearLR", lambda opt: dict(optimizer=opt, end_factor=2.0)),
    ("ReduceLROnPlateau", lambda opt: dict(optimizer=opt, factor=1.0)),
    ("ReduceLROnPlateau", lambda opt: dict(optimizer=opt, mode="middle")),
    ("ReduceLROnPlateau", lambda opt: dict(optimizer=opt, threshold_mode="log")),
    ("ReduceLROnPlateau", lambda opt: dict(optimizer=opt, min_lr=[0.1, 0.2, 0.3])),
]


def test_bad_arguments_raise_torchs_errors(torch):
    for name, make in BAD:
        ours_opt, theirs_opt = _optimizers(torch, momentum=0.9)
        with pytest.raises((TypeError, ValueError)) as theirs:
            getattr(torch.optim.lr_scheduler, name)(**make(theirs_opt))
        with pytest.raises(type(theirs.value), match=f"^{re.escape(str(theirs.value))}$"):
            getattr(lr_scheduler, name)(**make(ours_opt))


def test_one_cycle_needs_momentum():
    opt = optim.Adagrad([ag.zeros(1, requires_grad=True)])
    with pytest.raises(ValueError, match="optimizer must support momentum or beta1"):
        lr_scheduler.OneCycleLR(opt, 0.1, total_steps=5)


def test_resuming_without_initial_lr_explains(torch):
    opt = optim.SGD([ag.zeros(1, requires_grad=True)], lr=1.0)
    with pytest.raises(KeyError, match="param 'initial_lr' is not specified in param_groups\\[0\\]"):
        lr_scheduler.StepLR(opt, step_size=2, last_epoch=3)
    assert np.isfinite(opt.param_groups[0]["lr"])
