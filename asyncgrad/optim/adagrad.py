"""Adagrad with learning-rate decay, in torch's exact update order."""

from __future__ import annotations

from typing import Any

from asyncgrad.factories import full_like
from asyncgrad.graph.grad_mode import no_grad
from asyncgrad.optim.optimizer import Optimizer, ParamsT
from asyncgrad.tensor import Tensor


class Adagrad(Optimizer):
    """``sum += g^2``, ``p -= lr / (1 + (t - 1) * lr_decay) * g / (sqrt(sum) + eps)``.

    As in torch the state (``step`` and the ``sum`` filled with ``initial_accumulator_value``)
    is created in the constructor, not at the first step, so ``state_dict()`` shows it at once.
    ``foreach`` is accepted and ignored.
    """

    def __init__(self, params: ParamsT, lr: float = 1e-2, lr_decay: float = 0.0, weight_decay: float = 0.0,
                 initial_accumulator_value: float = 0.0, eps: float = 1e-10, foreach: bool | None = None, *,
                 maximize: bool = False) -> None:
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if lr_decay < 0.0:
            raise ValueError(f"Invalid lr_decay value: {lr_decay}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if initial_accumulator_value < 0.0:
            raise ValueError(f"Invalid initial_accumulator_value value: {initial_accumulator_value}")
        if eps < 0.0:
            raise ValueError(f"Invalid epsilon value: {eps}")
        defaults = dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                        initial_accumulator_value=initial_accumulator_value, maximize=maximize)
        super().__init__(params, defaults)
        for group in self.param_groups:
            for param in group["params"]:
                self._init_state(param, group)

    def _init_state(self, param: Tensor, group: dict[str, Any]) -> dict[str, Any]:
        state = self.state[param] = {"step": 0, "sum": full_like(param, group["initial_accumulator_value"])}
        return state

    @no_grad()
    def step(self) -> None:
        for group in self.param_groups:
            for param, grad in self._grads(group):
                state = self.state.get(param) or self._init_state(param, group)  # a group added later
                state["step"] += 1
                if group["weight_decay"] != 0:
                    grad = grad.add(param, alpha=group["weight_decay"])
                clr = group["lr"] / (1 + (state["step"] - 1) * group["lr_decay"])
                state["sum"].addcmul_(grad, grad, value=1)
                std = state["sum"].sqrt().add_(group["eps"])
                param.addcdiv_(grad, std, value=-clr)  # in place, one temporary: Note [In place without a temporary]
