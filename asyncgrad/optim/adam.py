"""Adam with bias correction and L2 weight decay, in torch's exact update order."""

from __future__ import annotations

import math

from asyncgrad.autograd.grad_mode import no_grad
from asyncgrad.factories import zeros_like
from asyncgrad.optim.optimizer import Optimizer, ParamsT


class Adam(Optimizer):
    """``p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)``.

    The moments are updated as torch's single-tensor path does (``m`` by lerp, ``v`` by
    mul + addcmul), so float64 results agree with torch.optim.Adam to rounding.
    """

    def __init__(self, params: ParamsT, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.0) -> None:
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if eps < 0.0:
            raise ValueError(f"Invalid epsilon value: {eps}")
        for index, beta in enumerate(betas):
            if not 0.0 <= beta < 1.0:
                raise ValueError(f"Invalid beta parameter at index {index}: {beta}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay))

    @no_grad()
    def step(self) -> None:
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for param in group["params"]:
                if param.grad is None:
                    continue
                grad = param.grad
                state = self.state.setdefault(param, {})
                if not state:
                    state.update(step=0, exp_avg=zeros_like(param), exp_avg_sq=zeros_like(param))
                state["step"] += 1
                step, exp_avg, exp_avg_sq = state["step"], state["exp_avg"], state["exp_avg_sq"]
                if group["weight_decay"] != 0:
                    grad = grad + param * group["weight_decay"]
                exp_avg.add_((grad - exp_avg) * (1 - beta1))
                exp_avg_sq.mul_(beta2).add_(grad * (1 - beta2) * grad)
                step_size = group["lr"] / (1 - beta1**step)
                denom = exp_avg_sq.sqrt() / math.sqrt(1 - beta2**step) + group["eps"]
                param.sub_(exp_avg / denom * step_size)
