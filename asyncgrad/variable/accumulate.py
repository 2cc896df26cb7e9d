"""Where a tensor's gradient goes: its ``grad_fn``, or its leaf's ``AccumulateGrad``.

``AccumulateGrad`` sits above ``Tensor`` (it writes ``.grad``), so a leaf keeps only a weak
reference to its accumulator and this module creates it; every op, the front door and custom
Functions take a tensor's edge from ``gradient_edge``.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

from asyncgrad._layout import contiguous_strides, contract_strides, element_strides, obeys_layout_contract
from asyncgrad.devices.ownership import owned_by
from asyncgrad.dtypes import numpy_dtype
from asyncgrad.graph import node as graph_node
from asyncgrad.graph.node import NO_EDGE, Edge, GradientEdge, Node, Placement
from asyncgrad.tensor import Tensor, creation_lock
from asyncgrad.variable.hook_calls import type_name_of

LEAF_SEQUENCE_NR = (1 << 64) - 1
next_sequence = graph_node._sequence.__next__  # Node's numbering
"""torch's ``UINT64_MAX``, the sequence number of every AccumulateGrad (Note [Leaves run first])."""

# Note [Leaves run first]: torch numbers every AccumulateGrad ``UINT64_MAX``, so that among the
# ready nodes of one reentrant depth a leaf's sink is popped before any op's node (Note [Priority]
# in engine/ready_queue.py): a tensor hook on a leaf runs as soon as its gradient is complete,
# before a later node that may raise (torch's multithreaded ``register_multi_grad_hook(mode="any")``
# test counts on it). Here the number is ``UINT64_MAX`` plus the node's own creation number: it
# still sorts above every op's node, and it stays unique and spread modulo ``SPREAD``, so the sharded
# dependency maps (Note [Sharded counts] in engine/counts.py) keep leaves apart; one shared number
# would put every leaf into one shard. Among leaves, the later-created runs first, as among ops.


class AccumulateGrad(Node):
    """The sink of a leaf: adds the incoming gradient into ``variable.grad``.

    One per leaf, reused while the leaf lives: the leaf holds it weakly, it holds the leaf.

    Note [One writer per leaf]: backwards on several threads (``backward_sync`` from plain
    threads, several event loops) may accumulate into one leaf at once, and numpy releases
    the GIL inside ``old += grad``, so two unguarded additions lose updates. As torch does
    (its AccumulateGrad holds a mutex), ``apply`` holds the leaf's lock around the read of
    ``.grad``, the addition, the write and the post-accumulate hooks. On one loop the lock
    is never contended (accumulation always runs inline on the loop), so it costs one acquire
    and one release per leaf and backward. Nothing that can wait on another thread runs under
    it but post-accumulate hooks, which torch also runs under its mutex: a hook must not
    block on a backward of another thread into the same leaf.
    """

    __slots__ = ("variable", "lock")
    placement = Placement.ON_LOOP
    """Always inline: on one loop, accumulation into a leaf is never concurrent (Note [Placement])."""

    def __init__(self, variable: Tensor) -> None:
        # Node.__init__'s stores, for a node with no next edges (no edges to split, topological number 0):
        # every slot Node.__init__ sets is set here (tests/engine/test_leaf_sink_beside_chain.py checks it)
        self.edge_fns = self.edge_nrs = ()
        self.sequence_nr = next_sequence() + LEAF_SEQUENCE_NR  # Note [Leaves run first]
        self.topological_nr = 0
        self._hooks = self._metadata = None
        self.work = 0
        self.saved = ()
        self.variable = variable
        self.lock = threading.Lock()
        self._input_meta = ((variable.shape, numpy_dtype(variable.dtype), variable.device),)  # the array's dtype
        extra = variable._extra
        if extra is not None and extra.hooks is not None:
            self._register_hook_dict(extra.hooks)

    @property
    def call_on_undefined(self) -> bool:  # type: ignore[override]
        """Only a leaf with post-accumulate hooks is called on an undefined gradient: torch runs
        them then too, with ``.grad`` as it was (Note [Hooks on undefined gradients] in hook_calls.py)."""
        extra = self.variable._extra
        return extra is not None and bool(extra.post_accumulate_hooks)

    def apply(self, grads: list, create_graph: bool) -> tuple:
        with self.lock:
            if grads[0] is not None:
                accumulate_grad(self.variable, grads, create_graph)
            else:
                post_accumulate(self.variable)
        return ()


def accumulate_grad(variable: Tensor, grads: list, create_graph: bool) -> None:
    """``variable.grad += grads[0]`` with torch's rules: the first gradient is stolen when
    nothing else sees it, else copied; with create_graph always copied through ``copy_``, so a
    recorded one's ``.grad`` has grad_fn CopyBackwards over it (torch's clone_obey_contract);
    later ones are added in place unless a graph is being recorded."""
    steal = not create_graph and owned_by(grads, 0)
    grad = grads[0]
    old = variable._grad
    if create_graph:
        if old is None:  # torch's clone_obey_contract: a fresh copy, recorded (CopyBackwards) when grad is
            new = Tensor._make(_contract_empty(variable), variable.device, False, None, 0, [0])
            variable._grad = new.copy_(grad if grad.requires_grad else grad.detach())
        else:
            variable._grad = old + grad
    elif old is None:
        backend = variable.device.backend
        # (Note [The gradient layout contract]) a row-major copy suits a row-major leaf as it is
        if not steal:
            grad = backend.copy(grad, "C")
            if not backend.is_contiguous(variable._data):
                grad = _obey_contract(variable, grad)
        elif backend.strides(grad) != backend.strides(variable._data):
            grad = _obey_contract(variable, grad)
        variable._grad = Tensor._make(grad, variable.device, False, None, 0, [0])
    elif old.requires_grad:
        variable._grad = Tensor._make(old.data + grad, variable.device, False, None, 0, [0])
    else:
        old.data += grad
        old._vc[0] += 1
    post_accumulate(variable)


def post_accumulate(variable: Tensor) -> None:
    """The leaf's post-accumulate hooks, with torch's checks of what they return."""
    extra = variable._extra
    if extra is not None and extra.post_accumulate_hooks:
        for fn in list(extra.post_accumulate_hooks.values()):
            result = fn(variable)
            if result is not None:  # torch's words, for a non-Tensor and for a Tensor
                if not isinstance(result, Tensor):
                    raise TypeError(f"expected Variable, but hook returned '{type_name_of(result)}'")
                raise RuntimeError("Tensor post accumulate grad hooks should return None.")


def _obey_contract(variable: Tensor, grad: Any) -> Any:
    """``grad`` (an array the leaf may keep: stolen or a fresh copy) itself when it obeys the
    layout contract, else a copy that does.

    Note [The gradient layout contract]: as torch's AccumulateGrad (accumulate_grad.h,
    utils/grad_layout_contract.h), a new ``.grad`` of a leaf that is non-overlapping and dense
    (some permutation of its dims is contiguous: a channels-last or transposed leaf) has the
    leaf's strides, so an optimizer's ``p -= lr * p.grad`` walks both in the same order; any
    other leaf's (a view with gaps, an expanded one) is row-major. A stolen gradient must
    already obey; a copied one is laid out so. Later gradients are added in place, keeping that
    layout (or, recording a graph, ``old + new``, whose layout follows ``old``). The common case
    costs one check: a stolen gradient of a row-major leaf has the leaf's very strides (one
    comparison of two strides tuples), a gradient copied row-major as before suits a row-major
    leaf (``is_contiguous`` on the leaf); this function is called only when they fail.
    A dim of size 1 is free, as in torch: a gradient that differs from the leaf only there is kept.
    """
    backend = variable.device.backend
    data = variable._data
    itemsize = variable.dtype.itemsize
    shape = tuple(data.shape)
    strides = element_strides(backend.strides(data), itemsize)
    if obeys_layout_contract(shape, element_strides(backend.strides(grad), itemsize), strides):
        return grad
    wanted = contract_strides(shape, strides)
    if wanted == contiguous_strides(shape):
        return backend.copy(grad, "C")
    return backend.copy_strided(grad, wanted)


def _contract_empty(variable: Tensor) -> Any:
    """An uninitialised array for a new ``.grad`` of ``variable``, laid out as Note [The gradient
    layout contract] says (torch's clone_obey_contract allocates it with new_empty_strided)."""
    backend = variable.device.backend
    data = variable._data
    if backend.is_contiguous(data):
        return backend.empty(variable.shape, variable.dtype)
    shape = tuple(data.shape)
    strides = contract_strides(shape, element_strides(backend.strides(data), variable.dtype.itemsize))
    return backend.empty_strided(shape, strides, variable.dtype)


def grad_accumulator(t: Tensor) -> AccumulateGrad:
    """The leaf's AccumulateGrad, created on first use and shared while the leaf lives."""
    extra = t._extras()
    acc = extra.grad_accumulator() if extra.grad_accumulator is not None else None
    if acc is None:
        with creation_lock:  # one AccumulateGrad, hence one lock, per leaf (Note [One writer per leaf])
            acc = extra.grad_accumulator() if extra.grad_accumulator is not None else None
            if acc is None:
                acc = AccumulateGrad(t)
                extra.grad_accumulator = weakref.ref(acc)
    return acc


def gradient_edge(t: Tensor) -> Edge:
    """Where the gradient for ``t`` goes (torch's ``impl::gradient_edge``): its grad_fn, or its
    leaf's AccumulateGrad; NO_EDGE for a tensor that does not require grad."""
    if not t._requires_grad:
        return NO_EDGE
    fn = t.grad_fn
    if fn is not None:
        return (fn, t.output_nr)  # Note [Edges are plain pairs] in graph/node.py
    return (grad_accumulator(t), 0)


def get_gradient_edge(tensor: Tensor) -> GradientEdge:
    """Where the gradient of ``tensor`` is computed (torch.autograd.graph.get_gradient_edge):
    ``ag.grad(loss, get_gradient_edge(x))`` equals ``ag.grad(loss, x)``."""
    if not tensor._requires_grad:
        raise RuntimeError(
            "It is not possible to get the gradient edge for a Tensor that does not require gradients")
    fn, output_nr = gradient_edge(tensor)
    assert fn is not None  # a tensor that requires grad has a grad_fn or an AccumulateGrad
    return GradientEdge(fn, output_nr)
