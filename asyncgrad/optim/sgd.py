"""SGD with momentum, dampening, Nesterov and weight decay, in torch's exact update order."""

from __future__ import annotations

from asyncgrad.graph.grad_mode import no_grad
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
        # Note [SGD's per-parameter work]: per parameter, torch's _single_tensor_sgd runs
        # ``buf.mul_(momentum).add_(grad, alpha=1 - dampening)`` and ``param.add_(buf, alpha=-lr)``,
        # three in-place ops and no temporary tensor. The update here was ``param.sub_(buf * lr)``:
        # an out-of-place ``mul`` through ``record`` (a Tensor and its bookkeeping) before the
        # in-place op. ``param.sub_(buf, alpha=lr)`` computes the same ``param - buf * lr`` (the
        # in-place path multiplies by alpha first, as the out-of-place op rounds it: Note [In place
        # without a temporary] in ops/inplace.py), bit for bit, with no Tensor made. A number lr
        # only; a Tensor lr keeps the Tensor product. The group's settings are read once per group,
        # not per parameter (``python -m benchmarks.train_loop`` shows the step;
        # tests/optim/test_step_overhead.py checks the results against torch's).
        state = self.state
        for group in self.param_groups:
            lr, momentum, weight_decay = group["lr"], group["momentum"], group["weight_decay"]
            damped, nesterov = 1 - group["dampening"], group["nesterov"]
            number_lr = type(lr) in (int, float)
            for param, grad in self._grads(group):
                if weight_decay != 0:
                    grad = grad + param * weight_decay
                if momentum != 0:
                    param_state = state.get(param)
                    if param_state is None:
                        param_state = state[param] = {}
                    buf = param_state.get("momentum_buffer")
                    if buf is None:
                        buf = param_state["momentum_buffer"] = grad.clone()
                    else:
                        buf.mul_(momentum).add_(grad, alpha=damped)
                    grad = grad + buf * momentum if nesterov else buf
                if number_lr:
                    param.sub_(grad, alpha=lr)
                else:
                    param.sub_(grad * lr)
