"""Adam (and, through ``decoupled_weight_decay``, AdamW) in torch's exact update order."""

from __future__ import annotations

from asyncgrad.factories import zeros_like
from asyncgrad.graph.grad_mode import no_grad
from asyncgrad.optim.optimizer import Optimizer, ParamsT


class Adam(Optimizer):
    """``p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)``.

    Each line of ``step`` is one line of torch's single-tensor path (``m`` by lerp_, ``v`` by
    mul_ + addcmul_, ``denom`` as sqrt, divided and shifted in place, the update as addcdiv_ with
    ``-step_size`` folded into the numerator), so float64 results agree with torch.optim.Adam to
    rounding, step after step (torch fuses lerp's and addcmul's last multiply-add: Note [In place
    without a temporary] in ops/inplace.py, where the in-place ops make one temporary each, ``denom``
    the only other, where torch makes it from two). ``amsgrad``
    normalises by the running maximum of ``v``; ``decoupled_weight_decay`` shrinks the
    parameter itself instead of adding ``wd * p`` to the gradient (that is AdamW).
    ``foreach`` is accepted and ignored, so that torch code ports unchanged: there is one code path.
    """

    def __init__(self, params: ParamsT, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.0, amsgrad: bool = False, *,
                 foreach: bool | None = None, maximize: bool = False,
                 decoupled_weight_decay: bool = False) -> None:
        if not 0.0 <= lr:  # torch's order of operands, which its TypeError for a str lr shows
            raise ValueError(f"Invalid learning rate: {lr}")
        if eps < 0.0:
            raise ValueError(f"Invalid epsilon value: {eps}")
        for index, beta in enumerate(betas):
            if not 0.0 <= beta < 1.0:
                raise ValueError(f"Invalid beta parameter at index {index}: {beta}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                        maximize=maximize, decoupled_weight_decay=decoupled_weight_decay)
        super().__init__(params, defaults)

    @no_grad()
    def step(self) -> None:
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            lr, weight_decay, amsgrad = group["lr"], group["weight_decay"], group["amsgrad"]
            for param, grad in self._grads(group):
                state = self.state.setdefault(param, {})
                if not state:
                    state.update(step=0, exp_avg=zeros_like(param), exp_avg_sq=zeros_like(param))
                    if amsgrad:
                        state["max_exp_avg_sq"] = zeros_like(param)
                state["step"] += 1
                step, exp_avg, exp_avg_sq = state["step"], state["exp_avg"], state["exp_avg_sq"]
                if weight_decay != 0:
                    if group["decoupled_weight_decay"]:
                        param.mul_(1 - lr * weight_decay)
                    else:
                        grad = grad.add(param, alpha=weight_decay)
                exp_avg.lerp_(grad, 1 - beta1)
                exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                step_size = lr / (1 - beta1**step)
                bias_correction2_sqrt = (1 - beta2**step) ** 0.5
                if amsgrad:
                    max_sq = state["max_exp_avg_sq"]
                    max_sq.copy_(max_sq.maximum(exp_avg_sq))
                    denom = max_sq.sqrt().div_(bias_correction2_sqrt).add_(group["eps"])
                else:
                    denom = exp_avg_sq.sqrt().div_(bias_correction2_sqrt).add_(group["eps"])
                param.addcdiv_(exp_avg, denom, value=-step_size)
