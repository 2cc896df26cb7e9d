"""Convolution: ``conv1d``/``conv2d`` (torch's ``ConvolutionBackward0``) through im2col and BLAS."""

from __future__ import annotations

import math
from typing import Any

from asyncgrad._validate import tensor_arg
from asyncgrad.devices import cpu
from asyncgrad.graph.node import hooks_in_use, saved_hooks
from asyncgrad.ops._node import ArrayMath, OpNode, record, recording, same_device
from asyncgrad.ops.linalg import MATMUL_WORK_PER_MAC
from asyncgrad.ops.shape import squeeze, unsqueeze
from asyncgrad.ops.windows import Params, conv_forward_columns, conv_weight_grad, convolution, out_size
from asyncgrad.tensor import Tensor, scalar_type_name

# Note [Three convolutions]: a convolution ``y = conv(x, w)`` is bilinear, and so are its two
# adjoints, ``dx = conv_T(g, w)`` (the transposed convolution) and ``dw = wgrad(x, g)``. Each
# one's derivatives are the other two: from ``<u, conv_T(g, w)> = <conv(u, w), g>`` and
# ``<u, wgrad(x, g)> = <conv(x, u), g>``,
#
# * conv(x, w):    d/dx = conv_T(g, w),      d/dw = wgrad(x, g)
# * conv_T(g0, w): d/dg0 = conv(g, w),       d/dw = wgrad(g, g0)
# * wgrad(x, g0):  d/dx = conv_T(g0, g),     d/dg0 = conv(x, g)
#
# So one node class with a ``kind`` (``"forward"``, ``"input"``, ``"weight"``) covers all three,
# and its formula calls ``F.convolution``: raw kernels under ``ArrayMath`` (``windows.py``),
# this module's recorded op under ``TensorMath``, which is how ``create_graph=True`` records a
# differentiable backward and second (and higher) order comes from the same three lines. torch
# names the forward's node ``ConvolutionBackward0`` and the adjoints' ``ConvolutionBackwardBackward0``.
#
# Note [A convolution keeps its columns]: the weight's gradient multiplies the gradient by the
# same im2col columns the forward multiplied the weight by (``conv_columns`` in windows.py picks
# one layout for both), and where channels and kernels are small their copy costs about as much as
# the product. So a recorded cpu forward whose weight needs a gradient keeps its columns in the
# node (``columns``) when they are at most ``KEPT_COLUMNS_BYTES``, and the raw backward
# (``ArrayMath``) hands them to ``conv_weight_grad`` instead of copying them again. What must
# hold: they are the columns of the saved input as it was when recorded, so they are read only
# after ``F.unpack`` has checked that input's version (an in-place change since raises torch's
# error first); they go when the node releases what it saved (a backward without
# ``retain_graph``), as the saved input does; and under ``saved_tensors_hooks`` nothing is kept
# beside what the pack hook saw (an offloading or recomputing hook would be defeated by a copy
# kept aside). A recorded backward (``TensorMath``) never reads them: its products are recorded
# ops. tests/ops/test_conv_kept_columns.py checks all of that against torch.
KEPT_COLUMNS_BYTES = 8 << 20
"""The largest columns a convolution's node keeps (Note [A convolution keeps its columns]): a
small layer's, whose copy costs about what its product does; a large layer's copy is a smaller
share of its products, and its memory is not worth holding through the forward."""


class _Convolution(OpNode):
    """One of the three convolutions (Note [Three convolutions]); inputs ``a``, ``b`` and, for the
    forward, the bias. It saves ``a`` only if ``b`` needs a gradient and ``b`` only if ``a`` does."""

    __slots__ = ("kind", "a_shape", "b_shape", "params", "columns")

    def backward(self, F, g):
        a, b = F.unpack(self)  # version-checked before the kept columns are read
        p = self.params
        kind = self.kind
        ga = gb = None
        if kind == "forward":      # a = x, b = w
            if self.needs(0):
                ga = F.convolution("input", g, b, self.a_shape, p)
            if self.needs(1):
                columns = self.columns
                if columns is not None and F is ArrayMath:  # Note [A convolution keeps its columns]
                    gb = conv_weight_grad(a, g, self.b_shape, p, columns)
                else:
                    gb = F.convolution("weight", a, g, self.b_shape, p)
        elif kind == "input":      # a = g0 (or a transposed convolution's input), b = w
            if self.needs(0):
                ga = F.convolution("forward", g, b, self.a_shape, p)
            if self.needs(1):
                gb = F.convolution("weight", g, a, self.b_shape, p)
        else:                      # kind == "weight": a = x, b = g0
            if self.needs(0):
                ga = F.convolution("input", b, g, self.a_shape, p)
            if self.needs(1):
                gb = F.convolution("forward", a, g, self.b_shape, p)
        if self.num_outputs == 2:
            return ga, gb
        # the bias (conv and conv_transpose): added along the channel dim of every output position;
        # summed over samples first, a reduction along the outer axis that runs over whole rows,
        # where one reduction over (samples, positions) at once strides through the channels
        return ga, gb, F.sum(F.sum(g, axis=0), axis=tuple(range(1, g.ndim - 1))) if self.needs(2) else None

    def release_variables(self) -> None:
        self.columns = None  # Note [A convolution keeps its columns]: they go with the saved input
        super().release_variables()


class ConvolutionBackward0(_Convolution):
    __slots__ = ()


class ConvolutionBackwardBackward0(_Convolution):
    __slots__ = ()


def _work(x_shape: tuple[int, ...], w_shape: tuple[int, ...], out: tuple[int, ...], groups: int) -> int:
    """The backward's cost (Note [Cost classes]): two products of the forward's multiply-adds, plus
    the im2col copy and the fold, which run at elementwise speed."""
    macs = x_shape[0] * w_shape[0] * math.prod(out) * w_shape[1] * math.prod(w_shape[2:])
    cols = macs // max(1, w_shape[0] // groups)
    return int(2 * macs * MATMUL_WORK_PER_MAC) + 2 * cols


def convolution_op(kind: str, a: Tensor, b: Tensor, shape: tuple[int, ...] | None, params: Params,
                   bias: Tensor | None = None, transposed: bool = False) -> Tensor:
    """``TensorMath.convolution``, and the forward once ``conv{1,2,3}d``/``conv_transpose{1,2,3}d``
    have checked their arguments: one of the three convolutions as a recorded op. A transposed
    convolution is the ``"input"`` map (``transposed``: torch names its node as a forward's)."""
    dev = a.device
    columns = None
    if kind == "forward" and shape is None and dev is cpu and recording(b) and not (
            hooks_in_use[0] and saved_hooks.get() is not None):
        out, kept = conv_forward_columns(a.data, b.data, params)  # Note [A convolution keeps its columns]
        if kept[1].nbytes <= KEPT_COLUMNS_BYTES:
            columns = kept
        del kept
    else:
        out = convolution(kind, a.data, b.data, shape, params)
    if bias is not None:  # into the kernel's new output, in place: one activation-sized array less
        out += dev.xp.reshape(bias.data, (-1,) + (1,) * (out.ndim - 2))
    x_shape = a.shape if kind != "input" else out.shape
    w_shape = b.shape if kind != "weight" else out.shape
    y_shape = out.shape if kind == "forward" else (a.shape if kind == "input" else b.shape)
    cls = ConvolutionBackward0 if kind == "forward" or transposed else ConvolutionBackwardBackward0
    inputs = (a, b) if bias is None else (a, b, bias)
    return record(cls, inputs, out, dev, kind, a.shape, b.shape, params, columns,
                  saved=(a if b._requires_grad else None, b if a._requires_grad else None),
                  work=_work(x_shape, w_shape, y_shape[2:], params[3]))


def _tuple(value: Any, d: int, name: str) -> tuple[int, ...]:
    if isinstance(value, int):
        return (value,) * d
    items = tuple(value)
    if len(items) == 1:
        return items * d
    if len(items) != d or not all(isinstance(v, int) for v in items):
        raise RuntimeError(f"expected {name} to be a single integer value or a list of {d} values to match the "
                           f"convolution dimensions, but got {name}={list(items)}")
    return items


def conv_nd(d: int, input: Tensor, weight: Tensor, bias: Tensor | None, stride: Any, padding: Any, dilation: Any,
            groups: int) -> Tensor:
    """``conv1d`` (``d=1``) and ``conv2d`` (``d=2``): torch's checks and words, then ``convolution_op``."""
    fn = f"conv{d}d"
    tensor_arg(input, fn, "input", 1)
    tensor_arg(weight, fn, "weight", 2)
    same_device(input, weight)
    if bias is not None:
        tensor_arg(bias, fn, "bias", 3)
        same_device(input, bias)
    if input.ndim not in (d + 1, d + 2):
        raise RuntimeError(f"Expected {d + 1}D (unbatched) or {d + 2}D (batched) input to {fn}, but got input of "
                           f"size: {list(input.shape)}")
    if input.ndim == d + 1:  # unbatched: one sample, as torch runs it (its node is then the squeeze's)
        return squeeze(conv_nd(d, unsqueeze(input, 0), weight, bias, stride, padding, dilation, groups), 0)
    if weight.ndim != d + 2:
        raise RuntimeError(f"weight should have at least three dimensions, got weight of size {list(weight.shape)}"
                           if weight.ndim < 3 else
                           f"Expected {weight.ndim}-dimensional input for {weight.ndim}-dimensional weight "
                           f"{list(weight.shape)}, but got {input.ndim}-dimensional input of size "
                           f"{list(input.shape)} instead")
    stride = _tuple(stride, d, "stride")
    dilation = _tuple(dilation, d, "dilation")
    if not isinstance(groups, int) or groups <= 0:
        raise RuntimeError("non-positive groups is not supported")
    if any(s <= 0 for s in stride):
        raise RuntimeError("non-positive stride is not supported")
    if any(v <= 0 for v in dilation):
        raise RuntimeError("dilation should be greater than zero")
    kernel = weight.shape[2:]
    if isinstance(padding, str):
        if padding == "valid":
            pads = ((0, 0),) * d
        elif padding == "same":
            if any(s != 1 for s in stride):
                raise RuntimeError("padding='same' is not supported for strided convolutions")
            total = [v * (k - 1) for v, k in zip(dilation, kernel)]
            pads = tuple((t // 2, t - t // 2) for t in total)
        else:
            raise RuntimeError(f"Invalid padding string: '{padding}'")
    else:
        pads = tuple((p, p) for p in _tuple(padding, d, "padding"))
        if any(p < 0 for p, _ in pads):
            raise RuntimeError("negative padding is not supported")
    if weight.shape[0] % groups:
        raise RuntimeError(f"Given groups={groups}, expected weight to be divisible by {groups} at dimension 0, but "
                           f"got weight of size {list(weight.shape)} instead")
    if input.shape[1] != weight.shape[1] * groups:
        raise RuntimeError(f"Given groups={groups}, weight of size {list(weight.shape)}, expected input"
                           f"{list(input.shape)} to have {weight.shape[1] * groups} channels, but got "
                           f"{input.shape[1]} channels instead")
    if bias is not None and (bias.ndim != 1 or bias.shape[0] != weight.shape[0]):
        raise RuntimeError(f"Given weight of size {list(weight.shape)}, expected bias to be 1-dimensional with "
                           f"{weight.shape[0]} elements, but got bias of size {list(bias.shape)} instead")
    if input.dtype != weight.dtype:
        raise RuntimeError(f"expected scalar type {scalar_type_name(input.dtype)} but found "
                           f"{scalar_type_name(weight.dtype)}")
    if bias is not None and bias.dtype != input.dtype:
        raise RuntimeError(f"Input type ({input.dtype.name.replace('float64', 'double').replace('float32', 'float')}) "
                           f"and bias type ({bias.dtype.name.replace('float64', 'double').replace('float32', 'float')}"
                           ") should be the same")
    if input.dtype.kind != "f":
        raise NotImplementedError(f'"slow_conv2d_cpu" not implemented for \'{input.dtype.name.capitalize()}\'')
    padded = [n + b + a for n, (b, a) in zip(input.shape[2:], pads)]
    effective = [v * (k - 1) + 1 for v, k in zip(dilation, kernel)]
    if any(e > p for e, p in zip(effective, padded)):
        raise RuntimeError(f"Calculated padded input size per channel: ({' x '.join(map(str, padded))}). Kernel size: "
                           f"({' x '.join(map(str, effective))}). Kernel size can't be greater than actual input size")
    if any(out_size(n, k, s, v, b, a) <= 0 for n, k, s, v, (b, a) in zip(input.shape[2:], kernel, stride, dilation,
                                                                          pads)):
        raise RuntimeError("Given input size is too small for the convolution's output")
    return convolution_op("forward", input, weight, None, (stride, pads, dilation, groups), bias)


def conv1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1, padding: Any = 0,
           dilation: Any = 1, groups: int = 1) -> Tensor:
    """torch.nn.functional.conv1d: ``(N, C, L)`` or ``(C, L)`` input, ``(O, C / groups, K)`` weight."""
    return conv_nd(1, input, weight, bias, stride, padding, dilation, groups)


def conv2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1, padding: Any = 0,
           dilation: Any = 1, groups: int = 1) -> Tensor:
    """torch.nn.functional.conv2d: ``(N, C, H, W)`` or ``(C, H, W)`` input, ``(O, C / groups, KH, KW)`` weight."""
    return conv_nd(2, input, weight, bias, stride, padding, dilation, groups)


def conv3d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1, padding: Any = 0,
           dilation: Any = 1, groups: int = 1) -> Tensor:
    """torch.nn.functional.conv3d: ``(N, C, D, H, W)`` or ``(C, D, H, W)`` input, ``(O, C / groups, *K)`` weight."""
    return conv_nd(3, input, weight, bias, stride, padding, dilation, groups)


def conv_transpose_nd(d: int, input: Tensor, weight: Tensor, bias: Tensor | None, stride: Any, padding: Any,
                      output_padding: Any, groups: int, dilation: Any) -> Tensor:
    """``conv_transpose1d/2d/3d``: the adjoint in ``x`` of the convolution whose weight is
    ``weight`` ``(C_in, C_out / groups, *K)`` (Note [Three convolutions]), torch's checks and words.
    ``output_padding`` adds positions after the last that the adjoint convolution reads nothing
    from; its size is ``(L - 1) * stride - 2 * padding + dilation * (K - 1) + output_padding + 1``."""
    fn = f"conv_transpose{d}d"
    tensor_arg(input, fn, "input", 1)
    tensor_arg(weight, fn, "weight", 2)
    same_device(input, weight)
    if bias is not None:
        tensor_arg(bias, fn, "bias", 3)
        same_device(input, bias)
    if input.ndim not in (d + 1, d + 2):
        raise RuntimeError(f"Expected {d + 1}D (unbatched) or {d + 2}D (batched) input to {fn}, but got input of "
                           f"size: {list(input.shape)}")
    if input.ndim == d + 1:  # unbatched: one sample (its node is then the squeeze's, as torch's is)
        return squeeze(conv_transpose_nd(d, unsqueeze(input, 0), weight, bias, stride, padding, output_padding,
                                         groups, dilation), 0)
    if weight.ndim != d + 2:
        raise RuntimeError(f"weight should have at least three dimensions, got weight of size {list(weight.shape)}"
                           if weight.ndim < 3 else
                           f"Expected {weight.ndim}-dimensional input for {weight.ndim}-dimensional weight "
                           f"{list(weight.shape)}, but got {input.ndim}-dimensional input of size "
                           f"{list(input.shape)} instead")
    stride = _tuple(stride, d, "stride")
    dilation = _tuple(dilation, d, "dilation")
    pads = _tuple(padding, d, "padding")
    extra = _tuple(output_padding, d, "output_padding")
    if not isinstance(groups, int) or groups <= 0:
        raise RuntimeError("non-positive groups is not supported")
    if any(s <= 0 for s in stride):
        raise RuntimeError("non-positive stride is not supported")
    if any(v <= 0 for v in dilation):
        raise RuntimeError("dilation should be greater than zero")
    if any(p < 0 for p in pads):
        raise RuntimeError("negative padding is not supported")
    if any(e < 0 for e in extra):
        raise RuntimeError("negative output_padding is not supported")
    if any(e >= s and e >= v for e, s, v in zip(extra, stride, dilation)):
        names = ("depth", "height", "width")[3 - d:] if d > 1 else ("width",)
        words = " ".join(f"output_padding_{n}: {e}" for n, e in zip(names, extra))
        words += " " + " ".join(f"stride_{n}: {s}" for n, s in zip(names, stride))
        words += " " + " ".join(f"dilation_{n}: {v}" for n, v in zip(names, dilation))
        raise RuntimeError(f"output padding must be smaller than either stride or dilation, but got {words}")
    if weight.shape[0] % groups:
        raise RuntimeError(f"Given groups={groups}, expected weight to be divisible by {groups} at dimension 0, but "
                           f"got weight of size [{list(weight.shape)}] instead")
    if input.shape[1] != weight.shape[0]:
        raise RuntimeError(f"Given transposed=1, weight of size {list(weight.shape)}, expected input"
                           f"{list(input.shape)} to have {weight.shape[0]} channels, but got {input.shape[1]} "
                           "channels instead")
    out_channels = weight.shape[1] * groups
    if bias is not None and (bias.ndim != 1 or bias.shape[0] != out_channels):
        raise RuntimeError(f"Given transposed=1, weight of size {list(weight.shape)}, expected bias to be "
                           f"1-dimensional with {out_channels} elements, but got bias of size {list(bias.shape)} "
                           "instead")
    if input.dtype != weight.dtype:
        raise RuntimeError(f"expected scalar type {scalar_type_name(input.dtype)} but found "
                           f"{scalar_type_name(weight.dtype)}")
    if input.dtype.kind != "f":
        raise NotImplementedError(f'"slow_conv_transpose{d}d_out_cpu" not implemented for '
                                  f"'{input.dtype.name.capitalize()}'")
    spatial = tuple((n - 1) * s - 2 * p + v * (k - 1) + e + 1
                    for n, s, p, v, k, e in zip(input.shape[2:], stride, pads, dilation, weight.shape[2:], extra))
    if any(n <= 0 for n in spatial):
        raise RuntimeError(f"Given input size per channel: ({' x '.join(map(str, input.shape[2:]))}). Calculated "
                           f"output size per channel: ({' x '.join(map(str, spatial))}). Output size is too small")
    shape = (input.shape[0], out_channels) + spatial
    return convolution_op("input", input, weight, shape, (stride, tuple((p, p) for p in pads), dilation, groups),
                          bias, transposed=True)


def conv_transpose1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1, padding: Any = 0,
                     output_padding: Any = 0, groups: int = 1, dilation: Any = 1) -> Tensor:
    """torch.nn.functional.conv_transpose1d: ``(N, C_in, L)`` or ``(C_in, L)``, weight ``(C_in, C_out / groups, K)``."""
    return conv_transpose_nd(1, input, weight, bias, stride, padding, output_padding, groups, dilation)


def conv_transpose2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1, padding: Any = 0,
                     output_padding: Any = 0, groups: int = 1, dilation: Any = 1) -> Tensor:
    """torch.nn.functional.conv_transpose2d on ``(N, C_in, H, W)`` or ``(C_in, H, W)``."""
    return conv_transpose_nd(2, input, weight, bias, stride, padding, output_padding, groups, dilation)


def conv_transpose3d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1, padding: Any = 0,
                     output_padding: Any = 0, groups: int = 1, dilation: Any = 1) -> Tensor:
    """torch.nn.functional.conv_transpose3d on ``(N, C_in, D, H, W)`` or ``(C_in, D, H, W)``."""
    return conv_transpose_nd(3, input, weight, bias, stride, padding, output_padding, groups, dilation)
