"""Saved tensors: what a node keeps from its forward, checked for in-place changes on unpack.

Note [Packed saved tensors]: under ``ag.autograd.graph.saved_tensors_hooks(pack, unpack)`` a
tensor saved while a graph is recorded goes through ``pack`` at once (grad mode off, as torch), and
the node keeps only what ``pack`` returned: the saved entry becomes a ``PackedSavedTensor``, which
holds neither the tensor nor its array. ``unpack`` runs each time the backward (or
``ctx.saved_tensors``) needs the value; what it returns must be a Tensor, and is not
version-checked (torch checks no version of a packed tensor: the hooks own the value). For a
recorded backward the unpacked value is reconnected to the graph where the saved tensor was: its
grad_fn, or its leaf's AccumulateGrad. ``pack`` must not change its input in place (torch's
error). The check costs recording one list read (``hooks_in_use``) until hooks are first used,
then one context-variable read per saved tensor.
"""

from __future__ import annotations

import contextvars
import re
import weakref
from typing import TYPE_CHECKING, Any, Callable

from asyncgrad._validate import type_label
from asyncgrad.graph.anomaly import is_anomaly_enabled
from asyncgrad.graph.grad_mode import INFERENCE_SAVED, InferenceVersion, grad_enabled
from asyncgrad.graph.node import RELEASED, SECOND_BACKWARD, hooks_in_use, saved_hooks
from asyncgrad.tensor import Tensor, type_name
from asyncgrad.variable.accumulate import grad_accumulator

if TYPE_CHECKING:
    from asyncgrad.graph.node import Node

PACK_IN_PLACE = ("A saved tensor pack hook is modifying its input in place. Tensors provided as input to pack hook "
                 "cannot be modified by in-place operations as this can lead to unexpected side-effects. Please open "
                 "an issue if you need to perform in-place operations on the input to a pack hook.")
DETACHED_IN_PLACE = ("Trying to use a saved tensor that has been detached in-place, i.e. with .detach_().This is not "
                     "supported, please use out-of-place `.detach()` instead")
"""torch's refusal to unpack a saved input that was not a leaf when saved and has been detached in place
since (its grad_fn is gone); a saved output or leaf is not checked, as in torch's SavedVariable."""


class SavedTensor:
    """A tensor saved for backward, with the version it had when saved.

    An output of the saving node is kept without its ``grad_fn`` (that would be a reference
    cycle); ``unpack`` rebuilds it from the node that asks.
    """

    __slots__ = ("data", "vc", "version", "tensor", "output_nr", "device", "grad_fn", "packed", "unpack",
                 "link")
    packed: Any
    """What the pack hook returned (a PackedSavedTensor's only; Note [Packed saved tensors])."""
    unpack: Callable[[Any], Any]
    link: Any

    def __init__(self, tensor: Tensor, is_output: bool = False) -> None:
        self.data = tensor._data  # the slot, not the property (Note [The data slot] in tensor.py)
        self.vc = vc = tensor._vc  # read once: a property (Note [A version counter made when first asked for])
        if vc.__class__ is InferenceVersion:  # Note [Inference tensors] in graph/grad_mode.py
            raise RuntimeError(INFERENCE_SAVED)
        self.version = vc[0]
        self.device = tensor.device
        self.output_nr = tensor.output_nr
        if is_output:
            self.tensor = None
            self.grad_fn = None
        else:
            self.tensor = tensor
            self.grad_fn = tensor.grad_fn
        if hooks_in_use[0]:
            hooks = saved_hooks.get()
            if hooks is not None:
                _pack(self, tensor, is_output, hooks)

    def check_version(self, node: Node) -> None:
        if self.grad_fn is not None and self.tensor.grad_fn is None:
            raise RuntimeError(DETACHED_IN_PLACE)
        if self.vc[0] != self.version:
            raise RuntimeError(self._modified_message(node))

    def unpack_tensor(self, node: Node) -> Tensor:
        """The saved value as a Tensor connected to the graph (for recording a backward)."""
        self.check_version(node)
        if self.tensor is not None:
            return self.tensor
        return Tensor._make(self.data, self.device, True, node, self.output_nr, self.vc)

    def _modified_message(self, node: Node) -> str:
        """torch 2.13's text: the node named by its forward op (``Exp``, not ``ExpBackward0``), the
        hint depending on whether anomaly mode is on."""
        data = self.data
        shape = ", ".join(str(d) for d in data.shape)
        # torch names the node that made the tensor now (an in-place op since has replaced the
        # saved one), without its "Backward0"; an output of the unpacking node names that node
        if self.tensor is None:
            origin = f", which is output {self.output_nr} of {_origin_name(node)},"
        elif self.grad_fn is not None and self.tensor.grad_fn is not None:
            origin = f", which is output {self.output_nr} of {_origin_name(self.tensor.grad_fn)},"
        else:
            origin = ""
        kind = _tensor_type(self.device.backend.dtype(data))
        hint = ("the backtrace further above shows the operation that failed to compute its gradient. The "
                "variable in question was changed in there or anywhere later. Good luck!"
                if is_anomaly_enabled() else "enable anomaly detection to find the operation that failed to "
                "compute its gradient, with ag.autograd.set_detect_anomaly(True, check_nan=False).")
        return (
            "one of the variables needed for gradient computation has been modified by an inplace "
            f"operation: [{kind} [{shape}]]{origin} is at version {self.vc[0]}; "
            f"expected version {self.version} instead. Hint: {hint}"
        )


_NO_LEGACY_TYPE = {"bool": "CPUBoolType", "complex64": "CPUComplexFloatType", "complex128": "CPUComplexDoubleType"}
"""How torch's version error names a dtype that has no legacy tensor type (``DoubleTensor``)."""


def _tensor_type(dtype: Any) -> str:
    return _NO_LEGACY_TYPE.get(dtype.name) or type_name(dtype)


def _origin_name(node: Node) -> str:
    """A node as torch's version error names it: ``Mul`` for MulBackward0, ``Sum1`` for SumBackward1
    (torch drops "Backward" and a version 0), ``MyFn`` for a custom Function's MyFnBackward, and the
    C++ name of CopySlices."""
    name = node.name()
    return "torch::autograd::CopySlices" if name == "CopySlices" else re.sub(r"Backward(0?)(\d*)$", r"\2", name)


class PackedSavedTensor(SavedTensor):
    """A saved tensor kept as its pack hook's result (Note [Packed saved tensors])."""

    __slots__ = ()

    def check_version(self, node: Node) -> None:
        pass

    def unpacked(self) -> Tensor:
        # In a copy of the context: whatever the hook switches (a saved_tensors_hooks block it
        # enters and never exits, as torch's test of that misuse does) ends with the call, as
        # torch's ends with the graph task's thread-local state (Note [Saved-tensor hooks are a
        # stack per context] in graph.py).
        value = contextvars.copy_context().run(self.unpack, self.packed)
        if not isinstance(value, Tensor):
            raise TypeError("Output of saved tensor unpack_hook expected to be a Tensor but got result of type "
                            f"{type_label(value)}")
        return value

    def unpack_tensor(self, node: Node) -> Tensor:
        value = self.unpacked()
        link = self.link
        if link is _OUTPUT:
            return Tensor._make(value.data, value.device, True, node, self.output_nr, value._vc)
        if self.grad_fn is not None:
            return Tensor._make(value.data, value.device, True, self.grad_fn, self.output_nr, value._vc)
        if link is None:
            return value
        leaf = Tensor._make(value.data, value.device, True, None, 0, value._vc)
        leaf._extras().grad_accumulator = weakref.ref(link)
        return leaf


_OUTPUT = object()
"""``PackedSavedTensor.link`` of a saved output of the node that unpacks it."""


def _pack(saved: SavedTensor, tensor: Tensor, is_output: bool, hooks: tuple) -> None:
    """Keep ``pack(tensor)`` instead of the tensor (Note [Packed saved tensors])."""
    pack, unpack = hooks
    version = tensor._vc[0]
    token = grad_enabled.set(False)
    try:
        packed = pack(tensor)
    finally:
        grad_enabled.reset(token)
    if tensor._vc[0] != version:
        raise RuntimeError(PACK_IN_PLACE)
    saved.__class__ = PackedSavedTensor
    saved.packed = packed
    saved.unpack = unpack
    saved.data = saved.tensor = None
    # Where the unpacked value joins the graph: the unpacking node (a saved output), the saved
    # grad_fn (None here), or a saved leaf's AccumulateGrad, kept alive with the node.
    if is_output:
        saved.link = _OUTPUT
    elif tensor.grad_fn is None and tensor._requires_grad:
        saved.link = grad_accumulator(tensor)
    else:
        saved.link = None


def unpack_arrays(node: Node) -> list[Any]:
    """A node's saved tensors as raw arrays: the fast path when no backward graph is recorded.
    A None entry (a tensor the op did not need to save) unpacks as None."""
    vc = node.result_vc
    if vc is not None:  # Note [A saved result kept in its node] in ops/_node.py
        if not vc[0]:
            return [node.result]
        keep_result_as_saved(node)  # changed in place since: the entry below words the error
    out: list[Any] = []
    for saved in node.saved:
        if saved is None:
            out.append(None)
        elif saved.__class__ is PackedSavedTensor:
            out.append(saved.unpacked().data)
        elif saved.grad_fn is not None and saved.tensor.grad_fn is None:
            raise RuntimeError(DETACHED_IN_PLACE)
        elif saved.vc[0] != saved.version:
            raise RuntimeError(saved._modified_message(node))
        else:
            out.append(saved.data)
    return out


def unpack_tensors(node: Node) -> list[Tensor | None]:
    keep_result_as_saved(node)  # the recorded backward's path: one SavedTensor per entry
    return [saved.unpack_tensor(node) if saved is not None else None for saved in node.saved]


def saved_variable(node: Node, index: int) -> Tensor | None:
    """Entry ``index`` of ``node``'s saved tensors as a Tensor, unpacked as the recorded backward
    unpacks it (version checked, through the unpack hook of a packed one), None for an entry the op
    did not need to keep; freed ones raise torch's error (Note [Saved tensors read by name] in
    ops/_node.py)."""
    keep_result_as_saved(node)
    saved = node.saved
    if saved is RELEASED:
        raise RuntimeError(SECOND_BACKWARD)
    if not -len(saved) <= index < len(saved):
        return None
    entry = saved[index]
    return None if entry is None else entry.unpack_tensor(node)


HOOKS_ON_FREED = ("Calling register_hooks on a saved tensor after it has been freed. Saved intermediate values of the "
                  "graph are freed when you call .backward() or autograd.grad(). Specify retain_graph=True if you "
                  "need to backward through the graph a second time or if you need to access saved variables after "
                  "calling backward.")


class RawSavedTensor:
    """torch's ``_raw_saved_<name>``: entry ``index`` of a node's saved tensors as itself, whose pack
    and unpack hooks may be set once (SavedVariable::register_hooks; Note [Saved tensors read by
    name] in ops/_node.py, Note [Packed saved tensors] above)."""

    __slots__ = ("node", "index")

    def __init__(self, node: Node, index: int) -> None:
        self.node = node
        self.index = index

    def register_hooks(self, pack_hook: Callable[[Tensor], Any], unpack_hook: Callable[[Any], Tensor]) -> None:
        """Pack the saved tensor now with ``pack_hook``; the backward (and ``_saved_<name>``) unpacks
        it with ``unpack_hook``, as a saved tensor packed under ``saved_tensors_hooks``."""
        if not callable(pack_hook) or not callable(unpack_hook):
            raise TypeError("register_hooks(): incompatible function arguments: both hooks must be callable")
        node = self.node
        keep_result_as_saved(node)
        saved = node.saved
        if saved is RELEASED:
            raise RuntimeError(HOOKS_ON_FREED)
        entry = saved[self.index] if -len(saved) <= self.index < len(saved) else None
        if entry is None:
            raise RuntimeError("Calling register_hooks on a saved tensor with value None is forbidden")
        if entry.__class__ is PackedSavedTensor:
            raise RuntimeError("Calling register_hooks on a saved tensor whose hooks have already been set. Hint: "
                               "only one pair of hooks is allowed at a time.")
        is_output = entry.tensor is None
        _pack(entry, entry.unpack_tensor(node), is_output, (pack_hook, unpack_hook))


def keep_result_as_saved(node: Node) -> None:
    """Move a result the node keeps itself into its ``saved``, as the SavedTensor ``record`` would
    have made (Note [A saved result kept in its node] in ops/_node.py); nothing for any other node."""
    vc = node.result_vc
    if vc is None:
        return
    entry = SavedTensor.__new__(SavedTensor)
    entry.data = node.result
    entry.vc = vc
    entry.version = 0
    entry.device = node._input_meta[0][2]
    entry.output_nr = 0
    entry.tensor = entry.grad_fn = None
    node.saved = (*node.saved, entry)
    node.result = node.result_vc = None
