"""In-place ops: compute out of place, write into the tensor's memory, rebase its grad_fn.

An in-place op bumps the version counter (shared with views and ``detach()``), so any
node that saved the old value refuses to unpack it. A node of the in-place op itself that
saved the tensor's old value gets a snapshot of it first, with the old grad_fn attached,
so ``x.mul_(y)`` still differentiates correctly with respect to ``y``.

Note [Views and in-place]: views share their base's memory, so an in-place op on a view
changes the base and one on the base changes its views. As in torch, the base is rebased
onto ``CopySlices`` (the op's node applied to the view's region of the base's gradient),
and every live view of the base gets a fresh ``AsStridedBackward0`` reading its region of
the base's new value, so no view keeps a grad_fn of the old value.
"""

from __future__ import annotations

import math
import re
from typing import Any, Callable

import numpy as np

from asyncgrad._validate import number_arg, tensor_arg
from asyncgrad.devices.backend import backend_of
from asyncgrad.graph.anomaly import anomaly_enabled, forward_traceback
from asyncgrad.graph.grad_mode import INFERENCE_INPLACE, InferenceVersion, grad_enabled, inference_enabled, no_grad
from asyncgrad.graph.node import RELEASED as RELEASED_VALUES
from asyncgrad.graph.node import Edge, Node, before_write, hooks_in_use, mutation_context, saved_hooks
from asyncgrad.ops import _node
from asyncgrad.ops._node import (
    INFERENCE_MODE_VIEW,
    MULTI_OUTPUT_VIEW,
    NO_GRAD_VIEW,
    OpNode,
    SavesVariables,
    input_meta,
    plain,
    record,
)
from asyncgrad.ops.elementwise import add, addcdiv, addcmul, broadcast_error, div, lerp, mul, sub
from asyncgrad.tensor import IN_CUSTOM_FUNCTION, Tensor, scalar_type_name
from asyncgrad.variable.accumulate import gradient_edge
from asyncgrad.variable.saved import keep_result_as_saved


def _recording(x: Tensor, args: tuple) -> bool:
    if not grad_enabled.get():
        return False
    return x._requires_grad or any(isinstance(a, Tensor) and a._requires_grad for a in args)


def apply_inplace(x: Tensor, compute: Callable[..., Tensor], *args: Any, internal_overlap: bool = True) -> Tensor:
    """``compute`` out of place, written into ``x``; ``internal_overlap=False`` lets it write into an
    expanded tensor (torch's fill_/zero_, and copy_ from itself, Note [Memory overlap])."""
    if x._vc.__class__ is InferenceVersion and not inference_enabled.get():
        raise RuntimeError(INFERENCE_INPLACE)  # before anything is written (Note [Inference tensors])
    if mutation_context[0] is not None:  # Note [Mutation on saved tensors] in autograd/graph.py
        before_write(x)
    grad_mode = grad_enabled.get()
    base = x._extra.base if x._extra is not None else None
    if grad_mode and base is not None and x._extra.creation is not None and (
            base._requires_grad or _recording(x, args)):
        raise RuntimeError(view_creation_error(x._extra.creation, "is being"))
    # torch's check_inplace: a view that requires grad (a custom Function's pure view of a leaf
    # that does not, too) of a leaf is refused first
    if grad_mode and base is not None and (base._requires_grad or x._requires_grad) and base.grad_fn is None:
        raise RuntimeError("a view of a leaf Variable that requires grad is being used in an in-place operation.")
    if grad_mode and x._requires_grad and x.grad_fn is None:
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
    check_overlap(x, args, internal_overlap)
    recording = _recording(x, args)
    if not recording:
        with no_grad():
            result = compute(x, *args)
        _write(x, result.data)
        x._vc[0] += 1
        _refresh_untracked(x)
        return x
    if base is not None:
        _inplace_on_view(x, base, compute, args)
        _refresh_family(base, base)
        return x
    if hooks_in_use[0] and saved_hooks.get() is not None:
        # Note [Packed saved tensors] (variable/saved.py): a pack hook must see the old value,
        # which the write below would change under it; torch packs a clone, as here.
        result = compute(_snapshot(x), *args)
    else:
        result = compute(x, *args)
    node = result.grad_fn
    old_grad_fn, old_output_nr = x.grad_fn, x.output_nr
    vc = x._vc
    aliased = any(isinstance(arg, Tensor) and arg._vc is vc for arg in args)
    self_saved = False
    keep_result_as_saved(node)  # its entries are rewritten below (Note [A saved result kept in its node])
    for saved in node.saved:
        if saved is not None and saved.vc is vc:  # the old value, kept as the new node's input
            if aliased and (self_saved or saved.tensor is not x):
                continue  # Note [An operand aliasing self]: kept live, so its version check fails
            self_saved = True
            saved.data = x.device.backend.copy(saved.data, "C")
            saved.vc = [saved.version]
            saved.tensor = Tensor._make(saved.data, x.device, x._requires_grad, old_grad_fn, old_output_nr, saved.vc)
    _write(x, result.data)
    x._vc[0] += 1
    for saved in node.saved:
        if saved is not None and saved.tensor is None:
            saved.data, saved.vc, saved.version = x.data, x._vc, x._vc[0]
    node._input_meta = input_meta(x.shape, x.dtype, x.device)
    _rebase(x, node)
    _refresh_views(x, None)
    _refresh_family(x, x)
    return x


# Note [An operand aliasing self]
# An in-place op keeps x's old value for its backward as a copy (torch's ``original_self``
# clone), but an operand that shares x's version counter (x itself in ``x *= x``, a view or a
# ``detach()`` of x) is saved as torch saves it: the tensor itself, at its version before the
# write. The write moves that version, so a backward that needs the operand raises torch's
# "modified by an inplace operation" error instead of computing with the copy. Ops save their
# operands in argument order, so of the entries that are x itself the first is self's.


_UFUNCS: dict[Callable, str] = {add: "add", sub: "subtract", mul: "multiply", div: "divide"}
"""The out-of-place ops whose in-place form ``write_into`` may run as one ufunc into the tensor."""

_TERNARY: dict[Callable, str] = {addcmul: "multiply", addcdiv: "divide", lerp: "lerp"}
"""The ops whose in-place form ``write_into`` runs as three ufuncs through one scratch array."""


def write_into(x: Tensor, compute: Callable, args: tuple, kwargs: dict) -> bool:
    """Note [In place without a temporary]: ``x.add_(y)`` and friends (add, sub, mul, div) are
    computed out of place and written back (``apply_inplace``) so that one path serves recording,
    views, dtypes and torch's checks; but where nothing records, x's dtype is the result's and y
    broadcasts to x's shape, the backend writes the ufunc's result straight into x's memory
    (``ArrayBackend.into``): the same arithmetic, bit for bit, and no temporary as large as x, so
    an optimizer's step makes no parameter-sized garbage (``python -m benchmarks.train_loop``).
    ``addcmul_``, ``addcdiv_`` and ``lerp_`` with a number weight take it too (``_write_ternary``):
    their three ufuncs in the out-of-place order into one scratch array, then into x. numpy has no
    fused multiply-add, so addcmul and lerp agree with torch's FMA to rounding, as the out-of-place
    ops do; addcdiv is torch's bit for bit. False where the general path must decide (and maybe
    raise); tests/ops/test_inplace_into.py and test_inplace_into_ternary.py check both."""
    name = _UFUNCS.get(compute)
    if name is None:
        name = _TERNARY.get(compute)
        return name is not None and _write_ternary(x, name, args, kwargs)
    if len(args) != 1 or (kwargs and kwargs.keys() != {"alpha"}):
        return False
    other = args[0]
    alpha = kwargs.get("alpha", 1) if kwargs else 1
    data = x._data
    backend = x.device.backend
    if not _untracked(x, args, backend):
        return False
    tensor = isinstance(other, Tensor)
    if tensor:
        value = other._data
        if not _fits(x, other):
            return False
    elif type(other) in (int, float):
        value = other
    else:
        return False
    if alpha != 1:  # a number times alpha is rounded as the op rounds it: left to the op
        if name not in ("add", "subtract") or type(alpha) not in (int, float) or not tensor:
            return False
        value = value * alpha  # as the out-of-place op computes it
    check_overlap(x, args, True)
    backend.into(name, data, data, value)
    x._vc[0] += 1
    _refresh_untracked(x)
    return True


def _untracked(x: Tensor, args: tuple, backend: Any) -> bool:
    """Whether an in-place op on ``x`` with ``args`` records nothing and may be refused by nothing
    but the overlap checks: a float tensor of a backend with ``into``, not an inference tensor
    outside inference mode, not a view in grad mode (Note [View creation] in _node.py)."""
    if not backend.into_ufuncs or x._data.dtype.kind not in "fc" or x._vc.__class__ is InferenceVersion \
            or mutation_context[0] is not None:  # Note [Mutation on saved tensors]: the general path clones first
        return False
    return not grad_enabled.get() or not (
        x._requires_grad or any(isinstance(a, Tensor) and a._requires_grad for a in args)
        or (x._extra is not None and x._extra.base is not None))


def _fits(x: Tensor, other: Tensor) -> bool:
    """Whether ``other`` computes with ``x`` without promotion and broadcasts to x's shape.

    Note [Cheap checks first]: an equal shape answers before the broadcast walk, as a stride 0
    must be among the strides before check_overlap looks for an expanded dimension: the same
    decisions, without a generator per call: an optimizer's in-place step on small parameters is
    mostly this check (``python -m benchmarks.train_loop``)."""
    value, data = other._data, x._data
    return other.device is x.device and value.dtype == data.dtype and (value.shape == data.shape or (
        value.ndim <= data.ndim and all(n == m or n == 1 for n, m in zip(reversed(value.shape), reversed(data.shape)))))


def _write_ternary(x: Tensor, name: str, args: tuple, kwargs: dict) -> bool:
    """addcmul_/addcdiv_/lerp_ into x through one scratch array (Note [In place without a temporary])."""
    if len(args) != 2:
        return False
    backend = x.device.backend
    if not _untracked(x, args, backend):
        return False
    first, second = args
    data = x._data
    if name == "lerp":
        if kwargs or not isinstance(first, Tensor) or type(second) not in (int, float) or not _fits(x, first) or (
                data.dtype.kind != "f"):
            return False
        check_overlap(x, args, True)
        scratch = backend.empty(data.shape, data.dtype)
        backend.into("subtract", scratch, first._data, data)
        if abs(second) < 0.5:  # as elementwise.lerp computes it
            backend.into("multiply", scratch, scratch, second)
            backend.into("add", data, data, scratch)
        else:
            backend.into("multiply", scratch, scratch, 1 - second)
            backend.into("subtract", data, first._data, scratch)
    else:
        value = kwargs.get("value", 1)
        if (kwargs and kwargs.keys() != {"value"}) or type(value) not in (int, float) or not (
                isinstance(first, Tensor) and isinstance(second, Tensor) and _fits(x, first) and _fits(x, second)):
            return False
        check_overlap(x, args, True)
        t1, t2 = first._data, second._data
        shape = t1.shape if t1.shape == t2.shape else tuple(np.broadcast_shapes(t1.shape, t2.shape))
        scratch = backend.empty(shape, data.dtype)
        if value == 1:  # as elementwise._pointwise: tensor1 times 1 is tensor1
            backend.into(name, scratch, t1, t2)
        else:
            backend.into("multiply", scratch, t1, value)
            backend.into(name, scratch, scratch, t2)
        backend.into("add", data, data, scratch)
    x._vc[0] += 1
    _refresh_untracked(x)
    return True


def view_creation_error(creation: tuple, modified: str) -> str:
    """torch's refusal of an in-place op through a view made in no_grad mode, by a multi-output op
    or by a custom Function (handle_view_on_rebase; Note [View creation] in _node.py, Note [Views
    a Function returns] in autograd/function.py), word for word. torch names the view's node
    without its ``Backward0`` ("Output 0 of Unbind")."""
    kind, name, output_nr = creation
    node = None if name is None else re.sub(r"Backward\d*$", "", name)
    block = "inference_mode" if kind == INFERENCE_MODE_VIEW else "no_grad"
    if kind in (NO_GRAD_VIEW, INFERENCE_MODE_VIEW) or node is None:
        prefix = (f"Output {output_nr} of {node} is a view of a view which was created in" if node is not None
                  else "A view was created in")
        msg = (f"{prefix} inference mode and {modified} modified inplace in normal mode." if block == "inference_mode"
               else f"{prefix} no_grad mode and {modified} modified inplace with grad mode enabled.")
    else:
        msg = f"Output {output_nr} of {node} is a view and {modified} modified inplace."
    if kind == MULTI_OUTPUT_VIEW:
        return msg + (" This view is the output of a function that returns multiple views. Such functions do not "
                      "allow the output views to be modified inplace. You should replace the inplace operation by an "
                      "out-of-place one.")
    if kind == IN_CUSTOM_FUNCTION:  # Note [Views a Function returns] in autograd/function.py
        return msg + (" This view was created inside a custom Function (or because an input was returned as-is) and "
                      "the autograd logic to handle view+inplace would override the custom backward associated with "
                      "the custom Function, leading to incorrect gradients. This behavior is forbidden. You can fix "
                      "this by cloning the output of the custom Function.")
    return msg + (" Given that this use case is ambiguous and error-prone, it is forbidden. You can clarify your code "
                  f"by moving both the view and the inplace either both inside the {block} block (if you don't want "
                  "the inplace to be tracked) or both outside (if you want the inplace to be tracked).")


INTERNAL_OVERLAP = ("unsupported operation: more than one element of the written-to tensor refers to a single memory "
                    "location. Please clone() the tensor before performing the operation.")


def same_data(a: Tensor, b: Any) -> bool:
    """Whether ``b`` is ``a``'s memory read the same way (torch's copy_ returns at once then)."""
    if not isinstance(b, Tensor) or b.device is not a.device:
        return False
    backend = a.device.backend
    da, db = a.data, b.data
    return (backend.address(da) == backend.address(db) and da.shape == db.shape
            and backend.strides(da) == backend.strides(db) and a.dtype == b.dtype)


def check_overlap(x: Tensor, args: tuple, internal: bool) -> None:
    """torch's memory-overlap checks of an in-place op (Note [Memory overlap])."""
    out = x._data
    backend = x.device.backend
    if internal and out.size:  # Note [Cheap checks first]; an empty tensor has no element to share
        strides = backend.strides(out)
        if 0 in strides and any(stride == 0 and size > 1 for size, stride in zip(out.shape, strides)):
            raise RuntimeError(INTERNAL_OVERLAP)
    for arg in args:
        if isinstance(arg, Tensor) and arg is not x and arg.device is x.device \
                and _partial_overlap(backend, out, arg.data):
            raise RuntimeError(
                "unsupported operation: some elements of the input tensor and the written-to tensor refer to a single "
                "memory location. Please clone() the tensor before performing the operation.")


# Note [Memory overlap]
# As torch's TensorIterator (at::assert_no_internal_overlap, at::assert_no_partial_overlap): the
# written-to tensor may not have a dimension of size > 1 with stride 0 (an expanded view), and an
# input may share memory with it only fully (same first and last byte, same strides). Both must
# be non-overlapping and dense for the second check; otherwise torch does not decide, nor do we.
# fill_ and zero_ skip the first check (torch writes one value to an expanded tensor), as does
# copy_ from the tensor itself. Strides of size-1 dimensions are not compared: numpy and torch
# choose them differently (numpy gives a new axis stride 0), so where torch's literal strides of
# such a dimension differ torch raises and asyncgrad does not. Strides and addresses are the
# backend's (numpy's, CuPy's, or those of the numpy memory of the simulated device).
def _dense(shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int) -> bool:
    expected = itemsize
    for size, stride in sorted(((n, st) for n, st in zip(shape, strides) if n != 1), key=lambda p: p[1]):
        if stride != expected:
            return False
        expected *= size
    return True


def _bounds(address: int, shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int) -> tuple[int, int]:
    """The first and one past the last byte of a non-empty array (numpy's byte_bounds)."""
    low = high = address
    for n, stride in zip(shape, strides):
        if stride < 0:
            low += (n - 1) * stride
        else:
            high += (n - 1) * stride
    return low, high + itemsize


def _partial_overlap(backend: Any, a: Any, b: Any) -> bool:
    if a.size == 0 or b.size == 0 or not backend.may_share_memory(a, b):
        return False
    sa, sb = backend.strides(a), backend.strides(b)
    ia, ib = backend.dtype(a).itemsize, backend.dtype(b).itemsize
    if not (_dense(a.shape, sa, ia) and _dense(b.shape, sb, ib)):
        return False
    if _bounds(backend.address(a), a.shape, sa, ia) == _bounds(backend.address(b), b.shape, sb, ib):
        return a.shape != b.shape or any(x != y for n, x, y in zip(a.shape, sa, sb) if n != 1)
    return True


def _rebased_node(cls: type[OpNode], edges: tuple[Edge, ...], t: Tensor, *fields: Any, work: int | None = None
                  ) -> OpNode:
    """The node an existing tensor ``t`` is rebased onto (CopySlices, AsStridedBackward0), built as
    ``record`` builds an op's node (fields in ``__slots__`` order, metadata, cost, anomaly
    traceback); not through ``record`` itself, which makes a new output tensor from input tensors,
    where CopySlices takes its edges from its op's node and no new tensor is made."""
    node = object.__new__(cls)
    Node.__init__(node, edges)
    for name, value in zip(cls.__slots__, fields):
        setattr(node, name, value)
    node._input_meta = input_meta(t.shape, t.dtype, t.device)
    node.work = t.data.size * cls.work_per_element if work is None else work
    if anomaly_enabled.get()[0]:
        node.metadata["traceback_"] = forward_traceback()
    return node


def _rebase(x: Tensor, node: OpNode) -> None:
    """``x`` is now the output of ``node``."""
    if x._extra is not None and x._extra.retains_grad:
        _move_retain_grad(x.grad_fn, x.output_nr, node)
    x.grad_fn = node
    x.output_nr = 0
    x._requires_grad = True


def _inplace_on_view(view: Tensor, base: Tensor, compute: Callable[..., Tensor], args: tuple) -> Tensor:
    """Run the op on the view's value, write it through to the base, rebase the base on CopySlices."""
    backend = view.device.backend
    index = backend.view_index(base.data, view.data)
    result = compute(_snapshot(view), *args)
    _write(view, result.data)
    view._vc[0] += 1
    fn = result.grad_fn
    keep_result_as_saved(fn)  # its entries are rewritten below and shared (Note [A saved result kept in its node])
    for saved in fn.saved:
        if saved is not None and saved.tensor is None:
            saved.data, saved.vc, saved.version = view.data, view._vc, view._vc[0]
    repeats = any(stride == 0 and n > 1 for n, stride in zip(view.shape, backend.strides(view.data)))
    node = _rebased_node(CopySlices, (gradient_edge(base),) + fn.next_edges[1:], base, fn, index, base.shape, repeats)
    node.saved = fn.saved
    _rebase(base, node)
    _refresh_views(base, None)
    return view


def rebase_custom_view(view: Tensor, fn: Node) -> None:
    """Note [A custom Function's in-place op on a view]: a custom Function ``fn`` (autograd/function.py,
    above the ops) that wrote into ``view`` and marked it dirty rebases the view's base, as torch's
    rebase_history: the base becomes CopySlices over ``fn`` (whose first input's edge is replaced by
    the base's, as torch's CopySlices does), and every view of the base, ``view`` included, reads
    the base again."""
    base = view._extra.base
    if view._extra.creation is not None:  # torch's handle_view_on_rebase first: a multi-output or no_grad view
        raise RuntimeError(view_creation_error(view._extra.creation, "is being"))
    if base._requires_grad and base.grad_fn is None:
        raise RuntimeError("a view of a leaf Variable that requires grad is being used in an in-place operation.")
    backend = view.device.backend
    index = backend.view_index(base.data, view.data)
    repeats = any(stride == 0 and n > 1 for n, stride in zip(view.shape, backend.strides(view.data)))
    node = _rebased_node(CopySlices, (gradient_edge(base),) + fn.next_edges[1:], base, fn, index, base.shape, repeats)
    node.saved = fn.saved
    _rebase(base, node)
    _refresh_views(base, None)


def _snapshot(x: Tensor) -> Tensor:
    """A copy of ``x``'s value with its place in the graph: what the op saves as the old value."""
    snapshot = plain(x.device.backend.copy(x.data, "C"), x.device)
    snapshot.grad_fn, snapshot.output_nr, snapshot._requires_grad = x.grad_fn, x.output_nr, x._requires_grad
    return snapshot


# Note [Views after an untracked in-place]
# torch regenerates a view's grad_fn (AsStridedBackward0 from its base) when it is next read and
# the version counter moved since the view was made or last regenerated, whatever moved it: also
# an in-place op that recorded nothing (in no_grad mode, or on a ``detach()`` of the base or of a
# view, which shares the version counter). asyncgrad regenerates at the in-place op instead, so
# an untracked one refreshes the views of the autograd root it wrote into: the root of a view, or
# the root a ``detach()`` remembers (``_Extra.detached_from``, set by ``Tensor.detach`` when the
# tensor requires grad). Only a root that requires grad has views with a grad_fn to regenerate.
# A tracked in-place op refreshes its own root's views as before (its graph is that root's), and
# those of the other tensors of the family: the root a detach() came from and its other detach()es
# (``_Extra.detached``; one made leaf with requires_grad_() has views with a grad_fn too).
def _refresh_untracked(x: Tensor) -> None:
    extra = x._extra
    if extra is not None:
        _refresh_family(extra.base if extra.base is not None else x, None)


def _refresh_family(root: Tensor, own: Tensor | None) -> None:
    """The views of every root sharing ``root``'s memory through detach(), but ``own``'s."""
    extra = root._extra
    if extra is None or extra.detached_from is None and not extra.detached:
        if root is not own and root._requires_grad:
            _refresh_views(root, None)
        return
    top = extra.detached_from() if extra.detached_from is not None else root
    if top is None:  # the root a detach() came from is gone, and with it any view of it
        top = root
    for r in (top, *(top._extra.detached or ())):
        if r is not own and r._requires_grad:
            _refresh_views(r, None)


def _refresh_views(base: Tensor, skip: Tensor | None) -> None:
    """Every live view of ``base`` now reads the base's new value (Note [Views and in-place])."""
    views = base._extra.views if base._extra is not None else None
    if not views:
        return
    backend = base.device.backend
    for view in list(views):
        if view is skip:
            continue
        if view._extra.creation is not None:  # torch cannot regenerate such a view's grad_fn: it refuses
            message = view_creation_error(view._extra.creation, "its base or another view of its base has been")
            node = _rebased_node(ViewError, (gradient_edge(base),), view, message)
            view.grad_fn, view.output_nr, view._requires_grad = node, 0, True
            continue
        node = _rebased_node(AsStridedBackward0, (gradient_edge(base),), view,
                             backend.view_index(base.data, view.data), base.shape, None, None,
                             work=base.data.size)
        if view._extra.retains_grad:
            _move_retain_grad(view.grad_fn, view.output_nr, node)
        view.grad_fn, view.output_nr, view._requires_grad = node, 0, True


class CopySlices(SavesVariables):  # torch resets its fn on release
    """The base after an in-place op on one of its views: outside the view's region the
    gradient passes through; inside it goes through the op's own backward (``fn``). ``index``
    holds the view's elements' flat positions in the base (``backend.view_index``)."""

    __slots__ = ("fn", "index", "base_shape", "repeats")

    def name(self) -> str:
        return "CopySlices"

    def backward(self, F, g):
        if self.repeats:
            # torch writes the view's gradient back through the view (as_strided(...).copy_), which
            # refuses a view that repeats elements (an expanded one): Note [Memory overlap]
            raise RuntimeError(INTERNAL_OVERLAP)
        flat = F.reshape(g, (-1,))
        region = F.index(flat, self.index)
        fn = self.fn
        if fn.saved is RELEASED_VALUES and self.saved is not RELEASED_VALUES:
            # fn also ran on its own earlier in this pass (a backward recorded with create_graph
            # reaches it through its saved result) and let go of its values: they are ours as well
            # (``node.saved = fn.saved``), and torch's ready queue would have run us first.
            fn.saved = self.saved
            try:
                grads = fn.apply([region], F is not _node.ArrayMath)
            finally:
                fn.saved = RELEASED_VALUES
        else:
            grads = fn.apply([region], F is not _node.ArrayMath)
        if grads[0] is not None:
            region = grads[0]
        else:
            region = region * 0
        return (F.reshape(F.index_put(flat, self.index, region), self.base_shape),) + tuple(grads[1:])

    def release_variables(self) -> None:
        # torch's CopySlices only lets go of ``fn`` (``fn = nullptr``): a backward recorded with
        # create_graph may hold ``fn`` too (a formula that read ``fn``'s saved result unpacks it
        # with ``fn`` as grad_fn), and a later pass through it still needs fn's saved values.
        self.fn = None
        super().release_variables()


class Error(OpNode):
    """The grad_fn of a view made in no_grad mode or by a multi-output op whose base changed in place
    since (torch's ``Error`` node there): torch refuses to read such a view's grad_fn, raising when the
    view is next used; asyncgrad raises the same words when the backward reaches it (Note [View creation]
    in _node.py)."""

    __slots__ = ("message",)
    work_per_element = 0

    def backward(self, F, g):
        raise RuntimeError(self.message)


class ViewError(OpNode):
    """``Error`` for such a view: torch raises as the view's ``grad_fn`` is read, so the view prints
    ``grad_fn=<Invalid>`` (torch's ``_tensor_str`` catches that error); the node's name stays torch's."""

    __slots__ = ("message",)
    work_per_element = 0
    printed_name = "Invalid"

    def backward(self, F, g):
        raise RuntimeError(self.message)

    def name(self) -> str:
        return "Error"


class AsStridedBackward0(OpNode):
    """A view read again from its base after the base changed in place, or ``as_strided``: the
    gradient goes to the base's elements at ``index`` (their flat positions in the base); for an
    as_strided of a view, ``from_root`` then reads the view's own elements out of that.

    Note [as_strided of an overlapping input]: when the view ``x`` given to as_strided aliases
    one base element from several of its own (an expanded ``x``), the base element's gradient is
    shared among them: ``share`` holds, per element of ``x``, how many of ``x``'s elements alias
    its base element (None when none repeats), and each gets its base element's gradient divided
    by that, as torch's as_strided_backward divides by its count of the input geometry; without
    it, the backward of the expand that made ``x`` would add the base element's gradient up
    again, once per alias."""

    __slots__ = ("index", "base_shape", "from_root", "share")

    def backward(self, F, g):
        size = math.prod(self.base_shape)
        flat = F.index_add((size,), (self.index, False), g)
        if self.from_root is not None:
            g_in = F.index(flat, self.from_root)
            return (g_in if self.share is None else g_in / F.constant(self.share, g_in),)
        return (F.reshape(flat, self.base_shape),)


def _move_retain_grad(old: Any, output_nr: int, node: OpNode) -> None:
    """``retain_grad()`` follows the tensor to its new version (torch): ``.grad`` is the gradient
    of the value after the in-place op. Tensor hooks stay where they were, on the old value."""
    hooks = old._hooks if old is not None else None
    retain = hooks.retains_grad.pop(output_nr, None) if hooks is not None else None
    if retain is not None:
        node._hook_store().retains_grad[0] = retain


def _write(x: Tensor, value: Any) -> None:
    """``value`` (an array of ``x``'s device) into ``x``'s memory, with torch's dtype and shape rules."""
    backend = x.device.backend
    dtype = backend.dtype(value)
    if dtype != x.dtype and not np.can_cast(dtype, x.dtype, "same_kind"):
        raise RuntimeError(f"result type {scalar_type_name(dtype)} can't be cast to the desired output type "
                           f"{scalar_type_name(x.dtype)}")
    if value.shape != x.data.shape:
        raise RuntimeError(
            f"output with shape {list(x.data.shape)} doesn't match the broadcast shape {list(value.shape)}")
    try:
        backend.setitem(x.data, Ellipsis, value)
    except ValueError as exc:  # a read-only (broadcast) array
        raise RuntimeError(INTERNAL_OVERLAP) from exc


class FillBackward2(OpNode):
    """fill_/zero_: the old value no longer matters, so its gradient is zero. Named as torch
    names them: FillBackward2 for a number, FillBackward3 for a 0-d tensor, ZeroBackward0. As in
    torch (zeros_like(grad)) the zeros are a constant: under create_graph they need no gradient."""

    __slots__ = ()

    def backward(self, F, g):
        data = g if F is _node.ArrayMath else g.data
        return (F.constant(backend_of(data).xp.zeros_like(data), g),)


class FillBackward3(FillBackward2):
    __slots__ = ()


class ZeroBackward0(FillBackward2):
    __slots__ = ()


def filled(x: Tensor, value: Any, cls: type | None = None) -> Tensor:
    """``fill_(value)``: a number, or a 0-d tensor that does not require grad (the gradient
    with respect to the value is not implemented, so one that needs it is refused)."""
    if cls is None:
        cls = FillBackward3 if isinstance(value, Tensor) else FillBackward2
    if isinstance(value, Tensor):
        if value.ndim != 0:
            raise RuntimeError(f"fill_ only supports 0-dimension value tensor but got tensor with {value.ndim} "
                               "dimensions.")
        if value._requires_grad and grad_enabled.get():
            raise NotImplementedError("fill_(): the gradient with respect to a value tensor is not implemented in "
                                      "asyncgrad; pass value.detach() or a number")
        value = value.item()
    else:
        number_arg(value, "fill_", "value", 1)
        if isinstance(value, np.generic):  # a Python number: the standard's full takes no numpy scalar
            value = value.item()
    return record(cls, (x,), x.device.backend.full(x.shape, value, x.dtype), x.device)


def zeroed(x: Tensor) -> Tensor:
    return filled(x, 0, ZeroBackward0)


class CopyBackwards(OpNode):
    """copy_(src): the destination's old value gets no gradient, src gets it summed to its shape
    (and moved back to ``src_device`` when src came from another device)."""

    __slots__ = ("src_shape", "src_dtype", "src_device")

    def backward(self, F, g):
        gsrc = None
        if self.needs(1):
            gsrc = F.cast(F.sum_to(g, self.src_shape), self.src_dtype)
            if self.src_device is not None:
                gsrc = F.to_device(gsrc, self.src_device)
        return (g * 0 if self.needs(0) else None, gsrc)


def copied(x: Tensor, src: Tensor) -> Tensor:
    tensor_arg(src, "copy_", "other", 1)
    dev = x.device
    data = dev.asarray(src.data) if src.device is not dev else src.data
    try:
        out = dev.backend.astype(dev.xp.broadcast_to(data, x.shape), x.dtype)
    except ValueError:
        raise broadcast_error(x.shape, src.shape) from None
    return record(CopyBackwards, (x, src), out, dev, src.shape, src.dtype,
                  None if src.device is dev else src.device)


