"""The Dropout layer, over ``asyncgrad.ops.dropout``."""

from __future__ import annotations

from asyncgrad.nn.module import Module
from asyncgrad.ops.dropout import (
    alpha_dropout,
    check_p,
    dropout,
    dropout1d,
    dropout2d,
    dropout3d,
    feature_alpha_dropout,
)
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


class _DropoutNd(Dropout):
    _fn = staticmethod(dropout)

    def forward(self, input: Tensor) -> Tensor:
        return self._fn(input, self.p, self.training, self.inplace)


class Dropout1d(_DropoutNd):
    _fn = staticmethod(dropout1d)


class Dropout2d(_DropoutNd):
    _fn = staticmethod(dropout2d)


class Dropout3d(_DropoutNd):
    _fn = staticmethod(dropout3d)


class AlphaDropout(_DropoutNd):
    _fn = staticmethod(alpha_dropout)


class FeatureAlphaDropout(_DropoutNd):
    _fn = staticmethod(feature_alpha_dropout)


__all__ += ["AlphaDropout", "Dropout1d", "Dropout2d", "Dropout3d", "FeatureAlphaDropout"]
