"""RMSprop with momentum and the centered variant, in torch's exact update order."""

from __future__ import annotations

from asyncgrad.factories import zeros_like
from asyncgrad.graph.grad_mode import no_grad
from asyncgrad.optim.optimizer import Optimizer, ParamsT


class RMSprop(Optimizer):
    """``v = alpha * v + (1 - alpha) * g^2``, ``p -= lr * g / (sqrt(v) + eps)``.

    ``centered`` divides by the estimated standard deviation ``sqrt(v - mean(g)^2)`` instead;
    ``momentum > 0`` accumulates ``g / (sqrt(v) + eps)`` in a buffer and steps by that. Each
    line is one of torch's single-tensor path (lerp_ for the mean, addcmul_ / addcdiv_ in place,
    Note [In place without a temporary] in ops/inplace.py), so float64 results agree with
    torch.optim.RMSprop to rounding. ``foreach`` is accepted and ignored.
    """

    def __init__(self, params: ParamsT, lr: float = 1e-2, alpha: float = 0.99, eps: float = 1e-8,
                 weight_decay: float = 0.0, momentum: float = 0.0, centered: bool = False,
                 foreach: bool | None = None, maximize: bool = False) -> None:
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if eps < 0.0:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if alpha < 0.0:
            raise ValueError(f"Invalid alpha value: {alpha}")
        defaults = dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps, centered=centered,
                        weight_decay=weight_decay, maximize=maximize)
        super().__init__(params, defaults)

    @no_grad()
    def step(self) -> None:
        for group in self.param_groups:
            lr, alpha, eps, momentum = group["lr"], group["alpha"], group["eps"], group["momentum"]
            for param, grad in self._grads(group):
                state = self.state.setdefault(param, {})
                if not state:
                    state.update(step=0, square_avg=zeros_like(param))
                    if momentum > 0:
                        state["momentum_buffer"] = zeros_like(param)
                    if group["centered"]:
                        state["grad_avg"] = zeros_like(param)
                state["step"] += 1
                if group["weight_decay"] != 0:
                    grad = grad.add(param, alpha=group["weight_decay"])
                square_avg = state["square_avg"]
                square_avg.mul_(alpha).addcmul_(grad, grad, value=1 - alpha)
                if group["centered"]:
                    grad_avg = state["grad_avg"]
                    grad_avg.lerp_(grad, 1 - alpha)
                    avg = square_avg.addcmul(grad_avg, grad_avg, value=-1).sqrt_()
                else:
                    avg = square_avg.sqrt()
                avg.add_(eps)
                if momentum > 0:
                    buf = state["momentum_buffer"]
                    buf.mul_(momentum).addcdiv_(grad, avg)
                    param.add_(buf, alpha=-lr)
                else:
                    param.addcdiv_(grad, avg, value=-lr)
