"""SGD with momentum, dampening, Nesterov and weight decay, in torch's exact update order."""

from __future__ import annotations

from asyncgrad.autograd.grad_mode import no_grad
from asyncgrad.optim.optimizer import Optimizer, ParamsT


class SGD(Optimizer):
    """``buf = momentum * buf + (1 - dampening) * grad`` (the first buf is the grad), ``p -= lr * buf``.

    ``maximize`` ascends (the gradient is negated first, as torch does); ``foreach`` is accepted and ignored,
    so that torch code ports unchanged: there is one code path.
    """

    def __init__(self, params: ParamsT, lr: float = 1e-3, momentum: float = 0.0, dampening: float = 0.0,
                 weight_decay: float = 0.0, nesterov: bool = False, *, maximize: bool = False,
                 foreach: bool | None = None) -> None:
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay, nesterov=nesterov,
                        maximize=maximize)
        super().__init__(params, defaults)

    @no_grad()
    def step(self) -> None:
        for group in self.param_groups:
            lr, momentum, weight_decay = group["lr"], group["momentum"], group["weight_decay"]
            for param, grad in self._grads(group):
                if weight_decay != 0:
                    grad = grad + param * weight_decay
                if momentum != 0:
                    state = self.state.setdefault(param, {})
                    buf = state.get("momentum_buffer")
                    if buf is None:
                        buf = state["momentum_buffer"] = grad.clone()
                    else:
                        buf.mul_(momentum).add_(grad, alpha=1 - group["dampening"])
                    grad = grad + buf * momentum if group["nesterov"] else buf
                param.sub_(grad * lr)
