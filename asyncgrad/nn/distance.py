"""Distance layers: ``PairwiseDistance`` and ``CosineSimilarity`` over their functions."""

from __future__ import annotations

from asyncgrad.nn.loss import cosine_similarity, pairwise_distance
from asyncgrad.nn.module import Module
from asyncgrad.tensor import Tensor

__all__ = ["CosineSimilarity", "PairwiseDistance"]


class PairwiseDistance(Module):
    def __init__(self, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False) -> None:
        super().__init__()
        self.norm = p
        self.eps = eps
        self.keepdim = keepdim

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        return pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)


class CosineSimilarity(Module):
    def __init__(self, dim: int = 1, eps: float = 1e-8) -> None:
        super().__init__()
        self.dim = dim
        self.eps = eps

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        return cosine_similarity(x1, x2, self.dim, self.eps)
