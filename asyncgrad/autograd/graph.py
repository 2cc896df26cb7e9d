"""The recorded backward graph: Node, Edge, GraphRoot, node hooks (stored here, run by hook_calls.py).

Note [Grads on the fast path]: when a backward does not record a graph
(``create_graph=False``) the engine moves raw device arrays between nodes, not Tensors;
with ``create_graph=True`` it moves Tensors so that every formula records itself. Nodes
receive ``create_graph`` in ``apply`` and hooks always see Tensors: the wrapping happens
in ``hook_calls.py``, and only when a hook exists.

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

import enum
import inspect
import itertools
from typing import Any, Callable, NamedTuple

SECOND_BACKWARD = (
    "Trying to backward through the graph a second time (or directly access saved tensors after "
    "they have already been freed). Saved intermediate values of the graph are freed when you call "
    ".backward() or autograd.grad(). Specify retain_graph=True if you need to backward through the "
    "graph a second time or if you need to access saved tensors after calling backward."
)


class _Released(tuple):
    """Stands in for a node's saved tensors once they were freed; any use raises torch's error."""

    __slots__ = ()

    def __iter__(self):
        raise RuntimeError(SECOND_BACKWARD)

    def __getitem__(self, index):
        raise RuntimeError(SECOND_BACKWARD)


RELEASED = _Released()


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

class NodeHooks:
    """All hooks of one node; a node without hooks holds None, so the hot path checks once."""

    __slots__ = ("pre", "post", "tensor_pre", "retains_grad")

    def __init__(self) -> None:
        self.pre: dict[int, Callable] = {}
        self.post: dict[int, Callable] = {}
        self.tensor_pre: dict[int, dict[int, Callable]] = {}
        self.retains_grad: dict[int, Callable] = {}


class Placement(enum.Enum):
    """Where the engine runs a node's ``apply`` (Note [Placement])."""

    ON_LOOP = "on loop"
    """Always inline in the device worker, whatever the threshold: AccumulateGrad, GraphRoot."""
    BY_COST = "by cost"
    """Inline when ``work`` is below the device's inline threshold, else in a kernel thread."""
    OWN_TASK = "own task"
    """A coroutine ``apply`` (an ``async def`` custom backward): a task of its own on the loop."""
    PORTAL = "portal"
    """A plain ``apply`` that may block on a reentrant backward (a plain-def custom backward):
    a kernel thread when ``work`` reaches the threshold and a thread is free, else inline in its
    device's server, a greenback portal through which a nested backward is awaited (Note [Servers]
    in engine/worker.py)."""


# Note [Placement]: each node kind says where it runs with the class attribute ``placement``, and
# ``work`` says only what its kernel costs (element-operations, set by ``ops`` when recording, or
# the outputs' size for a custom Function). The two were once one number: "never inline" was a
# ``work`` of 1 << 62 and "always inline" a ``work`` of -1, so an inline threshold at or above
# 1 << 62 ran ``async def`` backwards inline (their coroutines were never awaited) and any
# threshold was one sentinel away from meaning something else. Now a threshold is any int >= 0:
# 0 sends every BY_COST node to a kernel thread, a huge one keeps every BY_COST node inline, and
# neither moves an ON_LOOP, OWN_TASK or PORTAL node. The device worker reads ``placement`` once
# per node (Note [Per-node cost] in engine/worker.py).


class Node:
    """A backward function: maps gradients of its forward outputs to gradients of its inputs.

    ``next_edges[i]`` says where the gradient for forward input ``i`` goes. ``_input_meta``
    holds (shape, dtype, device) of each forward output, against which the engine checks the
    gradients it routes here. ``work`` estimates the kernel's cost in element-operations;
    ``placement`` says how the engine uses it (Note [Placement]).
    """

    __slots__ = (
        "next_edges", "sequence_nr", "topological_nr", "_input_meta", "_hooks", "_metadata", "work",
        "saved", "__weakref__",
    )
    placement = Placement.BY_COST
    """Where the engine runs this kind of node (Note [Placement]); op nodes go by their cost."""
    call_on_undefined = False
    """Run ``apply`` even when every incoming gradient is undefined (None)."""
    saves_variables = False
    """True when torch's node of the same name keeps SavedVariables although this one keeps no
    tensor in ``saved`` (Note [Which nodes refuse a second pass])."""

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
    placement = Placement.ON_LOOP

    def __init__(self, roots: tuple[Edge, ...], grads: list) -> None:
        super().__init__(roots)
        self.grads = grads

    def apply(self, grads: list, create_graph: bool) -> list:
        return list(self.grads)
