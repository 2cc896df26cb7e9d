"""The Dropout layer, over ``asyncgrad.ops.dropout``."""

from __future__ import annotations

from asyncgrad.nn.module import Module
from asyncgrad.ops.dropout import check_p, dropout
from asyncgrad.tensor import Tensor

__all__ = ["Dropout"]


class Dropout(Module):
    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        check_p(p)
        self.p = p
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return dropout(input, self.p, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"
