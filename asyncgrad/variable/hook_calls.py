"""Running a node's hooks: gradients wrapped as Tensors for the hook, checked on return.

Note [Grads on the fast path] (graph/node.py): the engine moves raw arrays when no graph is
recorded; hooks always see Tensors. The wrapping happens here, and only when a hook exists,
so the graph record (graph/node.py) stays below ``Tensor`` and the engine calls these functions.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable

from asyncgrad.graph.node import Node, NodeHooks, hook_name
from asyncgrad.tensor import Tensor


def check_hook_value(fn: Callable, old: Tensor | None, new: Any) -> Tensor | None:
    """What a hook returned in place of one gradient, validated as torch does (its wording)."""
    if new is None:
        return None
    if old is None:  # before the type test, as torch's check_single_result
        raise RuntimeError("can't replace a None gradient with a non-None value")
    if not isinstance(new, Tensor):
        raise TypeError(f"expected Variable, but hook returned '{type_name_of(new)}'")
    if new.shape != old.shape:
        raise RuntimeError(f"hook '{hook_name(fn)}' has changed the size of value")
    if new.dtype != old.dtype or new.device != old.device:
        raise RuntimeError(
            f"hook '{hook_name(fn)}' has changed the type of value (was {_legacy_type(old)} got {_legacy_type(new)})")
    return new


def check_hook_values(fn: Callable, old: tuple, new: Any) -> tuple:
    """A node hook's replacement for a tuple of gradients: a tuple of the same length."""
    if not isinstance(new, tuple):
        raise TypeError(f"expected tuple, but hook returned '{type_name_of(new)}'")
    if len(new) != len(old):
        raise RuntimeError(
            f"hook '{hook_name(fn)}' has returned an incorrect number of values (got {len(new)}, but expected "
            f"{len(old)})")
    return tuple(check_hook_value(fn, o, n) for o, n in zip(old, new))


def type_name_of(value: Any) -> str:
    """As torch names it (CPython's ``tp_name``): ``float``, ``Tensor``, ``numpy.ndarray``."""
    if inspect.iscoroutine(value):
        value.close()  # never to be awaited: no "coroutine was never awaited" warning on top
    cls = type(value)
    return f"numpy.{cls.__name__}" if cls.__module__.startswith("numpy") else cls.__name__


_LEGACY = {"float32": "Float", "float64": "Double", "float16": "Half", "bfloat16": "BFloat16", "int64": "Long",
           "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte", "bool": "Bool"}


def _legacy_type(t: Tensor) -> str:
    """torch's legacy type name (``torch.FloatTensor``), spelt for asyncgrad and its devices."""
    kind = _LEGACY.get(t.dtype.name, t.dtype.name)
    device = "" if t.device.is_cpu else f"{t.device.type}."
    return f"asyncgrad.{device}{kind}Tensor"


def run_tensor_pre(hooks: NodeHooks, node: Node, grads: list, create_graph: bool) -> list:
    """Tensor hooks, then retains_grad hooks, in torch's order; returns the new grads.

    Note [Hooks on undefined gradients]: as torch, a tensor hook runs whenever its node runs, also
    when the tensor's own gradient is undefined (an unused output of ``unbind`` or ``split``, a
    leaf a custom backward returned None for): it is called with None, and may only return None
    ("can't replace a None gradient with a non-None value"). A retains_grad hook has nothing to
    keep then, and ``.grad`` stays as it was. A leaf's post-accumulate hooks run too (accumulate.py).
    """
    for position, fns in hooks.tensor_pre.items():
        if fns and position < len(grads):
            grad = as_tensor(grads[position], node, position, create_graph)
            for fn in list(fns.values()):
                result = check_hook_value(fn, grad, fn(grad))
                if result is not None:
                    grad = result
            grads[position] = as_grad(grad, create_graph)
    for position, fn in hooks.retains_grad.items():
        if position < len(grads) and grads[position] is not None:
            fn(as_tensor(grads[position], node, position, create_graph))
    return grads


def run_pre(hooks: NodeHooks, node: Node, grads: list, create_graph: bool) -> list:
    if not hooks.pre:
        return grads
    wrapped = tuple(as_tensor(g, node, i, create_graph) for i, g in enumerate(grads))
    for fn in list(hooks.pre.values()):
        result = fn(wrapped)
        if result is not None:
            wrapped = check_hook_values(fn, wrapped, result)
    return [as_grad(g, create_graph) for g in wrapped]


def run_post(hooks: NodeHooks, node: Node, outputs: Any, grads: list, create_graph: bool) -> Any:
    if not hooks.post:
        return outputs
    grad_inputs = tuple(_wrap_output(node, i, g, create_graph) for i, g in enumerate(outputs))
    grad_outputs = tuple(as_tensor(g, node, i, create_graph) for i, g in enumerate(grads))
    for fn in list(hooks.post.values()):
        result = fn(grad_inputs, grad_outputs)
        if result is not None:
            grad_inputs = check_hook_values(fn, grad_inputs, result)
    return [as_grad(g, create_graph) for g in grad_inputs]


def as_tensor(grad: Any, node: Node, position: int, create_graph: bool) -> Tensor | None:
    """A gradient as hooks see it: a Tensor, whichever form the engine moves."""
    if grad is None or create_graph:
        return grad
    return Tensor._make(grad, node._input_meta[position][2], False, None, 0, [0])


def _wrap_output(node: Node, index: int, grad: Any, create_graph: bool) -> Tensor | None:
    if grad is None or create_graph:
        return grad
    edge_fn, input_nr = node.edge_fns[index], node.edge_nrs[index]
    device = edge_fn._input_meta[input_nr][2] if edge_fn is not None else None
    return Tensor._make(grad, device, False, None, 0, [0])


def as_grad(tensor: Tensor | None, create_graph: bool) -> Any:
    if tensor is None or create_graph:
        return tensor
    return tensor.data
