"""What every op shares: recording its node, and the formula namespace on raw arrays.

Note [Two namespaces for one formula]: each backward formula is written once, against a
namespace ``F``. ``ArrayMath`` (here) runs it on raw device arrays: the fast path, nothing
recorded. ``TensorMath`` (``tensor_math.py``) runs it on Tensors with the ops themselves, so
that with ``create_graph=True`` the backward pass is recorded and gradients of gradients work
to any order. The ops are built on this module, so ``TensorMath`` cannot be imported here: it
sets ``OpNode.graph_math`` when ``asyncgrad.ops`` imports it, before any op can run.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from asyncgrad.autograd.anomaly import anomaly_enabled, forward_traceback
from asyncgrad.autograd.graph import RELEASED, SECOND_BACKWARD, Node
from asyncgrad.autograd.saved import unpack_arrays
from asyncgrad.devices import Device
from asyncgrad.tensor import Tensor

_tuple_new = tuple.__new__


class OpNode(Node):
    """A built-in backward node: ``backward(F, grad)`` returns one gradient per next edge."""

    __slots__ = ()
    work_per_element = 1
    """The backward's cost per output element, in multiplies (Note [Cost classes])."""

    graph_math: Any = None
    """The formula namespace on Tensors, ``TensorMath`` (Note [Two namespaces for one formula])."""

    def apply(self, grads: list, create_graph: bool) -> Any:
        if create_graph:
            return self.backward(self.graph_math, grads[0])
        return self.backward(ArrayMath, grads[0])

    def backward(self, F: Any, grad: Any) -> Any:
        raise NotImplementedError

    def needs(self, index: int) -> bool:
        return self.next_edges[index][0] is not None


class SavesVariables(OpNode):
    """An op node whose torch twin keeps SavedVariables where it keeps no tensor (a number, indices,
    CopySlices' ``fn``): released like a node with saved tensors, and refused once released
    (Note [Which nodes refuse a second pass] in graph.py). A node with saved tensors refuses
    when it unpacks them, so only these pay for the check."""

    __slots__ = ()
    saves_variables = True

    def release_variables(self) -> None:
        self.saved = RELEASED  # unconditionally: such a node always holds what torch frees

    def apply(self, grads: list, create_graph: bool) -> Any:
        if self.saved is RELEASED:
            raise RuntimeError(SECOND_BACKWARD)
        if create_graph:
            return self.backward(self.graph_math, grads[0])
        return self.backward(ArrayMath, grads[0])


_META: dict[tuple, tuple] = {}


def input_meta(shape: tuple[int, ...], dtype: Any, device: Device) -> tuple:
    """The interned ``((shape, dtype, device),)`` of a one-output node.

    Interning keeps the objects that every recorded node holds for its whole life down to
    those it cannot share, which is what keeps Python's cyclic GC from taxing the forward.
    """
    key = (shape, dtype, device)
    meta = _META.get(key)
    if meta is None:
        if len(_META) > 4096:
            _META.clear()
        meta = _META[key] = (key,)
    return meta


def record(node: OpNode, out_data: Any, device: Device, work: int | None = None) -> Tensor:
    """Attach ``node`` as the grad_fn of a new output tensor holding ``out_data``.

    ``work`` estimates the node's backward in element-operations (default: the node class's
    ``work_per_element`` per output element); a backward that only reshapes or passes its
    gradient on costs 0.

    Note [Cost classes]: the engine runs a node inline on the loop when its ``work`` is below
    the device's inline threshold, so ``work`` must track time, not elements. A node class
    whose backward calls a transcendental or divides costs several multiplies per element:
    measured with numpy 2.4 on 150k float32 elements (one multiply = 0.28 ns/element): exp,
    log, neg 1-2; clamp, relu, sqrt, sigmoid, tanh 3-4; pow, x*y 4; abs 7; sin, cos 8-9;
    tensor/tensor 9. Those classes say so with ``work_per_element``.
    """
    node._input_meta = input_meta(out_data.shape, out_data.dtype, device)
    node.work = out_data.size * node.work_per_element if work is None else work
    if anomaly_enabled.get()[0]:
        node.metadata["traceback_"] = forward_traceback()
    return Tensor._make(out_data, device, True, node, 0, [0])


def same_device(a: Tensor, b: Tensor) -> Device:
    if a.device is not b.device:
        raise RuntimeError(
            "Expected all tensors to be on the same device, but found at least two devices, "
            f"{a.device} and {b.device}!"
        )
    return a.device


def reduced_axes(shape: tuple[int, ...], target: tuple[int, ...]) -> tuple[tuple[int, ...], bool]:
    """Axes that broadcasting ``target`` up to ``shape`` added or stretched."""
    lead = len(shape) - len(target)
    axes = tuple(range(lead)) + tuple(
        i + lead for i, n in enumerate(target) if n == 1 and shape[i + lead] != 1
    )
    return axes, lead > 0


def _array(value: Any) -> Any:
    """numpy gives a scalar for a full reduction or an all-integer index: keep gradients arrays,
    so that the next formula (``scatter_add``, an in-place accumulation) gets what it expects."""
    return np.asarray(value) if isinstance(value, np.generic) else value


def scatter_add(shape: tuple[int, ...], index: Any, basic: bool, g: Any) -> Any:
    """Zeros of ``shape`` with ``g`` added at ``index`` (repeated indices add up)."""
    xp = np if isinstance(g, (np.ndarray, np.generic)) else __import__("cupy")
    out = xp.zeros(shape, dtype=g.dtype)
    if basic:
        out[index] = g
    elif xp is np:
        np.add.at(out, index, g)
    else:
        xp.add.at(out, index, g)
    return out


class ArrayMath:
    """Formula primitives on raw arrays (numpy or CuPy)."""

    unpack = staticmethod(unpack_arrays)

    @staticmethod
    def sum_to(g: Any, shape: tuple[int, ...]) -> Any:
        if g.shape == shape:
            return g
        axes, _ = reduced_axes(g.shape, shape)
        return _array(g.sum(axis=axes).reshape(shape))

    @staticmethod
    def expand(g: Any, shape: tuple[int, ...]) -> Any:
        if g.shape == shape:
            return g
        return np.broadcast_to(g, shape)

    @staticmethod
    def sum(g: Any, axis: Any = None, keepdims: bool = False) -> Any:
        return _array(g.sum(axis=axis, keepdims=keepdims))

    @staticmethod
    def reshape(g: Any, shape: tuple[int, ...]) -> Any:
        return g.reshape(shape)

    @staticmethod
    def index(g: Any, index: Any) -> Any:
        """``g[index]``, kept an array: numpy gives a scalar for an all-integer index."""
        return _array(g[index])

    @staticmethod
    def permute(g: Any, axes: tuple[int, ...]) -> Any:
        return g.transpose(axes)

    @staticmethod
    def mT(g: Any) -> Any:
        return g.swapaxes(-1, -2)

    @staticmethod
    def where(cond: Any, a: Any, b: Any) -> Any:
        return np.where(cond, a, b)

    exp = staticmethod(np.exp)
    log = staticmethod(np.log)
    sin = staticmethod(np.sin)
    cos = staticmethod(np.cos)
    sign = staticmethod(np.sign)

    @staticmethod
    def cast(g: Any, dtype: np.dtype) -> Any:
        return g.astype(dtype, copy=False)

    @staticmethod
    def to_device(g: Any, device: Device) -> Any:
        return device.asarray(g)

    @staticmethod
    def index_add(shape: tuple[int, ...], index: tuple[Any, bool], g: Any) -> Any:
        return scatter_add(shape, index[0], index[1], g)

    @staticmethod
    def index_put(x: Any, index: Any, values: Any) -> Any:
        out = x.copy()
        out[index] = values
        return out

    @staticmethod
    def constant(value: Any, like: Any) -> Any:
        return value
