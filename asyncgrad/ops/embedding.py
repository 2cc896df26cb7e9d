"""``embedding``: rows of a weight picked by integer indices (torch's ``EmbeddingBackward0``)."""

from __future__ import annotations

from asyncgrad._validate import tensor_arg
from asyncgrad.graph.grad_mode import no_grad
from asyncgrad.ops._node import OpNode, plain, record, recording, same_device
from asyncgrad.tensor import Tensor, scalar_type_name


class EmbeddingBackward0(OpNode):
    """The gradient rows added back at their indices (repeats add up), none at ``padding_idx``:
    ``keep`` is 0 on rows whose index is the padding index, else 1 (None without one). Written
    with ``F.index_add``, which is itself differentiable, so second order works."""

    __slots__ = ("shape", "index")

    def backward(self, F, g):
        (keep,) = F.unpack(self)
        if keep is not None:
            g = g * keep
        return (F.index_add(self.shape, (self.index, False), g),)


def embedding(input: Tensor, weight: Tensor, padding_idx: int | None = None, max_norm: float | None = None,
              norm_type: float = 2.0, scale_grad_by_freq: bool = False, sparse: bool = False) -> Tensor:
    """torch.nn.functional.embedding: ``weight[input]``. ``max_norm`` renormalises the looked-up
    rows of ``weight`` in place first, as torch does; ``scale_grad_by_freq`` and ``sparse`` are
    not supported (NotImplementedError)."""
    tensor_arg(input, "embedding", "indices", 2)
    tensor_arg(weight, "embedding", "weight", 1)
    if scale_grad_by_freq or sparse:
        raise NotImplementedError("embedding: scale_grad_by_freq and sparse gradients are not supported by asyncgrad")
    if input.dtype.kind not in "iu":
        raise RuntimeError("Expected tensor for argument #1 'indices' to have one of the following scalar types: "
                           f"Long, Int; but got {scalar_type_name(input.dtype)} instead (while checking arguments "
                           "for embedding)")
    if weight.ndim != 2:
        raise RuntimeError("'weight' must be 2-D")
    dev = same_device(input, weight)
    xp = dev.xp
    rows = weight.shape[0]
    if padding_idx is not None:
        if not -rows <= padding_idx < rows:
            raise AssertionError("Padding_idx must be within num_embeddings")
        padding_idx %= rows
    idx = input.data
    if idx.size and (bool(xp.any(idx < 0)) or bool(xp.any(idx >= rows))):
        raise IndexError("index out of range in self")
    if max_norm is not None:
        with no_grad():
            picked = weight[input]
            norms = ((picked.abs() ** norm_type).sum(-1, keepdim=True)) ** (1.0 / norm_type)
            scale = (norms > max_norm) * (max_norm / (norms + 1e-7) - 1) + 1
            weight[input] = picked * scale
    out = dev.backend.getitem(weight.data, idx)
    keep = None
    if padding_idx is not None and recording(weight):
        keep = plain(dev.backend.astype(xp.reshape(idx != padding_idx, idx.shape + (1,)), weight.dtype), dev)
    return record(EmbeddingBackward0, (weight,), out, dev, weight.shape, dev.backend.copy(idx), saved=(keep,),
                  work=out.size)
