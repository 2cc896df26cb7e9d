"""The recorded backward graph: Node, Edge, GraphRoot, node hooks (stored here, run by hook_calls.py)."""

# Note [Grads on the fast path]: when a backward does not record a graph
# (``create_graph=False``) the engine moves raw device arrays between nodes, not Tensors;
# with ``create_graph=True`` it moves Tensors so that every formula records itself. Nodes
# receive ``create_graph`` in ``apply`` and hooks always see Tensors: the wrapping happens
# in ``hook_calls.py``, and only when a hook exists.
#
# Note [Which nodes refuse a second pass]: torch refuses to run a node again after a backward
# without ``retain_graph`` freed it exactly when the node held SavedVariables that were defined
# when saved (its generated ``apply`` unpacks them all first: "Trying to backward through the
# graph a second time..."), or a saved tensor list (``indices_released_``), or is a CopySlices
# (its ``fn`` is reset). A node that kept only numbers and sizes (AddBackward0's alpha,
# SumBackward's sizes, views) runs again. asyncgrad nodes keep numbers as numbers and indices as
# arrays, so a node whose torch twin saved a wrapped number (``x * 2.0``: MulBackward0 saves
# ``other``), an index tensor (advanced IndexBackward0), or a CopySlices says so with
# ``saves_variables``; ``release_variables`` then marks it RELEASED like a node with saved tensors,
# and its ``apply`` (``SavesVariables`` in ops/_node.py) refuses a RELEASED node before its formula runs.

from __future__ import annotations

import contextlib
import contextvars
import enum
import functools
import inspect
import itertools
import threading
import weakref
from collections.abc import Generator, Iterable
from typing import Any, Callable, NamedTuple, Protocol, TypeAlias

from asyncgrad.graph.switches import restore


class RunningGraphTask(Protocol):
    """What the graph record asks of the running graph task (the engine's ``GraphTask``), which it
    never imports (Note [The graph record is the lowest layer] in graph/__init__.py)."""

    final_callbacks: list
    exec_group: Any

    def will_execute(self, node: Node) -> bool: ...


current_graph_task: contextvars.ContextVar[RunningGraphTask | None] = contextvars.ContextVar(
    "asyncgrad_current_graph_task", default=None
)
"""The graph task whose node is running in this context (None outside any backward). Set by the
engine (engine/graph_task.py re-exports it); it lives here, in the graph record's layer, so that
the multi-grad hooks below can read it without importing the engine."""

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


def nodes_recorded() -> int:
    """How many nodes the process has recorded so far (``_sequence``'s next value, not consumed)."""
    return _sequence.__reduce__()[1][0]


Edge: TypeAlias = "tuple[Node | None, int]"
"""Where a gradient goes: ``(function, input_nr)``, input ``input_nr`` of ``function`` (None: nowhere).

Note [Edges are plain pairs]: an edge is a plain 2-tuple, as each entry of torch's
``next_functions`` is, not a NamedTuple: every recorded node builds one per input, and a NamedTuple
is a second tuple and a type call on the forward's hot path (W1's forward shows it; the figures are
in benchmarks/HISTORY.md). Code reads an edge by unpacking it: ``fn, input_nr = edge``.

Note [A node's edges are two parallel tuples]: a node keeps its edges as two tuples, the functions
(``edge_fns``) and their input numbers (``edge_nrs``), not as a tuple of pairs. The numbers are
nearly always 0, and ``(0,)`` and ``(0, 0)`` are constants that every node shares; so a recorded
node keeps one new object for its edges, not 1 + one per input: fewer objects for the cyclic
collector to walk while the graph lives, and a smaller node (W1's forward shows it; figures in
benchmarks/HISTORY.md). One flat tuple ``(fn_0, nr_0, fn_1, ...)`` would save as much in the
forward but costs the backward index arithmetic and slices. ``next_edges`` (and ``next_functions``)
give the pairs, and the constructor takes pairs."""


def split_edges(edges: Iterable[Edge]) -> tuple[tuple[Node | None, ...], tuple[int, ...]]:
    """Pairs as a node keeps them: (functions, input numbers) (Note [A node's edges are two parallel tuples])."""
    pairs = list(edges)
    return tuple([fn for fn, _ in pairs]), tuple([nr for _, nr in pairs])

NO_EDGE: Edge = (None, 0)


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
    """Register ``fn``; refused when it is an ``async def`` function.

    Hooks run synchronously inside a node, on the loop or in a kernel thread, where nothing
    could await a coroutine: an ``async def`` hook would silently never run, so it is refused.
    Anything else is stored, as torch stores it: an object that is not callable raises torch's
    ``TypeError`` ("'int' object is not callable") when a backward calls it.
    """
    if callable(fn) and inspect.iscoroutinefunction(inspect.unwrap(fn)):
        raise TypeError(
            f"hook '{hook_name(fn)}' is an async def function; hooks run synchronously inside the backward pass, "
            "so they must be plain functions (do async work in an async def custom Function backward instead)"
        )
    portal_needed[0] = True  # Note [Servers become portals on demand] in engine/worker.py
    handle = RemovableHandle(hooks)
    hooks[handle.id] = fn
    return handle


def hook_name(fn: Callable) -> str:
    """The name a hook is shown under in errors and profiles: its ``__name__``, or its class's."""
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

    ``next_edges[i]`` says where the gradient for forward input ``i`` goes (kept in ``edge_fns`` and ``edge_nrs``:
    Note [A node's edges are two parallel tuples]). ``_input_meta``
    holds (shape, dtype, device) of each forward output, against which the engine checks the
    gradients it routes here. ``work`` estimates the kernel's cost in element-operations;
    ``placement`` says how the engine uses it (Note [Placement]).
    """

    __slots__ = (
        "edge_fns", "edge_nrs", "sequence_nr", "topological_nr", "_input_meta", "_hooks", "_metadata", "work",
        "saved", "__weakref__",
    )
    placement = Placement.BY_COST
    """Where the engine runs this kind of node (Note [Placement]); op nodes go by their cost."""
    call_on_undefined = False
    """Run ``apply`` even when every incoming gradient is undefined (None)."""
    saves_variables = False
    """True when torch's node of the same name keeps SavedVariables although this one keeps no
    tensor in ``saved`` (Note [Which nodes refuse a second pass])."""
    result_vc: list | None = None
    """The version counter of a saved result that the node keeps itself rather than in ``saved``
    (a slot of ``SavesResult`` nodes, Note [A saved result kept in its node] in ops/_node.py);
    None on every other node."""

    def __init__(self, next_edges: tuple[Edge, ...] = ()) -> None:
        self.edge_fns, self.edge_nrs = split_edges(next_edges)
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
    def next_edges(self) -> tuple[Edge, ...]:
        """One ``(function, input_nr)`` per forward input (Note [A node's edges are two parallel tuples])."""
        return tuple(zip(self.edge_fns, self.edge_nrs))

    @property
    def next_functions(self) -> tuple[tuple[Node | None, int], ...]:
        return self.next_edges

    @property
    def num_outputs(self) -> int:
        """How many gradients ``apply`` returns: one per next edge (torch's ``num_outputs()``)."""
        return len(self.edge_fns)

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
            portal_needed[0] = True  # any hook dict, set by add_hook or assigned (Tensor._backward_hooks)
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

    def __call__(self, *grads: Any) -> Any:
        """``y.grad_fn(g)``: this node's backward on the gradients of its forward outputs.

        Note [Calling a node]: as torch, one argument per forward output; the result has one
        entry per next edge (a single one is returned bare), and a graph of the computation is
        recorded when grad mode is on, since the formulas run on Tensors (the create_graph path).
        No hook runs and nothing is accumulated but by the node itself (an AccumulateGrad).
        """
        self._check_call(grads)
        if all(g is None for g in grads) and not self.call_on_undefined:
            result: Any = (None,) * self.num_outputs
        else:
            result = tuple(self.apply(list(grads), True))
        return result[0] if len(result) == 1 else result

    def _check_call(self, grads: tuple) -> None:
        """One gradient per forward output (Note [Calling a node])."""
        if len(grads) != len(self._input_meta):
            raise TypeError(f"expected {len(self._input_meta)} arguments, got {len(grads)} instead")

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


# --------------------------------------------------------------------------- torch.autograd.graph
# Note [The public graph module]: ``ag.autograd.graph`` is autograd/graph.py, in the front door,
# as ``torch.autograd.graph`` is the module that holds ``Node``: it gathers the public names below
# and ``get_gradient_edge``, which returns a leaf's AccumulateGrad and so lives with it in
# variable/accumulate.py, above ``Tensor``. The names here touch a tensor only through its
# attributes and methods (``t._vc``, ``t.register_hook``, ``t.cpu()``), never by importing Tensor.


class GradientEdge(NamedTuple):
    """Where a given tensor's gradient is computed: input ``output_nr`` of ``node``.

    ``ag.grad(loss, get_gradient_edge(x))`` equals ``ag.grad(loss, x)``; edges are also accepted
    as ``outputs`` of ``grad()``/``backward()`` (with an explicit gradient) and as ``inputs=``.
    """

    node: Node
    output_nr: int
    ownership_token: Node | None = None


def increment_version(tensor: Any) -> None:
    """Bump the version counter of ``tensor`` (or of each tensor of an iterable), as an in-place
    change the library could not see: nodes that saved it then refuse to unpack it. An inference
    tensor has no version to bump (Note [Inference tensors] in grad_mode.py): as torch, nothing
    happens to it, in inference mode or out of it."""
    for t in (tensor,) if hasattr(tensor, "_vc") else tensor:
        vc = t._vc
        if getattr(vc, "tracks_version", True):
            vc[0] += 1


SavedHooks = tuple  # (pack_hook, unpack_hook)

saved_hooks: contextvars.ContextVar[SavedHooks | None] = contextvars.ContextVar(
    "asyncgrad_saved_tensors_hooks", default=None)
"""The innermost ``saved_tensors_hooks`` pair of this context (per asyncio task, as grad mode), or None."""

saved_hooks_disabled: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "asyncgrad_saved_tensors_hooks_disabled", default=None)
"""The message of the innermost ``disable_saved_tensors_hooks``, or None."""

_outer_hooks: contextvars.ContextVar[tuple] = contextvars.ContextVar("asyncgrad_outer_saved_tensors_hooks", default=())
"""The pairs (or None) that the open ``saved_tensors_hooks`` blocks of this context replaced, oldest
first (Note [Saved-tensor hooks are a stack per context])."""

portal_needed = [False]
"""Whether plain user code may ever run inside a backward on the loop: set (never reset) by the
first hook registered on a node or tensor, and by the first plain-def custom backward recorded;
``saved_tensors_hooks`` counts through ``hooks_in_use``. Until then a device's server need not be
a greenback portal (Note [Servers become portals on demand] in engine/worker.py)."""

hooks_in_use = [False]
"""Whether any ``saved_tensors_hooks`` was ever entered: until then recording reads one list item,
not a context variable (Note [Packed saved tensors] in saved.py). It never goes back to False: a
task created inside the block inherits the hooks in its context copy and may record after the
block has exited, so a count of open blocks could not say that no context holds hooks."""


# Note [Saved-tensor hooks are a stack per context]: as torch's stack of default hooks is per
# thread, each context has its own stack (``_outer_hooks`` and, on top, ``saved_hooks``): an
# enter pushes this block's pair, an exit pops the top pair, whichever block pushed it, and an
# exit with nothing pushed in this context changes nothing. The manager itself keeps no state,
# so misuse cannot strand a pair in any context: an extra exit (an unpack hook exiting the block
# that recorded its graph) pops what torch's would pop, and once the extra enters are exited the
# stack is empty; an enter from a hook during backward pushes onto the copy of the engine's
# context that the hook runs in (``PackedSavedTensor.unpacked``), never onto the caller's, so the
# caller's ``with`` block exits cleanly and the hooks end with it.
class saved_tensors_hooks:
    """Pack each tensor an op saves for backward with ``pack_hook(tensor)``; ``unpack_hook(packed)``
    gives it back when the backward needs it (torch.autograd.graph.saved_tensors_hooks).

    Only the innermost pair applies; the hooks hold for the asyncio task (context) that entered
    them. A packed tensor is not version-checked on unpack: what the hooks return is used, as torch."""

    def __init__(self, pack_hook: Callable[[Any], Any], unpack_hook: Callable[[Any], Any]) -> None:
        self.pack_hook = pack_hook
        self.unpack_hook = unpack_hook

    def __enter__(self) -> None:
        message = saved_hooks_disabled.get()
        if message is not None:
            raise RuntimeError(message)
        _outer_hooks.set(_outer_hooks.get() + (saved_hooks.get(),))
        saved_hooks.set((self.pack_hook, self.unpack_hook))
        hooks_in_use[0] = True

    def __exit__(self, *args: object) -> None:
        outer = _outer_hooks.get()
        if outer:  # Note [Saved-tensor hooks are a stack per context]
            saved_hooks.set(outer[-1])
            _outer_hooks.set(outer[:-1])


class save_on_cpu(saved_tensors_hooks):
    """Keep saved tensors on the CPU and move them back to their device for backward.

    ``pin_memory`` is accepted for torch's signature: asyncgrad's copies to the CPU are synchronous,
    so there is nothing to pin. ``device_type`` is accepted and unused, as in torch without that device.
    """

    def __init__(self, pin_memory: bool = False, device_type: str = "cuda") -> None:
        def pack_to_cpu(tensor: Any) -> tuple:
            # detach() first: on the CPU, cpu() is the tensor itself, whose grad_fn (for a saved
            # output, the saving node) would hold the packed value that holds it, a cycle.
            return (tensor.device, tensor.detach().cpu())

        def unpack_from_cpu(packed: tuple) -> Any:
            device, tensor = packed
            return tensor.to(device)

        super().__init__(pack_to_cpu, unpack_from_cpu)


@contextlib.contextmanager
def disable_saved_tensors_hooks(error_message: str) -> Generator[None, None, None]:
    """Refuse ``saved_tensors_hooks`` inside, with ``error_message`` (and refuse to start while
    hooks are in effect, as torch does)."""
    if saved_hooks.get() is not None:
        raise RuntimeError(error_message)
    token = saved_hooks_disabled.set(error_message)
    try:
        yield
    finally:
        restore(saved_hooks_disabled, token)  # Note [A switch restored where its scope ends]


def _gradient_node(t: Any) -> Node | None:
    """The node whose tensor hooks are ``t``'s: its grad_fn, or its leaf's AccumulateGrad if it has one."""
    if t.grad_fn is not None:
        return t.grad_fn
    extra = t._extra
    return extra.grad_accumulator() if extra is not None and extra.grad_accumulator is not None else None


class _MultiHandle(RemovableHandle):
    """Removes every per-tensor hook of one ``register_multi_grad_hook``."""

    __slots__ = ("handles",)

    def __init__(self, handles: tuple[RemovableHandle, ...]) -> None:
        self.handles = handles
        self.id = next(RemovableHandle._ids)
        self._hooks = {}

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()


def register_multi_grad_hook(tensors: Any, fn: Callable, *, mode: str = "all") -> RemovableHandle:
    """``fn`` once per backward over the gradients of several tensors (torch's modes).

    ``"all"``: ``fn(grads)`` with one entry per tensor, None where this backward computed no
    gradient for it; ``"any"``: ``fn(grad)`` with the first gradient computed among them.

    Note [Multi-grad hooks]: as torch, an ``"all"`` hook is called inside the backward, as soon as
    the tensor hook of the last of the tensors whose nodes this backward (graph task) runs has been
    called: at the first of them it counts those nodes (the graph task's ``will_execute``, torch's
    ``_will_engine_execute_node``), then gathers one gradient per call; a tensor hook runs whenever
    its node runs, with None for an undefined gradient (Note [Hooks on undefined gradients] in
    hook_calls.py), so the count is reached. State is kept per graph task (weakly), so concurrent
    and reentrant backwards each get their own call.
    """
    supported_modes = ("all", "any")
    if mode not in supported_modes:
        raise ValueError(f"Expects mode to be one of {supported_modes} but got {mode}")
    tensors = tuple(tensors)
    lock = threading.Lock()
    if mode == "all":
        states: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

        def inner(idx: int) -> Callable:
            def hook(grad: Any) -> None:
                graph_task = current_graph_task.get()
                if graph_task is None:
                    raise AssertionError("expected this hook to be called inside a backward call")
                with lock:
                    state = states.get(graph_task)
                    if state is None:  # [calls so far, calls expected, buffer]
                        own = _gradient_node(tensors[idx])
                        expected = sum(1 if node is own else graph_task.will_execute(node)
                                       for node in map(_gradient_node, tensors))
                        state = states[graph_task] = [0, expected, [None] * len(tensors)]
                    state[0] += 1
                    state[2][idx] = grad
                    done = state[0] == state[1]
                    if done:
                        del states[graph_task]
                if done:
                    fn(state[2])

            return hook

        handles = tuple(t.register_hook(inner(i)) for i, t in enumerate(tensors))
    else:
        # held weakly, not by id(): a failed backward runs no final callback and is freed at once
        # (Note [A failed backward frees its graph] in engine/scope.py), and a later graph task may reuse its id
        ran: weakref.WeakSet = weakref.WeakSet()

        @functools.wraps(fn)
        def wrapped(grad: Any) -> None:
            graph_task = current_graph_task.get()
            if graph_task is None:
                raise AssertionError("expected this hook to be called inside a backward call")
            with lock:
                if graph_task in ran:
                    return
                ran.add(graph_task)
            fn(grad)

        handles = tuple(t.register_hook(wrapped) for t in tensors if t._requires_grad)
    return _MultiHandle(handles)


mutation_context: list = [None]
"""The open ``allow_mutation_on_saved_tensors`` block's state, or None: while one is open, every
in-place write asks ``before_write`` first (Note [Mutation on saved tensors])."""

_ALLOW_MUTATION_OUTSIDE = ("Trying to backward outside of the 'allow_mutation_on_saved_tensors' context"
                           "in which the graph was originally recorded.")


class _Handle:
    """What the graph keeps for one tensor saved inside the block: the block's maps hold it weakly,
    so its entries go when the graph that saved it goes."""

    __slots__ = ("__weakref__",)


class _AllowMutationOnSavedContext:
    """The state of one ``allow_mutation_on_saved_tensors`` block, in torch's maps: ``original`` and
    ``cloned`` (by handle, weakly), ``tid_to_weakhandle`` (a saved tensor, by object, counter and
    version, to its handle) and ``sid_to_tid`` (the saved tensors of one counter and version)."""

    def __init__(self) -> None:
        self.cloned: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self.original: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self.tid_to_weakhandle: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
        self.sid_to_tid: dict[tuple, set] = {}

    def clear(self) -> None:
        self.cloned.clear()
        self.original.clear()
        self.tid_to_weakhandle.clear()
        self.sid_to_tid.clear()

    def pack(self, tensor: Any) -> _Handle:
        vc = tensor._vc
        sid = (id(vc), vc[0])
        tid = (id(tensor),) + sid
        self.sid_to_tid.setdefault(sid, set()).add(tid)
        handle = self.tid_to_weakhandle.get(tid)
        if handle is None:  # the same tensor at the same version saved again shares its handle
            handle = self.tid_to_weakhandle[tid] = _Handle()
            self.original[handle] = tensor
        return handle

    def unpack(self, handle: _Handle) -> Any:
        if mutation_context[0] is None:
            raise AssertionError(_ALLOW_MUTATION_OUTSIDE)
        cloned = self.cloned.get(handle)
        if cloned is not None:
            return cloned
        original = self.original.get(handle)
        if original is None:  # another block's graph: this block never saw the tensor
            raise AssertionError(_ALLOW_MUTATION_OUTSIDE)
        return original

    def before_write(self, tensor: Any) -> None:
        """``tensor`` is about to be written in place: every saved tensor that shares its memory (its
        version counter) at its current version is cloned first, once."""
        vc = tensor._vc
        for tid in self.sid_to_tid.get((id(vc), vc[0]), ()):
            handle = self.tid_to_weakhandle.get(tid)
            if handle is None or handle in self.cloned:  # saved, then freed by its backward; or cloned already
                continue
            original = self.original.pop(handle)
            self.cloned[handle] = original.detach().clone()


def before_write(tensor: Any) -> None:
    """Called by every in-place write while a block is open (Note [Mutation on saved tensors])."""
    ctx = mutation_context[0]
    if ctx is not None:
        ctx.before_write(tensor)


@contextlib.contextmanager
def allow_mutation_on_saved_tensors() -> Generator[_AllowMutationOnSavedContext, None, None]:
    """Tensors saved for backward inside may be changed in place: the backward sees the values
    they had when saved. Forward and backward must both run inside the block (torch's rule).

    Note [Mutation on saved tensors]: as torch's, each tensor saved inside the block is kept as
    itself (a pack hook: ``original``, by a handle the graph holds), and is cloned only when an
    in-place op is about to write its memory at the version it was saved at: ``apply_inplace`` and
    the other in-place writers (``resize_``, ``set_``) call ``before_write`` first while a block is
    open, and the fast untracked writes step aside for them. The backward gets the clone, or the
    tensor itself when nothing wrote it. The maps hold handles weakly, so what a graph saved goes
    with the graph, and the block's exit clears them: a backward after it, or in another block,
    is refused with torch's AssertionError. Blocks do not nest (torch's RuntimeError), and a
    refused inner block leaves the outer one open.
    """
    ctx = _AllowMutationOnSavedContext()
    with saved_tensors_hooks(ctx.pack, ctx.unpack):
        if mutation_context[0] is not None:
            raise RuntimeError("allow_mutation_on_saved_tensors contexts cannot be nested")
        mutation_context[0] = ctx
        try:
            yield ctx
        finally:
            ctx.clear()
            mutation_context[0] = None
