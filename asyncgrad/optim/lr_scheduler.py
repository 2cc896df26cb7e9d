"""``asyncgrad.optim.lr_scheduler``: torch's learning-rate schedulers, number for number.

Schedulers only touch ``group["lr"]`` (and OneCycleLR the momentum), so they are plain
synchronous objects, as in torch, even though LBFGS's ``step`` is a coroutine. The
recurrences are torch's chainable forms (each step multiplies the current lr), not the closed
forms, because the two differ in the last bits and a run must match torch's step by step.
"""

from __future__ import annotations

import math
import types
import warnings
import weakref
from bisect import bisect_right
from collections import Counter
from functools import wraps
from typing import Any, Callable, Iterable, Literal, SupportsFloat

from asyncgrad.optim.optimizer import Optimizer

__all__ = ["ConstantLR", "CosineAnnealingLR", "ExponentialLR", "LRScheduler", "LambdaLR", "LinearLR", "MultiStepLR",
           "OneCycleLR", "ReduceLROnPlateau", "StepLR"]

EPOCH_DEPRECATION_WARNING = (
    "The epoch parameter in `scheduler.step()` was not necessary and is being "
    "deprecated where possible. Please use `scheduler.step()` to step the "
    "scheduler. During the deprecation, if epoch is different from None, the "
    "closed form is used instead of the new chainable form, where available. "
    "Please open an issue if you are unable to replicate your use case: "
    "https://github.com/pytorch/pytorch/issues/new/choose."
)


def _check_optimizer(optimizer: Any) -> None:
    if not isinstance(optimizer, Optimizer):
        raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")


def _format_param(name: str, optimizer: Optimizer, param: Any) -> list[Any]:
    """One value per parameter group: a list is checked for length, a scalar repeated."""
    if isinstance(param, (list, tuple)):
        if len(param) != len(optimizer.param_groups):
            raise ValueError(
                f"{name} must have the same length as optimizer.param_groups. "
                f"{name} has {len(param)} values, param_groups has {len(optimizer.param_groups)}."
            )
        return list(param)
    return [param] * len(optimizer.param_groups)


def _lrs(optimizer: Optimizer) -> list[float]:
    return [group["lr"] for group in optimizer.param_groups]


class LRScheduler:
    """Base class: ``step()`` advances ``last_epoch`` and writes ``get_lr()`` into the groups.

    As in torch, constructing a scheduler records ``initial_lr`` in each group and takes the
    first step at once, and the optimizer's ``step`` is wrapped so that calling the scheduler
    before the optimizer warns (the first value of the schedule would be skipped).
    """

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1) -> None:
        _check_optimizer(optimizer)
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", group["lr"])
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(
                        f"param 'initial_lr' is not specified in param_groups[{i}] when resuming scheduler with "
                        "last_epoch >= 0.\nThis typically happens when:\n1. You're trying to resume training from "
                        "a checkpoint but haven't properly loaded the optimizer state\n2. You're using last_epoch "
                        ">= 0 for a fresh training run (not recommended)"
                    )
        self.base_lrs: list[float] = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        _track_step_called(optimizer)
        self._is_initial = True
        self._step_count = 0
        try:
            self.step()
        finally:
            self._is_initial = False

    def state_dict(self) -> dict[str, Any]:
        """Every attribute but the optimizer (torch's rule), ready for ``ag.save``."""
        return {key: value for key, value in self.__dict__.items() if key != "optimizer"}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.__dict__.update(state_dict)

    def get_last_lr(self) -> list[float]:
        """The learning rates the last ``step()`` wrote, one per group."""
        return self._last_lr

    def get_lr(self) -> list[float]:
        """The next learning rates; subclasses define the schedule."""
        raise NotImplementedError

    def step(self, epoch: int | None = None) -> None:
        if self._step_count == 1:
            if not hasattr(self.optimizer.step, "_wrapped_by_lr_sched"):
                warnings.warn(
                    "Seems like `optimizer.step()` has been overridden after learning rate scheduler "
                    "initialization. Please, make sure to call `optimizer.step()` before "
                    "`lr_scheduler.step()`. See more details at "
                    "https://pytorch.org/docs/stable/optim.html#how-to-adjust-learning-rate",
                    UserWarning, stacklevel=2)
            elif not getattr(self.optimizer, "_opt_called", False):
                warnings.warn(
                    "Detected call of `lr_scheduler.step()` before `optimizer.step()`. "
                    "In PyTorch 1.1.0 and later, you should call them in the opposite order: "
                    "`optimizer.step()` before `lr_scheduler.step()`.  Failure to do this "
                    "will result in PyTorch skipping the first value of the learning rate schedule. "
                    "See more details at "
                    "https://pytorch.org/docs/stable/optim.html#how-to-adjust-learning-rate",
                    UserWarning, stacklevel=2)
        self._step_count += 1
        if epoch is None:
            self.last_epoch += 1
            values = self.get_lr()
        else:
            warnings.warn(EPOCH_DEPRECATION_WARNING, UserWarning, stacklevel=2)
            self.last_epoch = epoch
            closed_form = getattr(self, "_get_closed_form_lr", None)
            values = closed_form() if closed_form is not None else self.get_lr()
        for group, lr in zip(self.optimizer.param_groups, values):
            group["lr"] = lr
        self._last_lr = _lrs(self.optimizer)


def _track_step_called(optimizer: Optimizer) -> None:
    """Wrap ``optimizer.step`` (once) so that it records that it ran (torch's order check)."""
    if hasattr(optimizer.step, "_wrapped_by_lr_sched"):
        return
    opt_ref = weakref.ref(optimizer)
    func = optimizer.step.__func__

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        opt = opt_ref()
        opt._opt_called = True
        return func.__get__(opt, opt.__class__)(*args, **kwargs)

    wrapper._wrapped_by_lr_sched = True
    optimizer.step = wrapper


class LambdaLR(LRScheduler):
    """``lr = initial_lr * lr_lambda(epoch)``, one function per group or one for all."""

    def __init__(self, optimizer: Optimizer, lr_lambda: Callable[[int], float] | list[Callable[[int], float]],
                 last_epoch: int = -1) -> None:
        self.optimizer = optimizer
        if not isinstance(lr_lambda, (list, tuple)):
            self.lr_lambdas = [lr_lambda] * len(optimizer.param_groups)
        else:
            if len(lr_lambda) != len(optimizer.param_groups):
                raise ValueError(f"Expected {len(optimizer.param_groups)} lr_lambdas, but got {len(lr_lambda)}")
            self.lr_lambdas = list(lr_lambda)
        super().__init__(optimizer, last_epoch)

    def state_dict(self) -> dict[str, Any]:
        """Functions and lambdas are not saved (they are code); callable objects save their ``__dict__``."""
        state = {key: value for key, value in self.__dict__.items() if key not in ("optimizer", "lr_lambdas")}
        state["lr_lambdas"] = [None if isinstance(fn, types.FunctionType) else fn.__dict__.copy()
                               for fn in self.lr_lambdas]
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        state = dict(state_dict)
        lr_lambdas = state.pop("lr_lambdas")
        self.__dict__.update(state)
        for fn, saved in zip(self.lr_lambdas, lr_lambdas):
            if saved is not None:
                fn.__dict__.update(saved)

    def get_lr(self) -> list[float]:
        return [base_lr * lmbda(self.last_epoch) for lmbda, base_lr in zip(self.lr_lambdas, self.base_lrs)]


class StepLR(LRScheduler):
    """Multiply the lr by ``gamma`` every ``step_size`` epochs."""

    def __init__(self, optimizer: Optimizer, step_size: int, gamma: float = 0.1, last_epoch: int = -1) -> None:
        self.step_size = step_size
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return _lrs(self.optimizer)
        return [group["lr"] * self.gamma for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self) -> list[float]:
        return [base_lr * self.gamma ** (self.last_epoch // self.step_size) for base_lr in self.base_lrs]


class MultiStepLR(LRScheduler):
    """Multiply the lr by ``gamma`` at each milestone (twice at a milestone given twice)."""

    def __init__(self, optimizer: Optimizer, milestones: Iterable[int], gamma: float = 0.1,
                 last_epoch: int = -1) -> None:
        self.milestones = Counter(milestones)
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """A saved Counter comes back from ``ag.load`` as a plain dict: make it a Counter again."""
        super().load_state_dict(state_dict)
        self.milestones = Counter(self.milestones)

    def get_lr(self) -> list[float]:
        if self.last_epoch not in self.milestones:
            return _lrs(self.optimizer)
        return [group["lr"] * self.gamma ** self.milestones[self.last_epoch] for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self) -> list[float]:
        milestones = sorted(self.milestones.elements())
        return [base_lr * self.gamma ** bisect_right(milestones, self.last_epoch) for base_lr in self.base_lrs]


class ConstantLR(LRScheduler):
    """Scale the lr by ``factor`` for the first ``total_iters`` epochs, then restore it (a warm-up)."""

    def __init__(self, optimizer: Optimizer, factor: float = 1.0 / 3, total_iters: int = 5,
                 last_epoch: int = -1) -> None:
        if factor > 1.0 or factor < 0:
            raise ValueError("Constant multiplicative factor expected to be between 0 and 1.")
        self.factor = factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self.last_epoch == 0:
            return [group["lr"] * self.factor for group in self.optimizer.param_groups]
        if self.last_epoch != self.total_iters:
            return _lrs(self.optimizer)
        return [group["lr"] * (1.0 / self.factor) for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self) -> list[float]:
        return [base_lr * (self.factor + (self.last_epoch >= self.total_iters) * (1 - self.factor))
                for base_lr in self.base_lrs]


class LinearLR(LRScheduler):
    """Scale the lr linearly from ``start_factor`` to ``end_factor`` over ``total_iters`` epochs."""

    def __init__(self, optimizer: Optimizer, start_factor: float = 1.0 / 3, end_factor: float = 1.0,
                 total_iters: int = 5, last_epoch: int = -1) -> None:
        if start_factor > 1.0 or start_factor <= 0:
            raise ValueError("Starting multiplicative factor expected to be greater than 0 and less or equal to 1.")
        if end_factor > 1.0 or end_factor < 0:
            raise ValueError("Ending multiplicative factor expected to be between 0 and 1.")
        self.start_factor = start_factor
        self.end_factor = end_factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self.last_epoch == 0:
            return [group["lr"] * self.start_factor for group in self.optimizer.param_groups]
        if self._is_initial or self.last_epoch > self.total_iters:
            return _lrs(self.optimizer)
        step = 1.0 + (self.end_factor - self.start_factor) / (
            self.total_iters * self.start_factor + (self.last_epoch - 1) * (self.end_factor - self.start_factor))
        return [group["lr"] * step for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self) -> list[float]:
        return [base_lr * (self.start_factor + (self.end_factor - self.start_factor)
                           * min(self.total_iters, self.last_epoch) / self.total_iters)
                for base_lr in self.base_lrs]


class ExponentialLR(LRScheduler):
    """Multiply the lr by ``gamma`` every epoch."""

    def __init__(self, optimizer: Optimizer, gamma: float, last_epoch: int = -1) -> None:
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self._is_initial:
            return _lrs(self.optimizer)
        return [group["lr"] * self.gamma for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self) -> list[float]:
        return [base_lr * self.gamma**self.last_epoch for base_lr in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """``lr = eta_min + (initial_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2``, computed as
    torch's recurrence (and continuing as a cosine past ``T_max``, as torch does)."""

    def __init__(self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0, last_epoch: int = -1) -> None:
        self.T_max = T_max
        self.eta_min = eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        groups = self.optimizer.param_groups
        if self._is_initial:
            return _lrs(self.optimizer)
        if self._step_count == 1 and self.last_epoch > 0:
            return [self.eta_min + (base_lr - self.eta_min) * (1 + math.cos(self.last_epoch * math.pi / self.T_max)) / 2
                    for base_lr in self.base_lrs]
        if (self.last_epoch - 1 - self.T_max) % (2 * self.T_max) == 0:
            return [group["lr"] + (base_lr - self.eta_min) * (1 - math.cos(math.pi / self.T_max)) / 2
                    for base_lr, group in zip(self.base_lrs, groups)]
        return [(1 + math.cos(math.pi * self.last_epoch / self.T_max))
                / (1 + math.cos(math.pi * (self.last_epoch - 1) / self.T_max))
                * (group["lr"] - self.eta_min) + self.eta_min
                for group in groups]

    def _get_closed_form_lr(self) -> list[float]:
        return [self.eta_min + (base_lr - self.eta_min) * (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
                for base_lr in self.base_lrs]


class OneCycleLR(LRScheduler):
    """The 1cycle policy: warm up from ``max_lr / div_factor`` to ``max_lr``, then anneal to
    ``initial_lr / final_div_factor``, cycling momentum (or Adam's beta1) the other way."""

    def __init__(self, optimizer: Optimizer, max_lr: float | list[float], total_steps: int | None = None,
                 epochs: int | None = None, steps_per_epoch: int | None = None, pct_start: float = 0.3,
                 anneal_strategy: Literal["cos", "linear"] = "cos", cycle_momentum: bool = True,
                 base_momentum: float | list[float] = 0.85, max_momentum: float | list[float] = 0.95,
                 div_factor: float = 25.0, final_div_factor: float = 1e4, three_phase: bool = False,
                 last_epoch: int = -1) -> None:
        _check_optimizer(optimizer)
        self.optimizer = optimizer
        if total_steps is not None:
            if not isinstance(total_steps, int) or total_steps <= 0:
                raise ValueError(f"Expected positive integer total_steps, but got {total_steps}")
            self.total_steps = total_steps
        elif epochs is not None and steps_per_epoch is not None:
            if not isinstance(epochs, int) or epochs <= 0:
                raise ValueError(f"Expected positive integer epochs, but got {epochs}")
            if not isinstance(steps_per_epoch, int) or steps_per_epoch <= 0:
                raise ValueError(f"Expected positive integer steps_per_epoch, but got {steps_per_epoch}")
            self.total_steps = epochs * steps_per_epoch
        else:
            raise ValueError("You must define either total_steps OR (epochs AND steps_per_epoch)")
        up = float(pct_start * self.total_steps) - 1
        if three_phase:
            self._schedule_phases = [
                _phase(up, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                _phase(float(2 * pct_start * self.total_steps) - 2, "max_lr", "initial_lr", "base_momentum",
                       "max_momentum"),
                _phase(self.total_steps - 1, "initial_lr", "min_lr", "max_momentum", "max_momentum"),
            ]
        else:
            self._schedule_phases = [
                _phase(up, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                _phase(self.total_steps - 1, "max_lr", "min_lr", "base_momentum", "max_momentum"),
            ]
        if pct_start < 0 or pct_start > 1 or not isinstance(pct_start, float):
            raise ValueError(f"Expected float between 0 and 1 pct_start, but got {pct_start}")
        if anneal_strategy not in ["cos", "linear"]:
            raise ValueError(f"anneal_strategy must be one of 'cos' or 'linear', instead got {anneal_strategy}")
        self._anneal_func_type = anneal_strategy
        max_lrs = _format_param("max_lr", optimizer, max_lr)
        if last_epoch == -1:
            for group, group_max_lr in zip(optimizer.param_groups, max_lrs):
                group["initial_lr"] = group_max_lr / div_factor
                group["max_lr"] = group_max_lr
                group["min_lr"] = group["initial_lr"] / final_div_factor
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
                raise ValueError("optimizer must support momentum or beta1 with `cycle_momentum` option enabled")
            self.use_beta1 = "betas" in optimizer.defaults
            max_momentums = _format_param("max_momentum", optimizer, max_momentum)
            base_momentums = _format_param("base_momentum", optimizer, base_momentum)
            if last_epoch == -1:
                for m_momentum, b_momentum, group in zip(max_momentums, base_momentums, optimizer.param_groups):
                    self._set_momentum(group, m_momentum)
                    group["max_momentum"] = m_momentum
                    group["base_momentum"] = b_momentum
        super().__init__(optimizer, last_epoch)

    def _set_momentum(self, group: dict[str, Any], momentum: float) -> None:
        if self.use_beta1:
            group["betas"] = (momentum, *group["betas"][1:])
        else:
            group["momentum"] = momentum

    def _anneal(self, start: float, end: float, pct: float) -> float:
        if self._anneal_func_type == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def get_lr(self) -> list[float]:
        step_num = self.last_epoch
        if step_num > self.total_steps:
            raise ValueError(
                f"Tried to step {step_num} times. The specified number of total steps is {self.total_steps}")
        lrs = []
        for group in self.optimizer.param_groups:
            start_step = 0.0
            for i, phase in enumerate(self._schedule_phases):
                end_step = phase["end_step"]
                if step_num <= end_step or i == len(self._schedule_phases) - 1:
                    pct = (step_num - start_step) / (end_step - start_step)
                    lrs.append(self._anneal(group[phase["start_lr"]], group[phase["end_lr"]], pct))
                    if self.cycle_momentum:
                        self._set_momentum(
                            group, self._anneal(group[phase["start_momentum"]], group[phase["end_momentum"]], pct))
                    break
                start_step = phase["end_step"]
        return lrs


def _phase(end_step: float, start_lr: str, end_lr: str, start_momentum: str, end_momentum: str) -> dict[str, Any]:
    """One phase of OneCycleLR: the group keys it interpolates between, up to ``end_step``."""
    return {"end_step": end_step, "start_lr": start_lr, "end_lr": end_lr,
            "start_momentum": start_momentum, "end_momentum": end_momentum}


class ReduceLROnPlateau(LRScheduler):
    """Multiply the lr by ``factor`` once a metric has not improved for ``patience`` epochs.

    ``step(metric)`` takes the metric (a number or a one-element tensor); unlike the other
    schedulers it does not step at construction.
    """

    def __init__(self, optimizer: Optimizer, mode: Literal["min", "max"] = "min", factor: float = 0.1,
                 patience: int = 10, threshold: float = 1e-4, threshold_mode: Literal["rel", "abs"] = "rel",
                 cooldown: int = 0, min_lr: list[float] | float = 0, eps: float = 1e-8) -> None:
        if factor >= 1.0:
            raise ValueError("Factor should be < 1.0.")
        self.factor = factor
        _check_optimizer(optimizer)
        self.optimizer = optimizer
        if isinstance(min_lr, (list, tuple)):
            if len(min_lr) != len(optimizer.param_groups):
                raise ValueError(f"expected {len(optimizer.param_groups)} min_lrs, got {len(min_lr)}")
            self.default_min_lr = None
            self.min_lrs = list(min_lr)
        else:
            self.default_min_lr = min_lr
            self.min_lrs = [min_lr] * len(optimizer.param_groups)
        self.patience = patience
        self.cooldown = cooldown
        self.eps = eps
        self.last_epoch = 0
        self._last_lr = _lrs(optimizer)
        self._init_is_better(mode=mode, threshold=threshold, threshold_mode=threshold_mode)
        self._reset()

    def _reset(self) -> None:
        self.best = self.mode_worse
        self.cooldown_counter = 0
        self.num_bad_epochs = 0

    def step(self, metrics: SupportsFloat, epoch: int | None = None) -> None:
        current = float(metrics)
        if epoch is None:
            epoch = self.last_epoch + 1
        else:
            warnings.warn(EPOCH_DEPRECATION_WARNING, UserWarning, stacklevel=2)
        self.last_epoch = epoch
        if self._is_better(current, self.best):
            self.best = current
            self.num_bad_epochs = 0
        else:
            self.num_bad_epochs += 1
        if self.in_cooldown:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0  # bad epochs in cooldown do not count
        if self.num_bad_epochs > self.patience:
            self._reduce_lr()
            self.cooldown_counter = self.cooldown
            self.num_bad_epochs = 0
        self._last_lr = _lrs(self.optimizer)

    def _reduce_lr(self) -> None:
        if len(self.optimizer.param_groups) != len(self.min_lrs):
            if self.default_min_lr is None:
                raise RuntimeError(
                    "The number of param groups in the `optimizer` "
                    f"({len(self.optimizer.param_groups)}) differs "
                    f"from when `ReduceLROnPlateau` was initialized "
                    f"({len(self.min_lrs)}), usually due to a new "
                    "param group being added to the optimizer. Please "
                    "modify the `min_lrs` field to match the length "
                    "of the `optimizer` param groups.")
            self.min_lrs = [self.default_min_lr] * len(self.optimizer.param_groups)
        for i, group in enumerate(self.optimizer.param_groups):
            old_lr = float(group["lr"])
            new_lr = max(old_lr * self.factor, self.min_lrs[i])
            if old_lr - new_lr > self.eps:  # changes smaller than eps are ignored
                group["lr"] = new_lr

    @property
    def in_cooldown(self) -> bool:
        return self.cooldown_counter > 0

    def _is_better(self, a: float, best: float) -> bool:
        if self.mode == "min" and self.threshold_mode == "rel":
            return a < best * (1.0 - self.threshold)
        if self.mode == "min" and self.threshold_mode == "abs":
            return a < best - self.threshold
        if self.mode == "max" and self.threshold_mode == "rel":
            return a > best * (self.threshold + 1.0)
        return a > best + self.threshold

    def _init_is_better(self, mode: str, threshold: float, threshold_mode: str) -> None:
        if mode not in {"min", "max"}:
            raise ValueError("mode " + mode + " is unknown!")
        if threshold_mode not in {"rel", "abs"}:
            raise ValueError("threshold mode " + threshold_mode + " is unknown!")
        self.mode_worse = math.inf if mode == "min" else -math.inf
        self.mode = mode
        self.threshold = threshold
        self.threshold_mode = threshold_mode

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.__dict__.update(state_dict)
        self._init_is_better(mode=self.mode, threshold=self.threshold, threshold_mode=self.threshold_mode)
