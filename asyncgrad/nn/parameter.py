"""Parameter: the leaf tensor type that marks what a Module trains."""

from __future__ import annotations

from typing import Iterable

from asyncgrad.factories import empty
from asyncgrad.graph.grad_mode import no_grad
from asyncgrad.tensor import Tensor


class Parameter(Tensor):
    """A leaf that requires grad and that ``Module`` registers when assigned as an attribute.

    As in torch it shares memory and the version counter with the tensor it wraps, so
    ``Parameter(t)`` costs no copy and in-place updates show through both.
    """

    __slots__ = ()

    def __init__(self, data: Tensor | None = None, requires_grad: bool = True) -> None:
        source = empty(0) if data is None else data
        if not isinstance(source, Tensor):
            raise TypeError(f"Parameter expects a Tensor, got {type(source).__name__}")
        self.data = source.data
        self.device = source.device
        self._requires_grad = False
        self.grad_fn = None
        self.output_nr = 0
        self._grad = None
        self._vc = source._vc
        self._extra = None
        self.requires_grad_(requires_grad)

    def __deepcopy__(self, memo: dict) -> Parameter:
        """torch's: a Parameter over a copy of the value, with ``requires_grad``; no grad, no hooks."""
        if id(self) in memo:
            return memo[id(self)]
        result = memo[id(self)] = type(self)(self.detach().clone(), self._requires_grad)
        return result

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()


def zero_grads(params: Iterable[Tensor], set_to_none: bool) -> None:
    """Module.zero_grad and Optimizer.zero_grad: drop the grads, or zero them in place as torch does."""
    for p in params:
        grad = p.grad
        if grad is None:
            continue
        if set_to_none:
            p.grad = None
            continue
        if grad.grad_fn is not None:
            grad.detach_()
        else:
            grad.requires_grad_(False)
        with no_grad():
            grad.zero_()
