"""Attention as torch.nn.functional computes it: scaled_dot_product_attention and
multi_head_attention_forward, composed from matmul, softmax, linear and dropout (torch's math
path; the fused kernels it may pick instead compute the same function).

The two masks say opposite things with a bool: in ``scaled_dot_product_attention`` True means
"may attend", in ``multi_head_attention_forward`` (``attn_mask``, ``key_padding_mask``) True
means "masked out", as in torch. Float masks are added to the scores in both.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from asyncgrad.devices import Device
from asyncgrad.dtypes import numpy_dtype
from asyncgrad.ops._node import plain
from asyncgrad.ops.dropout import dropout
from asyncgrad.ops.elementwise import where
from asyncgrad.ops.linalg import matmul
from asyncgrad.ops.nn import linear
from asyncgrad.ops.reduction import softmax
from asyncgrad.ops.shape import cat
from asyncgrad.tensor import Tensor, scalar_type_name

__all__ = ["multi_head_attention_forward", "scaled_dot_product_attention"]


def _full(shape: tuple[int, ...], value: float, dtype: Any, device: Device) -> Tensor:
    """A constant tensor on ``device`` (no grad), made through the device's backend."""
    return plain(device.backend.full(shape, value, numpy_dtype(dtype)), device)


def _additive(mask: Tensor, masked_when: bool, dtype: Any) -> Tensor:
    """A bool mask as 0 / -inf scores of ``dtype`` (-inf where it equals ``masked_when``); a float one as is."""
    if mask.dtype.kind != "b":
        if mask.dtype.kind != "f":
            raise AssertionError(f"only bool and floating types of masks are supported, got "
                                 f"{scalar_type_name(mask.dtype)}")
        return mask
    zero = _full((), 0.0, dtype, mask.device)
    ninf = _full((), -math.inf, dtype, mask.device)
    return where(mask, ninf, zero) if masked_when else where(mask, zero, ninf)


def _one_more_key(mask: Tensor | None) -> Tensor | None:
    """torch's ``pad(mask, (0, 1))``: one more key position, not masked."""
    if mask is None:
        return None
    return cat([mask, _full(tuple(mask.shape[:-1]) + (1,), 0, mask.dtype, mask.device)], -1)


def _heads(x: Tensor, static: Tensor | None, name: str, batch_heads: int, head_dim: int) -> Tensor:
    """Keys or values (S, N, E) as (N * H, S, head_dim), or the given ``static`` ones in their place."""
    if static is None:
        return x.reshape(x.shape[0], batch_heads, head_dim).transpose(0, 1)
    if static.shape[0] != batch_heads:
        raise AssertionError(f"expecting {name}.size(0) of {batch_heads}, but got {static.shape[0]}")
    if static.shape[2] != head_dim:
        raise AssertionError(f"expecting {name}.size(2) of {head_dim}, but got {static.shape[2]}")
    return static


def _causal(rows: int, cols: int, device: Device) -> Tensor:
    """True on and below the diagonal (torch's ``ones(L, S).tril()``)."""
    backend = device.backend
    positions = plain(backend.arange(max(rows, cols), np.dtype(np.int64)), device)
    return positions[:rows].reshape(rows, 1) >= positions[:cols].reshape(1, cols)


def _repeat_heads(t: Tensor, heads: int) -> Tensor:
    """torch's ``t.repeat_interleave(heads // t.size(-3), -3)`` as a broadcast view and a reshape."""
    groups = t.shape[-3]
    if groups == heads:
        return t
    if heads % groups:
        raise RuntimeError(f"Number of heads in key and value must divide the number of heads in query, got "
                           f"{groups} and {heads}")  # asyncgrad's words: torch's check is an assertion
    wide = t.unsqueeze(-3).expand(*t.shape[:-2], heads // groups, *t.shape[-2:])
    return wide.reshape(*t.shape[:-3], heads, *t.shape[-2:])


def scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor, attn_mask: Tensor | None = None,
                                 dropout_p: float = 0.0, is_causal: bool = False, scale: float | None = None,
                                 enable_gqa: bool = False) -> Tensor:
    """softmax(q k^T * scale + mask) v, torch's reference formula; ``dropout_p`` applies to the weights.
    ``enable_gqa``: grouped-query attention, each key/value head serving ``Hq // Hkv`` query heads."""
    L, S = query.shape[-2], key.shape[-2]
    if enable_gqa and query.ndim >= 3:
        key, value = _repeat_heads(key, query.shape[-3]), _repeat_heads(value, query.shape[-3])
    scale_factor = 1 / math.sqrt(query.shape[-1]) if scale is None else scale
    scores = matmul(query, key.transpose(-2, -1)) * scale_factor
    if is_causal:
        if attn_mask is not None:
            raise RuntimeError("_scaled_dot_product_attention: Explicit attn_mask should not be set when "
                               "is_causal=True")
        scores = scores + _additive(_causal(L, S, query.device), False, scores.dtype)
    if attn_mask is not None:
        scores = scores + _additive(attn_mask, False, scores.dtype)
    weights = softmax(scores, -1)
    if dropout_p > 0.0:
        weights = dropout(weights, dropout_p, True)
    return matmul(weights, value)


def multi_head_attention_forward(query: Tensor, key: Tensor, value: Tensor, embed_dim_to_check: int, num_heads: int,
                                 in_proj_weight: Tensor, in_proj_bias: Tensor | None, bias_k: Any, bias_v: Any,
                                 add_zero_attn: bool, dropout_p: float, out_proj_weight: Tensor,
                                 out_proj_bias: Tensor | None, training: bool = True,
                                 key_padding_mask: Tensor | None = None, need_weights: bool = True,
                                 attn_mask: Tensor | None = None, use_separate_proj_weight: bool = False,
                                 q_proj_weight: Tensor | None = None, k_proj_weight: Tensor | None = None,
                                 v_proj_weight: Tensor | None = None, static_k: Tensor | None = None,
                                 static_v: Tensor | None = None, average_attn_weights: bool = True,
                                 is_causal: bool = False) -> tuple[Tensor, Tensor | None]:
    """torch's function (and argument order) for inputs shaped (L, N, E) (or (L, E) unbatched): one
    packed input projection, or three with ``use_separate_proj_weight`` (keys and values of other
    sizes). ``bias_k``/``bias_v`` (each (1, 1, E)) add one key and value position after the
    projected ones, ``static_k``/``static_v`` ((N * H, S, E / H)) replace the projected keys and
    values, ``add_zero_attn`` adds a zero key and value position last; the masks grow with the keys
    (never masking the added positions), as torch's. ``is_causal`` is a hint that ``attn_mask`` is
    causal, as in torch: the mask is what is applied."""
    is_batched = query.ndim == 3
    if not is_batched:
        query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)
    tgt_len, bsz, embed_dim = query.shape
    src_len = key.shape[0]
    if embed_dim != embed_dim_to_check:
        raise AssertionError(f"was expecting embedding dimension of {embed_dim_to_check}, but got {embed_dim}")
    if key.shape[:2] != value.shape[:2]:
        raise AssertionError(f"key shape {tuple(key.shape)} does not match value shape {tuple(value.shape)}")
    if is_causal and attn_mask is None:
        raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use the Transformer module "
                           "method `generate_square_subsequent_mask` to create this mask.")
    head_dim = embed_dim // num_heads
    if head_dim * num_heads != embed_dim:
        raise AssertionError(f"embed_dim {embed_dim} not divisible by num_heads {num_heads}")

    if not use_separate_proj_weight and query is key and key is value:  # self-attention: one projection, split
        proj = linear(query, in_proj_weight, in_proj_bias)
        q, k, v = (proj[..., i * embed_dim:(i + 1) * embed_dim] for i in range(3))
    else:
        if use_separate_proj_weight:
            if q_proj_weight is None or k_proj_weight is None or v_proj_weight is None:
                raise AssertionError("use_separate_proj_weight is True but q_proj_weight, k_proj_weight or "
                                     "v_proj_weight is None")
            w = [q_proj_weight, k_proj_weight, v_proj_weight]
        else:
            w = [in_proj_weight[i * embed_dim:(i + 1) * embed_dim] for i in range(3)]
        b = [None] * 3 if in_proj_bias is None else [in_proj_bias[i * embed_dim:(i + 1) * embed_dim]
                                                     for i in range(3)]
        q, k, v = (linear(x, wi, bi) for x, wi, bi in zip((query, key, value), w, b))

    mask = None
    if attn_mask is not None:
        mask = _additive(attn_mask, True, q.dtype)
        if attn_mask.ndim == 2:
            if tuple(attn_mask.shape) != (tgt_len, src_len):
                raise RuntimeError(f"The shape of the 2D attn_mask is {tuple(attn_mask.shape)}, but should be "
                                   f"{(tgt_len, src_len)}.")
            mask = mask.unsqueeze(0)
        elif attn_mask.ndim == 3:
            if tuple(attn_mask.shape) != (bsz * num_heads, tgt_len, src_len):
                raise RuntimeError(f"The shape of the 3D attn_mask is {tuple(attn_mask.shape)}, but should be "
                                   f"{(bsz * num_heads, tgt_len, src_len)}.")
        else:
            raise RuntimeError(f"attn_mask's dimension {attn_mask.ndim} is not supported")
    pad = None if key_padding_mask is None else _additive(key_padding_mask, True, q.dtype)

    if bias_k is not None and bias_v is not None:  # one more key and value, for every batch element
        if static_k is not None:
            raise AssertionError("bias cannot be added to static key.")
        if static_v is not None:
            raise AssertionError("bias cannot be added to static value.")
        k = cat([k, bias_k.repeat(1, bsz, 1)])
        v = cat([v, bias_v.repeat(1, bsz, 1)])
        mask, pad = _one_more_key(mask), _one_more_key(pad)
    elif bias_k is not None or bias_v is not None:
        raise AssertionError()  # torch's bare assertion: both or neither

    # (L, N, E) -> (N * H, L, head_dim)
    q = q.reshape(tgt_len, bsz * num_heads, head_dim).transpose(0, 1)
    k = _heads(k, static_k, "static_k", bsz * num_heads, head_dim)
    v = _heads(v, static_v, "static_v", bsz * num_heads, head_dim)
    if add_zero_attn:
        k = cat([k, _full((bsz * num_heads, 1, head_dim), 0, k.dtype, k.device)], 1)
        v = cat([v, _full((bsz * num_heads, 1, head_dim), 0, v.dtype, v.device)], 1)
        mask, pad = _one_more_key(mask), _one_more_key(pad)
    src_len = k.shape[1]

    if pad is not None:
        if tuple(pad.shape) != (bsz, src_len):
            raise AssertionError(f"expecting key_padding_mask shape of {(bsz, src_len)}, but got "
                                 f"{tuple(pad.shape)}")
        pad = pad.reshape(bsz, 1, 1, src_len).expand(bsz, num_heads, 1, src_len).reshape(bsz * num_heads, 1, src_len)
        mask = pad if mask is None else mask + pad

    scores = matmul(q * math.sqrt(1.0 / head_dim), k.transpose(-2, -1))
    if mask is not None:
        scores = scores + mask
    weights = softmax(scores, -1)
    if training and dropout_p > 0.0:
        weights = dropout(weights, dropout_p, True)
    out = matmul(weights, v).transpose(0, 1).reshape(tgt_len * bsz, embed_dim)
    out = linear(out, out_proj_weight, out_proj_bias).reshape(tgt_len, bsz, embed_dim)
    if not is_batched:
        out = out.squeeze(1)
    if not need_weights:
        return out, None
    weights = weights.reshape(bsz, num_heads, tgt_len, src_len)
    if average_attn_weights:
        weights = weights.mean(1)
    if not is_batched:
        weights = weights.squeeze(0)
    return out, weights
