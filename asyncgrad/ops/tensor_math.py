"""``TensorMath``: the backward formulas' namespace on Tensors (Note [Two namespaces for one
formula] in ``_node.py``), built from the ops themselves."""

from __future__ import annotations

from typing import Any

import numpy as np

from asyncgrad.devices import Device
from asyncgrad.ops import conv, elementwise, indexing, inplace, linalg, pooling, reduction, special
from asyncgrad.ops import shape as shape_ops
from asyncgrad.ops._node import OpNode, record, reduced_axes
from asyncgrad.tensor import Tensor
from asyncgrad.variable.saved import unpack_tensors


class TensorMath:
    """The primitives of ``ArrayMath`` on Tensors, through the differentiable ops."""

    unpack = staticmethod(unpack_tensors)

    @staticmethod
    def sum_to(g: Tensor, shape: tuple[int, ...]) -> Tensor:
        if g.shape == shape:
            return g
        axes, lead = reduced_axes(g.shape, shape)
        return reduction.sum(g, axes).reshape(shape)

    @staticmethod
    def expand(g: Tensor, shape: tuple[int, ...]) -> Tensor:
        return g if g.shape == shape else shape_ops.expand(g, shape)

    @staticmethod
    def sum(g: Tensor, axis: Any = None, keepdims: bool = False) -> Tensor:
        return reduction.sum(g, axis, keepdims)

    @staticmethod
    def reshape(g: Tensor, shape: tuple[int, ...]) -> Tensor:
        return shape_ops.reshape(g, shape)

    @staticmethod
    def index(g: Tensor, index: Any) -> Tensor:
        return g[index]

    @staticmethod
    def permute(g: Tensor, axes: tuple[int, ...]) -> Tensor:
        return shape_ops.permute(g, axes)

    @staticmethod
    def mT(g: Tensor) -> Tensor:
        return shape_ops.transpose(g, -1, -2)

    @staticmethod
    def mm(a: Tensor, b: Tensor) -> Tensor:
        return linalg.matmul(a, b)

    @staticmethod
    def cast(g: Tensor, dtype: np.dtype) -> Tensor:
        return g if g.dtype == dtype else shape_ops.to_dtype(g, dtype)

    @staticmethod
    def to_device(g: Tensor, device: Device) -> Tensor:
        return shape_ops.to_device(g, device)

    @staticmethod
    def index_put(x: Tensor, index: Any, values: Tensor) -> Tensor:
        return indexing.index_put(x, index, values)

    @staticmethod
    def index_add(shape: tuple[int, ...], index: tuple[Any, bool], g: Tensor) -> Tensor:
        return indexing.index_add_into(shape, index, g)

    @staticmethod
    def constant(value: Any, like: Tensor) -> Tensor:
        """A non-differentiable array (a mask, indices) as a Tensor beside ``like``."""
        return Tensor._make(value, like.device, False, None, 0, [0])

    @staticmethod
    def zeros_like(g: Tensor) -> Tensor:
        """Zeros that record nothing, as torch's ``zeros_like(grad)`` in its formulas."""
        return Tensor._make(g.device.xp.zeros_like(g.data), g.device, False, None, 0, [0])

    @staticmethod
    def cat(gs: list, axis: int) -> Tensor:  # views and shape ops (ops/views.py, ops/shape.py)
        return shape_ops.cat(gs, axis)

    where = staticmethod(elementwise.where)
    exp = staticmethod(elementwise.exp)
    log = staticmethod(elementwise.log)
    sin = staticmethod(elementwise.sin)
    cos = staticmethod(elementwise.cos)
    sign = staticmethod(elementwise.sign)
    threshold_backward = staticmethod(elementwise.threshold_backward)
    # pointwise math
    trunc = staticmethod(elementwise.trunc)
    floor = staticmethod(elementwise.floor)
    @staticmethod
    def delayed_error(g: Tensor, message: str) -> Tensor:
        """``g``'s values recorded under an ``Error`` node that raises ``message`` when a backward
        reaches it (torch's DelayedError): a gradient that is right but whose own gradient is not."""
        return record(inplace.Error, (g,), g.data, g.device, message)

    @staticmethod
    def scatter_prod(base: Tensor, key: tuple, axis: int, index: Any, src: Tensor) -> Tensor:
        return indexing.scatter_reduce(base, axis, Tensor._make(index, base.device, False, None, 0, [0]), src,
                                       "prod")

    rot90 = staticmethod(shape_ops.rot90)
    vector_norm = staticmethod(linalg.vector_norm)
    abs = staticmethod(elementwise.abs)
    isfinite = staticmethod(elementwise.isfinite)
    digamma = staticmethod(elementwise.digamma)
    polygamma = staticmethod(elementwise.polygamma)
    i0 = staticmethod(elementwise.i0)
    special_i1 = staticmethod(elementwise.special_i1)
    sinh = staticmethod(elementwise.sinh)
    cosh = staticmethod(elementwise.cosh)
    inv = staticmethod(linalg.inv)
    solve = staticmethod(linalg.solve_matrix)
    cholesky_solve = staticmethod(linalg.cholesky_solve)
    einsum = staticmethod(linalg.einsum_explicit)
    # convolution and pooling: their formulas' maps as recorded ops (Note [Three convolutions] in conv.py)
    convolution = staticmethod(conv.convolution_op)
    pool = staticmethod(pooling.pool_op)
    # the primitives the activation and normalisation formulas need
    tanh = staticmethod(elementwise.tanh)
    log1p = staticmethod(elementwise.log1p)
    # special functions by name (Note [Special functions by name] in ops/special.py)
    special = staticmethod(special.special_op)
    # the scans
    cumsum = staticmethod(reduction.cumsum)
    cumprod = staticmethod(reduction.cumprod)


OpNode.graph_math = TensorMath
