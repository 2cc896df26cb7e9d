"""The recorded backward graph: Node, Edge, AccumulateGrad, GraphRoot and node hooks.

Note [Grads on the fast path]: when a backward does not record a graph
(``create_graph=False``) the engine moves raw device arrays between nodes, not Tensors;
with ``create_graph=True`` it moves Tensors so that every formula records itself. Nodes
receive ``create_graph`` in ``apply`` and hooks always see Tensors: the wrapping happens
here, and only when a hook exists.

Note [Which nodes refuse a second pass]: torch refuses to run a node again after a backward
without ``retain_graph`` freed it exactly when the node held SavedVariables that were defined
when saved (its generated ``apply`` unpacks them all first: "Trying to backward through the
graph a second time..."), or a saved tensor list (``indices_released_``), or is a CopySlices
(its ``fn`` is reset). A node that kept only numbers and sizes (AddBackward0's alpha,
SumBackward's sizes, views) runs again. asyncgrad nodes keep numbers as numbers and indices as
arrays, so a node whose torch twin saved a wrapped number (``x * 2.0``: MulBackward0 saves
``other``), an index tensor (advanced IndexBackward0), or a CopySlices says so with
``saves_variables``; ``release_variables`` then marks it RELEASED like a node with saved tensors,
and its ``apply`` (``SavesVariables`` in ops/_node.py) refuses a RELEASED node before its formula runs.
"""

from __future__ import annotations

import inspect
import itertools
import threading
from typing import TYPE_CHECKING, Any, Callable, NamedTuple

from asyncgrad.autograd.ownership import owned_by
from asyncgrad.autograd.saved import RELEASED

if TYPE_CHECKING:
    from asyncgrad.tensor import Tensor

_sequence = itertools.count()
"""Creation order of nodes; the engine runs later-created nodes first."""


class Edge(NamedTuple):
    """Where a gradient goes: input ``input_nr`` of ``function`` (None: nowhere)."""

    function: Node | None
    input_nr: int


NO_EDGE = Edge(None, 0)


class RemovableHandle:
    """Returned by every ``register_*hook``; ``remove()`` unregisters the hook."""

    _ids = itertools.count()
    __slots__ = ("_hooks", "id")

    def __init__(self, hooks_dict: dict) -> None:
        self.id = next(RemovableHandle._ids)
        self._hooks = hooks_dict

    def remove(self) -> None:
        self._hooks.pop(self.id, None)

    def __enter__(self) -> RemovableHandle:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.remove()


def add_hook(hooks: dict, fn: Callable) -> RemovableHandle:
    """Register ``fn``; refused unless it is a plain callable.

    Hooks run synchronously inside a node, on the loop or in a kernel thread, where nothing
    could await a coroutine: an ``async def`` hook would silently never run, so it is refused.
    """
    if not callable(fn):
        raise TypeError(f"hook must be callable, got {type(fn).__name__}")
    if inspect.iscoroutinefunction(inspect.unwrap(fn)):
        raise TypeError(
            f"hook '{hook_name(fn)}' is an async def function; hooks run synchronously inside the backward pass, "
            "so they must be plain functions (do async work in an async def custom Function backward instead)"
        )
    handle = RemovableHandle(hooks)
    hooks[handle.id] = fn
    return handle


def hook_name(fn: Callable) -> str:
    return getattr(fn, "__name__", type(fn).__name__)


def check_hook_value(fn: Callable, old: Tensor | None, new: Any) -> Tensor | None:
    """What a hook returned in place of one gradient, validated as torch does (its wording)."""
    tensor_type = _tensor_type()
    if new is None:
        return None
    if not isinstance(new, tensor_type):
        raise TypeError(f"expected Variable, but hook returned '{_type_name(new)}'")
    if old is None:
        raise RuntimeError("can't replace a None gradient with a non-None value")
    if new.shape != old.shape:
        raise RuntimeError(f"hook '{hook_name(fn)}' has changed the size of value")
    if new.dtype != old.dtype or new.device != old.device:
        raise RuntimeError(
            f"hook '{hook_name(fn)}' has changed the type of value (was {_legacy_type(old)} got {_legacy_type(new)})")
    return new


def check_hook_values(fn: Callable, old: tuple, new: Any) -> tuple:
    """A node hook's replacement for a tuple of gradients: a tuple of the same length."""
    if not isinstance(new, tuple):
        raise TypeError(f"expected tuple, but hook returned '{_type_name(new)}'")
    if len(new) != len(old):
        raise RuntimeError(
            f"hook '{hook_name(fn)}' has returned an incorrect number of values (got {len(new)}, but expected "
            f"{len(old)})")
    return tuple(check_hook_value(fn, o, n) for o, n in zip(old, new))


def _type_name(value: Any) -> str:
    """As torch names it (CPython's ``tp_name``): ``float``, ``Tensor``, ``numpy.ndarray``."""
    if inspect.iscoroutine(value):
        value.close()  # never to be awaited: no "coroutine was never awaited" warning on top
    cls = type(value)
    return f"numpy.{cls.__name__}" if cls.__module__.startswith("numpy") else cls.__name__


_LEGACY = {"float32": "Float", "float64": "Double", "float16": "Half", "bfloat16": "BFloat16", "int64": "Long",
           "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte", "bool": "Bool"}


def _legacy_type(t: Tensor) -> str:
    """torch's legacy type name (``torch.FloatTensor``), spelt for asyncgrad and its devices."""
    kind = _LEGACY.get(str(t.dtype), str(t.dtype))
    device = "" if t.device.is_cpu else f"{t.device.type}."
    return f"asyncgrad.{device}{kind}Tensor"


class NodeHooks:
    """All hooks of one node; a node without hooks holds None, so the hot path checks once."""

    __slots__ = ("pre", "post", "tensor_pre", "retains_grad")

    def __init__(self) -> None:
        self.pre: dict[int, Callable] = {}
        self.post: dict[int, Callable] = {}
        self.tensor_pre: dict[int, dict[int, Callable]] = {}
        self.retains_grad: dict[int, Callable] = {}

    def run_tensor_pre(self, node: Node, grads: list, create_graph: bool) -> list:
        """Tensor hooks, then retains_grad hooks, in torch's order; returns the new grads."""
        for position, hooks in self.tensor_pre.items():
            if hooks and position < len(grads) and grads[position] is not None:
                grad = as_tensor(grads[position], node, position, create_graph)
                for fn in list(hooks.values()):
                    result = check_hook_value(fn, grad, fn(grad))
                    if result is not None:
                        grad = result
                grads[position] = as_grad(grad, create_graph)
        for position, fn in self.retains_grad.items():
            if position < len(grads) and grads[position] is not None:
                fn(as_tensor(grads[position], node, position, create_graph))
        return grads

    def run_pre(self, node: Node, grads: list, create_graph: bool) -> list:
        if not self.pre:
            return grads
        wrapped = tuple(as_tensor(g, node, i, create_graph) for i, g in enumerate(grads))
        for fn in list(self.pre.values()):
            result = fn(wrapped)
            if result is not None:
                wrapped = check_hook_values(fn, wrapped, result)
        return [as_grad(g, create_graph) for g in wrapped]

    def run_post(self, node: Node, outputs: Any, grads: list, create_graph: bool) -> Any:
        if not self.post:
            return outputs
        grad_inputs = tuple(_wrap_output(node, i, g, create_graph) for i, g in enumerate(outputs))
        grad_outputs = tuple(as_tensor(g, node, i, create_graph) for i, g in enumerate(grads))
        for fn in list(self.post.values()):
            result = fn(grad_inputs, grad_outputs)
            if result is not None:
                grad_inputs = check_hook_values(fn, grad_inputs, result)
        return [as_grad(g, create_graph) for g in grad_inputs]


def _tensor_type() -> type:
    from asyncgrad.tensor import Tensor

    return Tensor


def as_tensor(grad: Any, node: Node, position: int, create_graph: bool) -> Tensor | None:
    """A gradient as hooks see it: a Tensor, whichever form the engine moves."""
    if grad is None or create_graph:
        return grad
    from asyncgrad.tensor import Tensor

    return Tensor._make(grad, node._input_meta[position][2], False, None, 0, [0])


def _wrap_output(node: Node, index: int, grad: Any, create_graph: bool) -> Tensor | None:
    if grad is None or create_graph:
        return grad
    edge_fn = node.next_edges[index].function
    from asyncgrad.tensor import Tensor

    device = edge_fn._input_meta[node.next_edges[index].input_nr][2] if edge_fn is not None else None
    return Tensor._make(grad, device, False, None, 0, [0])


def as_grad(tensor: Tensor | None, create_graph: bool) -> Any:
    if tensor is None or create_graph:
        return tensor
    return tensor.data


ALWAYS_DISPATCH = 1 << 62
"""The ``work`` of nodes that must never run inline (async or possibly reentrant backwards):
above any inline threshold, so the worker's one comparison also catches them."""


class Node:
    """A backward function: maps gradients of its forward outputs to gradients of its inputs.

    ``next_edges[i]`` says where the gradient for forward input ``i`` goes. ``_input_meta``
    holds (shape, dtype, device) of each forward output, against which the engine checks the
    gradients it routes here. ``work`` estimates the kernel's cost in element-operations so
    the engine can decide between running it inline and sending it to the device's executor.
    """

    __slots__ = (
        "next_edges", "sequence_nr", "topological_nr", "_input_meta", "_hooks", "_metadata", "work",
        "saved", "__weakref__",
    )
    is_async = False
    """True when ``apply`` returns an awaitable (a custom Function with an ``async def`` backward);
    such a node's ``work`` is ALWAYS_DISPATCH."""
    call_on_undefined = False
    """Run ``apply`` even when every incoming gradient is undefined (None)."""
    saves_variables = False
    """True when torch's node of the same name keeps SavedVariables although this one keeps no
    tensor in ``saved`` (Note [Which nodes refuse a second pass])."""
    needs_portal = False
    """True when ``apply`` may block on a reentrant backward (a plain-def custom backward): such
    a node never runs inline on the loop, but in the executor or in a greenback portal; its
    ``work`` is ALWAYS_DISPATCH and ``kernel_work`` its real size."""

    def __init__(self, next_edges: tuple[Edge, ...] = ()) -> None:
        self.next_edges = next_edges
        self.sequence_nr = next(_sequence)
        topo = 0
        for fn, _ in next_edges:
            if fn is not None and fn.topological_nr >= topo:
                topo = fn.topological_nr + 1
        self.topological_nr = topo
        self._input_meta: tuple = ()
        self._hooks: NodeHooks | None = None
        self._metadata: dict | None = None
        self.work = 0
        self.saved: tuple = ()

    def name(self) -> str:
        return type(self).__name__

    def __repr__(self) -> str:
        return f"<{self.name()} object at {id(self):#x}>"

    @property
    def next_functions(self) -> tuple[tuple[Node | None, int], ...]:
        return tuple((fn, nr) for fn, nr in self.next_edges)

    @property
    def num_inputs(self) -> int:
        return len(self._input_meta)

    @property
    def metadata(self) -> dict:
        if self._metadata is None:
            self._metadata = {}
        return self._metadata

    def _hook_store(self) -> NodeHooks:
        if self._hooks is None:
            self._hooks = NodeHooks()
        return self._hooks

    def register_hook(self, fn: Callable) -> RemovableHandle:
        """``fn(grad_inputs, grad_outputs)`` after the node ran; may return new grad_inputs."""
        return add_hook(self._hook_store().post, fn)

    def register_prehook(self, fn: Callable) -> RemovableHandle:
        """``fn(grad_outputs)`` before the node runs; may return new grad_outputs."""
        return add_hook(self._hook_store().pre, fn)

    def _tensor_prehooks(self, output_nr: int) -> dict:
        return self._hook_store().tensor_pre.setdefault(output_nr, {})

    def apply(self, grads: list, create_graph: bool) -> Any:
        """Gradients for each next edge (None where there is none)."""
        raise NotImplementedError(f"{self.name()} does not implement apply")

    def release_variables(self) -> None:
        """Free what the forward saved (Note [Which nodes refuse a second pass])."""
        if self.saved or self.saves_variables:
            self.saved = RELEASED

    def _register_hook_dict(self, tensor_hooks: dict) -> None:
        self._hook_store().tensor_pre[0] = tensor_hooks


class GraphRoot(Node):
    """Feeds the initial gradients to several roots at once."""

    __slots__ = ("grads",)
    call_on_undefined = True

    def __init__(self, roots: tuple[Edge, ...], grads: list) -> None:
        super().__init__(roots)
        self.grads = grads

    def apply(self, grads: list, create_graph: bool) -> list:
        return list(self.grads)


class AccumulateGrad(Node):
    """The sink of a leaf: adds the incoming gradient into ``variable.grad``.

    One per leaf, reused while the leaf lives: the leaf holds it weakly, it holds the leaf.

    Note [One writer per leaf]: backwards on several threads (``backward_sync`` from plain
    threads, several event loops) may accumulate into one leaf at once, and numpy releases
    the GIL inside ``old += grad``, so two unguarded additions lose updates. As torch does
    (its AccumulateGrad holds a mutex), ``apply`` holds the leaf's lock around the read of
    ``.grad``, the addition, the write and the post-accumulate hooks. On one loop the lock
    is never contended (accumulation always runs inline on the loop); taken uncontended it
    costs about 0.2 µs per accumulation, once per leaf and backward (1.27 µs median per
    4-element accumulation without it, 1.48 µs with it, on a loaded 2-core machine; on W1
    the difference is below the noise). Nothing that can wait on another thread runs under
    it but post-accumulate hooks, which torch also runs under its mutex: a hook must not
    block on a backward of another thread into the same leaf.
    """

    __slots__ = ("variable", "lock")

    def __init__(self, variable: Tensor) -> None:
        super().__init__(())
        self.variable = variable
        self.lock = threading.Lock()
        self.work = -1  # below any inline threshold: accumulation never runs concurrently
        self._input_meta = ((variable.shape, variable.dtype, variable.device),)
        extra = variable._extra
        if extra is not None and extra.hooks is not None:
            self._register_hook_dict(extra.hooks)

    def apply(self, grads: list, create_graph: bool) -> tuple:
        if grads[0] is not None:
            with self.lock:
                accumulate_grad(self.variable, grads, create_graph)
        return ()


def accumulate_grad(variable: Tensor, grads: list, create_graph: bool) -> None:
    """``variable.grad += grads[0]`` with torch's rules: the first gradient is stolen when
    nothing else sees it, else copied (or kept as is when recorded, create_graph); later
    ones are added in place unless a graph is being recorded."""
    from asyncgrad.tensor import Tensor

    steal = not create_graph and owned_by(grads, 0)
    grad = grads[0]
    old = variable._grad
    if create_graph:
        if old is None:
            variable._grad = grad if grad.requires_grad else grad.detach().clone()
        else:
            variable._grad = old + grad
    elif old is None:
        variable._grad = Tensor._make(grad if steal else grad.copy(), variable.device, False, None, 0, [0])
    elif old.requires_grad:
        variable._grad = Tensor._make(old.data + grad, variable.device, False, None, 0, [0])
    else:
        old.data += grad
        old._vc[0] += 1
    extra = variable._extra
    if extra is not None and extra.post_accumulate_hooks:
        for fn in list(extra.post_accumulate_hooks.values()):
            fn(variable)
