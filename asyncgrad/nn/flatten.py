"""Shape layers (``Flatten``, ``Unflatten``, ``Identity``) and ``Embedding``."""

from __future__ import annotations

from typing import Any

from asyncgrad.factories import randn
from asyncgrad.graph.grad_mode import no_grad
from asyncgrad.nn.module import Module
from asyncgrad.nn.parameter import Parameter
from asyncgrad.ops.embedding import embedding
from asyncgrad.ops.shape import flatten
from asyncgrad.tensor import Tensor


class Identity(Module):
    """Returns its input; takes and ignores any constructor arguments, as torch's does."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()

    def forward(self, input: Any) -> Any:
        return input


class Flatten(Module):
    def __init__(self, start_dim: int = 1, end_dim: int = -1) -> None:
        super().__init__()
        self.start_dim = start_dim
        self.end_dim = end_dim

    def forward(self, input: Tensor) -> Tensor:
        return flatten(input, self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Dimension ``dim`` split into ``unflattened_size`` (one entry may be -1)."""

    def __init__(self, dim: int, unflattened_size: Any) -> None:
        super().__init__()
        if not isinstance(unflattened_size, (tuple, list)) or not all(isinstance(n, int) for n in unflattened_size):
            raise TypeError("unflattened_size must be tuple of ints, but found type "
                            f"{type(unflattened_size).__name__}")
        self.dim = dim
        self.unflattened_size = tuple(unflattened_size)

    def forward(self, input: Tensor) -> Tensor:
        dim = self.dim % input.ndim if input.ndim else 0
        return input.reshape(input.shape[:dim] + self.unflattened_size + input.shape[dim + 1:])

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"


class Embedding(Module):
    """A lookup table ``weight`` (N(0, 1) initialised, the ``padding_idx`` row zeroed, as torch's)."""

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx: int | None = None,
                 max_norm: float | None = None, norm_type: float = 2.0, scale_grad_by_freq: bool = False,
                 sparse: bool = False, _weight: Tensor | None = None, _freeze: bool = False, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        if padding_idx is not None:
            if padding_idx > 0 and padding_idx >= num_embeddings:
                raise AssertionError("Padding_idx must be within num_embeddings")
            if padding_idx < 0:
                if padding_idx < -num_embeddings:
                    raise AssertionError("Padding_idx must be within num_embeddings")
                padding_idx += num_embeddings
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.padding_idx = padding_idx
        self.max_norm = max_norm
        self.norm_type = norm_type
        self.scale_grad_by_freq = scale_grad_by_freq
        self.sparse = sparse
        if _weight is None:
            with no_grad():
                weight = randn(num_embeddings, embedding_dim, dtype=dtype, device=device)
                if padding_idx is not None:
                    weight[padding_idx] = 0.0
        else:
            weight = _weight
        self.weight = Parameter(weight, requires_grad=not _freeze)

    def forward(self, input: Tensor) -> Tensor:
        return embedding(input, self.weight, self.padding_idx, self.max_norm, self.norm_type,
                         self.scale_grad_by_freq, self.sparse)

    def extra_repr(self) -> str:
        text = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.padding_idx is not None:
            text += f", padding_idx={self.padding_idx}"
        if self.max_norm is not None:
            text += f", max_norm={self.max_norm}"
        return text
