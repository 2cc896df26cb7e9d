"""AdamW: Adam with the weight decay taken off the parameter, not added to the gradient."""

from __future__ import annotations

from asyncgrad.optim.adam import Adam
from asyncgrad.optim.optimizer import ParamsT


class AdamW(Adam):
    """torch.optim.AdamW: ``p *= 1 - lr * wd`` before the Adam update, so the decay does not
    pass through the moments (Loshchilov & Hutter). As in torch it is Adam with
    ``decoupled_weight_decay=True`` and a default ``weight_decay`` of 1e-2."""

    def __init__(self, params: ParamsT, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 1e-2, amsgrad: bool = False, *,
                 maximize: bool = False, foreach: bool | None = None) -> None:
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize,
                         decoupled_weight_decay=True)
