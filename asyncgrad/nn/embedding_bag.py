"""``embedding_bag`` and the ``EmbeddingBag`` layer: the rows ``embedding`` looks up, summed,
averaged or maximised per bag, without the ``(bags, length, dim)`` intermediate for sum and mean.

A bag is a row of a 2-D ``input``, or the stretch of a 1-D ``input`` between consecutive
``offsets``. For sum and mean the reduction is one product with a ``(bags, indices)`` matrix of
host-known weights (1, ``1 / count``, times ``per_sample_weights`` where given), so the
gradients are the product's and the lookup's; max is a masked ``amax``. ``padding_idx``
entries belong to no bag (a mean does not count them); an empty bag gives zeros, as torch's.
"""

from __future__ import annotations

from typing import Any

from asyncgrad._validate import tensor_arg
from asyncgrad.factories import randn, tensor
from asyncgrad.graph.grad_mode import no_grad
from asyncgrad.nn.module import Module
from asyncgrad.nn.parameter import Parameter
from asyncgrad.ops.elementwise import where
from asyncgrad.ops.embedding import embedding
from asyncgrad.tensor import Tensor

__all__ = ["EmbeddingBag", "embedding_bag"]


def _bags(input: Tensor, offsets: Tensor | None, include_last_offset: bool) -> tuple[list[int], list[tuple[int, int]]]:
    """The flat indices and each bag's ``[start, end)`` in them."""
    values = [int(v) for v in input.detach().cpu().reshape(-1).tolist()]
    if input.ndim == 2:
        if offsets is not None:
            raise ValueError("if input is 2D, then offsets has to be None, as input is treated is a mini-batch of "
                             "fixed length sequences. However, found offsets of type Tensor")
        n = input.shape[1]
        return values, [(b * n, (b + 1) * n) for b in range(input.shape[0])]
    if input.ndim != 1:
        raise ValueError(f"input has to be 1D or 2D Tensor, but got Tensor of dimension {input.ndim}")
    if offsets is None:
        raise ValueError("offsets has to be a 1D Tensor but got None")
    if offsets.ndim != 1:
        raise ValueError("offsets has to be a 1D Tensor")
    starts = [int(v) for v in offsets.detach().cpu().tolist()]
    if starts and starts[0] != 0:
        raise RuntimeError(f"offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to start from "
                           f"position 0. However, got {starts[0]}")
    if starts and starts[-1] > len(values):
        raise RuntimeError(f"offsets[-1] can not be greater than input's length ({len(values)}), but got "
                           f"offsets[-1] of {starts[-1]}")
    if include_last_offset:  # one offset more than bags; the last bag still runs to the input's end (torch's)
        starts = starts[:-1]
    ends = starts[1:] + [len(values)]
    return values, list(zip(starts, ends))


def embedding_bag(input: Tensor, weight: Tensor, offsets: Tensor | None = None, max_norm: float | None = None,
                  norm_type: float = 2, scale_grad_by_freq: bool = False, mode: str = "mean", sparse: bool = False,
                  per_sample_weights: Tensor | None = None, include_last_offset: bool = False,
                  padding_idx: int | None = None) -> Tensor:
    """torch.nn.functional.embedding_bag: ``(bags, dim)``, each bag's looked-up rows reduced by ``mode``."""
    tensor_arg(input, "embedding_bag", "input", 1)
    tensor_arg(weight, "embedding_bag", "weight", 2)
    if mode not in ("sum", "mean", "max"):
        raise ValueError(f"mode has to be one of sum, mean or max, but got {mode}")
    if per_sample_weights is not None:
        if mode != "sum":
            raise NotImplementedError(f"embedding_bag: per_sample_weights was not None. per_sample_weights is only "
                                      f"supported for mode='sum' (got mode='{mode}'). Please open a feature request "
                                      "on GitHub.")
        if tuple(per_sample_weights.shape) != tuple(input.shape):
            raise ValueError(f"embedding_bag: If per_sample_weights ({list(per_sample_weights.shape)}) is not None, "
                             f"then it must have the same shape as the input ({list(input.shape)})")
    rows = weight.shape[0]
    if padding_idx is not None:
        if not -rows <= padding_idx < rows:
            raise AssertionError("padding_idx must be within the number of embeddings")
        padding_idx %= rows
    values, bags = _bags(input, offsets, include_last_offset)
    flat = input.reshape(-1)
    looked_up = embedding(flat, weight, max_norm=max_norm, norm_type=norm_type,
                          scale_grad_by_freq=scale_grad_by_freq, sparse=sparse)  # (n, dim)
    kept = [[1.0 if start <= j < end and values[j] != padding_idx else 0.0 for j in range(len(values))]
            for start, end in bags]
    if mode == "max":
        mask = tensor(kept, dtype=weight.dtype, device=weight.device) > 0  # (bags, n)
        if not values:
            return weight.sum() * 0 + tensor([[0.0] * weight.shape[1]] * len(bags), dtype=weight.dtype,
                                               device=weight.device)
        picked = where(mask.unsqueeze(-1), looked_up.unsqueeze(0), -float("inf")).amax(1)
        empty = tensor([[sum(row) == 0] for row in kept], device=weight.device)
        return where(empty, 0.0, picked)
    if mode == "mean":
        kept = [[v / max(sum(row), 1.0) for v in row] for row in kept]
    matrix = tensor(kept, dtype=weight.dtype, device=weight.device).reshape(len(bags), len(values))
    if per_sample_weights is not None:
        matrix = matrix * per_sample_weights.reshape(1, -1)
    return matrix @ looked_up


class EmbeddingBag(Module):
    """torch.nn.EmbeddingBag: weight ``(num_embeddings, embedding_dim)`` drawn from N(0, 1)."""

    def __init__(self, num_embeddings: int, embedding_dim: int, max_norm: float | None = None,
                 norm_type: float = 2.0, scale_grad_by_freq: bool = False, mode: str = "mean", sparse: bool = False,
                 _weight: Tensor | None = None, include_last_offset: bool = False, padding_idx: int | None = None,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.max_norm = max_norm
        self.norm_type = norm_type
        self.scale_grad_by_freq = scale_grad_by_freq
        self.mode = mode
        self.sparse = sparse
        self.include_last_offset = include_last_offset
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise AssertionError("padding_idx must be within num_embeddings")
            padding_idx %= num_embeddings
        self.padding_idx = padding_idx
        with no_grad():
            w = randn(num_embeddings, embedding_dim, dtype=dtype, device=device) if _weight is None else _weight
            if padding_idx is not None and _weight is None:
                w[padding_idx] = 0.0
        self.weight = Parameter(w)

    def forward(self, input: Tensor, offsets: Tensor | None = None,
                per_sample_weights: Tensor | None = None) -> Tensor:
        return embedding_bag(input, self.weight, offsets, self.max_norm, self.norm_type, self.scale_grad_by_freq,
                             self.mode, self.sparse, per_sample_weights, self.include_last_offset, self.padding_idx)

    def extra_repr(self) -> str:
        text = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.max_norm is not None:
            text += f", max_norm={self.max_norm}"
        return text + f", mode='{self.mode}'" + (f", padding_idx={self.padding_idx}" if self.padding_idx is not None
                                                  else "")
