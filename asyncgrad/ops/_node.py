"""What every op shares: recording its node, and the formula namespace on raw arrays.

Note [Two namespaces for one formula]: each backward formula is written once, against a
namespace ``F``. ``ArrayMath`` (here) runs it on raw device arrays: the fast path, nothing
recorded. ``TensorMath`` (``tensor_math.py``) runs it on Tensors with the ops themselves, so
that with ``create_graph=True`` the backward pass is recorded and gradients of gradients work
to any order. The ops are built on this module, so ``TensorMath`` cannot be imported here: it
sets ``OpNode.graph_math`` when ``asyncgrad.ops`` imports it, before any op can run.
"""

from __future__ import annotations

import linecache
import math
import weakref
from typing import Any

import numpy as np

from asyncgrad.devices import Device
from asyncgrad.devices.backend import STREAMS_ACTIVE, backend_of
from asyncgrad.devices.streams import note_forward
from asyncgrad.dtypes import NUMPY_DTYPE_CLASSES, numpy_dtype
from asyncgrad.graph import node as graph_module
from asyncgrad.graph.anomaly import ANOMALY_USED, anomaly_enabled, forward_traceback
from asyncgrad.graph.grad_mode import INFERENCE_ACTIVE, grad_enabled, inference_enabled
from asyncgrad.graph.node import NO_EDGE, RELEASED, SECOND_BACKWARD, Node, hooks_in_use, saved_hooks, split_edges
from asyncgrad.graph.recorder import PROFILING, note_op
from asyncgrad.ops import windows
from asyncgrad.tensor import INFERENCE_MODE_VIEW, MULTI_OUTPUT_VIEW, NO_GRAD_VIEW, Tensor
from asyncgrad.variable.accumulate import gradient_edge
from asyncgrad.variable.saved import RawSavedTensor, SavedTensor, saved_variable, unpack_arrays

_new = object.__new__
_make = Tensor._make
_next_sequence = graph_module._sequence.__next__  # Node's numbering (Note [Recording inlined])
_ndarray = np.ndarray
_np_generic = np.generic
_np_dtype = np.dtype
_NUMPY_DTYPE_CLASSES = NUMPY_DTYPE_CLASSES


class OpNode(Node):
    """A built-in backward node: ``backward(F, grad)`` returns one gradient per next edge."""

    __slots__ = ()
    work_per_element = 1
    """The backward's cost per output element, in multiplies.

    Note [Cost classes]: the engine runs a BY_COST node inline on the loop when its ``work``
    (``record`` sets it to this times the output's elements, unless the op says otherwise) is
    below the device's inline threshold, so ``work`` must track time, not elements. A node class
    whose backward calls a transcendental or divides costs several multiplies per element (the
    classes' figures are in benchmarks/HISTORY.md); a backward that only reshapes or passes its
    gradient on costs 0."""
    saves_result = False
    """True when the backward needs the op's own result: ``record`` saves it last in ``saved`` (or in
    the node's own slots: Note [A saved result kept in its node])."""
    keeps_result = False
    """True for ``SavesResult`` classes, which may keep the saved result in their own slots."""

    same_meta = False
    """True when the output has the first input's shape and device by construction (elementwise
    unary ops, a float tensor with a Python number): ``record`` then reuses that input's node's
    meta when the dtypes agree too (Note [An output's meta taken from its input])."""

    graph_math: Any = None
    """The formula namespace on Tensors, ``TensorMath`` (Note [Two namespaces for one formula])."""

    _recipe: Any = None
    """``(same_meta, make)``: the class's ``same_meta`` and its compiled ``make(fns, nrs,
    sequence_nr, topo, meta, out, work, fields, device, vc, saved, view_of)``, which returns the
    recorded result (Note [A node made by its class's own code], Note [The result made with its
    node])."""

    fields: tuple[str, ...] = ()
    """The slots the class and its op bases add to Node, bases' first: what ``record`` fills."""

    saved_names: tuple[str | None, ...] = ()
    """torch's names of the first entries of ``saved`` (its node's argument names: ``("self",
    "other")``), in the order ``record`` is given them, None for an entry torch does not name; a
    saved result needs none (Note [Saved tensors read by name])."""

    __init__ = object.__init__
    """Note [An op node made by calling its class]: ``record``'s ``make`` makes the node as
    ``cls()``, which CPython runs in C (``type_call``: ``object_new``, then this ``object_init``)
    when no ``__init__`` written in Python is on the way; ``object.__new__(cls)`` goes through
    ``tp_new_wrapper``, which builds and slices an argument tuple and checks the base first. Node's
    own ``__init__`` (edges in, numbering) is for nodes made otherwise; every slot it sets is set by
    ``make`` (Note [A node made by its class's own code]), and the op nodes that inplace.py and
    views.py make by hand call ``Node.__init__`` themselves. Called with arguments, an op node
    class raises TypeError (torch refuses to make its nodes from Python, in other words). What it
    buys: W1's forward (``python -m benchmarks --only W1``)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        names: list[str] = []
        for klass in reversed(cls.__mro__):
            if klass is not OpNode and issubclass(klass, OpNode) and klass.__dict__.get("_slots_are_fields", True):
                slots = klass.__dict__.get("__slots__", ())
                names += [slots] if isinstance(slots, str) else list(slots)
        cls.fields = tuple(names)
        cls._recipe = (cls.same_meta, _node_maker(cls))
        _name_saved(cls)

    def apply(self, grads: list, create_graph: bool) -> Any:
        if create_graph:
            return self.backward(self.graph_math, grads[0])
        return self.backward(ArrayMath, grads[0])

    def backward(self, F: Any, grad: Any) -> Any:
        raise NotImplementedError

    def needs(self, index: int) -> bool:
        return self.edge_fns[index] is not None


# Note [Saved tensors read by name]: torch's generated nodes give each saved argument as a
# property, ``_saved_<name>`` after the argument of the op's signature (``MulBackward0._saved_self``
# and ``_saved_other``, ``ExpBackward0._saved_result``): the saved tensor unpacked as the backward
# would unpack it, so a version change, freed saved tensors and saved-tensor hooks (a checkpointed
# region recomputes) act as in a backward. Here a class names the entries of its ``saved`` in
# ``saved_names`` and ``__init_subclass__`` makes the properties from that, one per name, plus
# ``_saved_result`` for a class that saves its result (the last entry); every property reads the
# node's saved-variable record through ``saved_variable`` (variable/saved.py), and each has its
# ``_raw_saved_<name>`` twin, whose ``register_hooks`` packs the entry as saved-tensor hooks would
# (``RawSavedTensor``). A class without names has no such properties, as a torch node has none for
# what it does not save.
def _name_saved(cls: type[OpNode]) -> None:
    """The ``_saved_<name>`` properties of ``cls`` (Note [Saved tensors read by name])."""
    names = [(name, index) for index, name in enumerate(cls.saved_names) if name is not None]
    if cls.saves_result:
        names.append(("result", -1))
    for name, index in names:
        attr = "_saved_" + name
        if attr not in cls.__dict__:
            setattr(cls, attr, property(lambda node, index=index: saved_variable(node, index),
                                        doc=f"torch's ``{attr}``: the saved tensor, unpacked as the backward would."))
            setattr(cls, "_raw" + attr, property(lambda node, index=index: RawSavedTensor(node, index),
                                                 doc=f"torch's ``_raw{attr}``: the saved tensor, for its hooks."))


# Note [A node made by its class's own code]: ``record`` stores a dozen slots into every node
# it makes. Written in ``record`` itself, each store meets nodes of every class (W1 alternates
# three), so CPython's specialised slot store misses and takes the generic ``setattr`` path; the
# op's fields went through a further call (``_set_fields``). This function compiles, once per op
# class, a function making that class's node: every store in it meets one class (specialised),
# the fields are one unpacking assignment (``node.a_shape, node.b_shape, node.alpha = fields``,
# a sixth of a ``setattr`` loop for three), and ``work`` is the class's ``work_per_element``
# (read here, at class creation: a class sets it in its body) times the output's elements,
# unless the op gave its own (a class whose backward costs nothing never asks ``out.size``).
# Another number of fields than slots goes to ``_some_fields``.
# The stores must be those of Node.__init__ (graph/node.py; tests/ops/test_record_node_slots.py checks
# every slot is set). It is compiled with ``exec`` because the specialisation is per code object:
# one shared function or closure would meet every class again (W1's forward, ``python -m
# benchmarks --only W1``: the figures are in benchmarks/HISTORY.md). Its source is kept where
# tracebacks find it (Note [A generated make_node shows its source]).
#
# Note [The result made with its node]: the compiled ``make`` also builds the result Tensor
# (Tensor._make's stores, as ``record`` did) and keeps the saved result, with the class's
# ``saves_result`` and ``keeps_result`` read here, once: in ``record`` each was a read of a class
# attribute on classes that vary from node to node (CPython 3.11 does not specialise those), and
# ``node.result``/``node.result_vc`` were stores on nodes of many classes. ``same_meta`` comes
# with ``make`` in one read (``_recipe``). A class's tensors in ``saved`` go through
# ``_save_inputs``, as before (saved-tensor hooks, views and a numpy scalar result as before: the
# same tests, in the same order). A number of fields other than the slots' is handled by
# ``_some_fields`` (the first ones, as ``zip`` pairs them; TypeError for too many), so a
# ValueError from a pack hook is never taken for one. What it buys: W1's forward
# (``python -m benchmarks --only W1``).
def _node_maker(cls: type) -> Any:
    """The compiled ``make_node`` of ``cls`` (Note [A node made by its class's own code] above)."""
    names = cls.fields
    per_element = cls.work_per_element
    if names:
        targets = ", ".join("node." + name for name in names)
        set_fields = (f"    if fields:\n        try:\n            {targets}, = fields\n"
                      "        except ValueError:\n            _some_fields(node, fields)\n")
    else:
        set_fields = "    if fields:\n        _some_fields(node, fields)\n"
    work = "0" if per_element == 0 else "out.size" if per_element == 1 else f"out.size * {per_element!r}"
    if cls.saves_result and cls.keeps_result:  # Note [A saved result kept in its node]
        save_result = (
            "    elif view_of is None and (not hooks_in_use[0] or saved_hooks.get() is None):\n"
            "        node.result = result._data\n"
            "        if vc is None:  # Note [A version counter made when first asked for]\n"
            "            vc = result._counter = [0]\n"
            "        node.result_vc = vc\n"
            "    else:\n"
            "        node.result = node.result_vc = None\n"
            "        node.saved = (SavedTensor(result, True),)\n"
        )
    elif cls.saves_result:
        save_result = "    else:\n        node.saved = (SavedTensor(result, True),)\n"
    else:
        save_result = ""
    source = (
        "def make_node(fns, nrs, sequence_nr, topo, meta, out, work, fields, device, vc, saved, view_of):\n"
        "    node = cls()  # Note [An op node made by calling its class]\n"
        "    node.edge_fns = fns\n"
        "    node.edge_nrs = nrs\n"
        "    node.sequence_nr = sequence_nr\n"
        "    node.topological_nr = topo\n"
        "    node._hooks = None\n"
        "    node._metadata = None\n"
        "    node.saved = ()\n"
        "    node._input_meta = meta\n"
        f"    node.work = {work} if work is None else work\n"
        f"{set_fields}"
        "    if out.__class__ is not _ndarray and isinstance(out, _np_generic):\n"
        "        if vc is None:\n"
        "            vc = [0]\n"
        "        result = _make(out, device, True, node, 0, vc)  # a numpy scalar, made a 0-d array there\n"
        "    else:\n"
        "        result = _new(Tensor)  # Note [Recording inlined]\n"
        "        result._data = out  # the slot itself, as Tensor._make (Note [The data slot] in tensor.py)\n"
        "        result.device = device\n"
        "        result._requires_grad = True\n"
        "        result.grad_fn = node\n"
        "        result.output_nr = 0\n"
        "        result._grad = None\n"
        "        result._counter = vc  # None for a new counter (Note [A version counter made when first asked for])\n"
        "        result._extra = None\n"
        "    if saved:\n"
        "        _save_inputs(cls, node, result, saved)\n"
        f"{save_result}"
        "    return result\n"
    )
    namespace: dict = {"_new": _new, "cls": cls, "_some_fields": _some_fields, "_ndarray": _ndarray,
                       "_np_generic": _np_generic, "_make": _make, "Tensor": Tensor, "_save_inputs": _save_inputs,
                       "hooks_in_use": hooks_in_use, "saved_hooks": saved_hooks, "SavedTensor": SavedTensor}
    # Note [A generated make_node shows its source]: the source is kept, under a file name that says
    # whose it is, where tracebacks, pdb and ``inspect.getsource`` read source lines (linecache), and
    # ``make_node_source(cls)`` returns it.
    filename = f"<asyncgrad.ops._node make_node of {cls.__module__}.{cls.__qualname__}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    exec(compile(source, filename, "exec"), namespace)
    return namespace["make_node"]


def make_node_source(cls: type[OpNode]) -> str:
    """The source of ``cls``'s generated ``make_node`` (Note [A node made by its class's own code])."""
    return "".join(linecache.getlines(cls._recipe[1].__code__.co_filename))


def _some_fields(node: OpNode, fields: tuple) -> None:
    """Another number of fields than the class keeps: the first ones, as ``zip`` pairs them, or
    TypeError for too many."""
    names = node.fields
    if len(fields) > len(names):
        raise TypeError(f"{type(node).__name__} keeps {len(names)} fields, got {len(fields)}")
    for name, value in zip(names, fields):
        setattr(node, name, value)


def _save_inputs(cls: type[OpNode], node: OpNode, result: Tensor, saved: tuple) -> None:
    """The tensors an op saves (``record``'s ``saved``), then its own result when the class saves it."""
    kept = (None if saved[0] is None else SavedTensor(saved[0]),) if len(saved) == 1 else tuple(
        [None if t is None else SavedTensor(t) for t in saved])
    node.saved = kept + (SavedTensor(result, True),) if cls.saves_result else kept
    if cls.keeps_result:
        node.result = node.result_vc = None


class SavesVariables(OpNode):
    """An op node whose torch twin keeps SavedVariables where it keeps no tensor (a number, indices,
    CopySlices' ``fn``): released like a node with saved tensors, and refused once released
    (Note [Which nodes refuse a second pass] in graph/node.py). A node with saved tensors refuses
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


# Note [A saved result kept in its node]: a node keeps what it saved as a tuple of SavedTensors,
# and for a saved result that is two objects the cyclic collector tracks (the entry and the
# tuple) plus their construction, for every tanh, exp, sigmoid, relu... of a graph. A node of
# this class keeps its result instead as ``result`` (the array) and ``result_vc`` (its version
# counter, at 0 when saved: ``record`` keeps it so only for a fresh output, no saved tensors
# hooks active, nothing else saved), and ``saved`` stays empty. ``unpack_arrays`` checks the
# version and hands the array on; every other reader of ``saved`` (the recorded backward's
# ``unpack_tensors``, an in-place op rewriting the entry, a modified result's error, drawing the
# graph) first calls ``keep_result_as_saved``, which makes the SavedTensor ``record`` would have
# made, so those paths and torch's error texts are as for any node. Release empties both slots.
# The unary table's ops that save their result are of this class (``_generate`` in
# elementwise.py), and so are softmax's and log_softmax's nodes; a hand-written node that saves
# its result beside other tensors keeps SavedTensors. What it buys: W1's forward and the
# collector's passes over a recorded graph (``python -m benchmarks --only W1``).
class SavesResult(OpNode):
    """An op node whose backward needs only the op's own result, kept in two slots of its own."""

    __slots__ = ("result", "result_vc")
    saves_result = True
    saves_variables = True  # what it keeps is released like saved tensors (the engine asks this)
    keeps_result = True
    _slots_are_fields = False  # ``record`` fills them itself; an op's ``fields`` are its own

    def release_variables(self) -> None:
        self.saved = RELEASED
        self.result = self.result_vc = None


_META: dict[tuple, tuple] = {}


def input_meta(shape: tuple[int, ...], dtype: Any, device: Device) -> tuple:
    """The interned ``((shape, dtype, device),)`` of a one-output node.

    Interning keeps the objects that every recorded node holds for its whole life down to
    those it cannot share, which is what keeps Python's cyclic GC from taxing the forward.
    """
    key = (shape, numpy_dtype(dtype), device)  # the array's dtype (Note [Dtypes are numpy dtypes underneath])
    meta = _META.get(key)
    if meta is None:
        if len(_META) > 4096:
            _META.clear()
        meta = _META[key] = (key,)
    return meta


def recording(*inputs: Tensor | None) -> bool:
    """Whether an op on ``inputs`` records a node: grad mode is on and an input requires grad.
    ``record`` asks this itself; a forward asks first only to skip work that only the node needs."""
    if not grad_enabled.get():
        return False
    for t in inputs:
        if t is not None and t._requires_grad:
            return True
    return False


def record(cls: type[OpNode], inputs: tuple[Tensor | None, ...], out: Any, device: Device, *fields: Any,
           saved: tuple[Tensor | None, ...] = (), work: int | None = None, view_of: Tensor | None = None) -> Tensor:
    """Note [One way to record an op]: every differentiable op returns through this function.

    An op is declared once, as an ``OpNode`` subclass beside its forward: the node's name (the
    class name, torch's), its backward formula (``backward(F, grad)``, one gradient per input), the
    fields it keeps (``OpNode.fields``: its ``__slots__`` after its op bases', filled in order from
    ``fields``), what it saves (the tensors in ``saved``, version-checked on unpack, plus its own
    result when the class says ``saves_result``) and its cost class (``work_per_element``, Note
    [Cost classes]). The forward computes ``out`` on the device's arrays and hands everything here;
    ``record`` returns a plain tensor when nothing records (grad mode off, or no input requires
    grad), else builds the node with one edge per input (``gradient_edge``; None inputs, numbers,
    and tensors that need no gradient get none), its output metadata, its cost and, in anomaly mode,
    the forward's traceback; and it makes the output a view of ``view_of`` (sharing its version
    counter and base) when given: a view op's output is a view whether or not it records.
    """
    vc = None if view_of is None else view_of._vc  # Note [A version counter made when first asked for]
    # One and two inputs (nearly every op) are spelled out: the per-op cost of the forward is
    # mostly this function's. Inputs are asked before grad mode (a plain result asks no context
    # variable), and the first input's edge to a non-leaf is built here (gradient_edge's first case).
    n = len(inputs)
    if n == 2:
        a, b = inputs
        ra = a is not None and a._requires_grad
        if (ra or (b is not None and b._requires_grad)) and grad_enabled.get():
            # Note [A node's edges are two parallel tuples] in graph/node.py: (0, 0) is shared
            fn = a.grad_fn if ra else None
            if fn is not None:
                na = a.output_nr
            else:
                fn, na = gradient_edge(a) if ra else NO_EDGE
            fb, nb = NO_EDGE if b is None else gradient_edge(b)
            fns: tuple | None = (fn, fb)
            nrs = (na, nb) if na or nb else (0, 0)
            # Note [Topological numbers without a loop]: each input node's topological_nr read once
            # (the nodes are of many classes, so each read takes CPython's generic path: Note [A
            # node made by its class's own code]), and no loop over the edges for one or two inputs
            # (W1's forward, ``python -m benchmarks --only W1``).
            topo = 0 if fn is None else fn.topological_nr + 1
            if fb is not None:
                edge_topo = fb.topological_nr
                if edge_topo >= topo:
                    topo = edge_topo + 1
        else:
            fns = None
    elif n == 1:
        a = inputs[0]
        if a is not None and a._requires_grad and grad_enabled.get():
            fn = a.grad_fn
            if fn is not None:
                na = a.output_nr
            else:
                fn, na = gradient_edge(a)
            fns = (fn,)
            nrs = (na,) if na else (0,)
            topo = 0 if fn is None else fn.topological_nr + 1  # Note [Topological numbers without a loop]
        else:
            fns = None
    elif recording(*inputs):
        fns, nrs = split_edges([NO_EDGE if t is None else gradient_edge(t) for t in inputs])
        topo = 0
        for edge_fn in fns:
            if edge_fn is not None:
                edge_topo = edge_fn.topological_nr
                if edge_topo >= topo:
                    topo = edge_topo + 1
    else:
        fns = None
    if fns is not None:
        # Note [Recording inlined]: Node.__init__ and Tensor._make are spelled out, as they would
        # run: both in the class's own compiled ``make`` (Note [A node made by its class's own
        # code]), and the node's meta and work are stored once (W1's forward, ``python -m benchmarks
        # --only W1``). They must store what Node.__init__ (graph/node.py) and Tensor._make (tensor.py)
        # store; tests/ops/test_record_node_slots.py checks that every slot of both is set on a
        # recorded result.
        sequence_nr = _next_sequence()
        # Note [An output's meta taken from its input]: an op whose class says ``same_meta`` makes
        # an output of its first input's shape on its device; when that input is output 0 of a
        # one-output node and the dtypes are the same object, that node's interned meta is the
        # output's, and building and hashing a key is skipped. A leaf input (its AccumulateGrad's
        # meta is not interned), another output, or another dtype object takes the lookup. ``fn``
        # must still be the first input's node here (an op with a number has inputs ``(a, None)``).
        # What it buys: W1's forward (``python -m benchmarks --only W1``).
        same_meta, make = cls._recipe
        meta = (fn._input_meta if same_meta and not na and fn is not None and fn is a.grad_fn
                and out.dtype is a._data.dtype else None)
        if meta is None or len(meta) != 1:
            dtype = out.dtype  # the meta holds the array's numpy dtype (Note [Dtypes are numpy dtypes underneath])
            if dtype.__class__ not in _NUMPY_DTYPE_CLASSES and not isinstance(dtype, _np_dtype):
                dtype = device.backend.dtype(out)  # Note [Is it a numpy dtype] in dtypes.py
            key = (out.shape, dtype, device)
            meta = _META.get(key)  # input_meta's lookup, without its call
            if meta is None:
                meta = input_meta(*key)
        # Note [A node made by its class's own code], Note [The result made with its node]
        result = make(fns, nrs, sequence_nr, topo, meta, out, work, fields, device, vc, saved, view_of)
        if STREAMS_ACTIVE[0]:  # Note [Streaming backwards] in engine/stream_sync.py: never true on a cpu-only run
            note_forward(result.grad_fn, device)
        if ANOMALY_USED[0] and anomaly_enabled.get()[0]:  # Note [Anomaly mode read once it was used]
            result.grad_fn.metadata["traceback_"] = forward_traceback()
        if view_of is not None:
            mark_view(result, view_of, cls)
        if PROFILING:  # Note [Forward ops reach the profiler through record] in graph/recorder.py
            note_op(cls, inputs, result, sequence_nr, view_of is None)
        return result
    result = _make(out, device, False, None, 0, [0] if vc is None else vc)
    if view_of is not None:
        if INFERENCE_ACTIVE[0]:
            result._vc = vc  # a view shares its base's counter, inference or not (Note [Inference tensors])
        mark_view(result, view_of, cls)
    if PROFILING:
        note_op(cls, inputs, result, -1, view_of is None)
    return result


def plain(out: Any, device: Device) -> Tensor:
    """A result no node could have (a comparison, an integer cast): a new tensor, no grad, its own version."""
    return _make(out, device, False, None, 0, [0])


def mark_view(view: Tensor, base: Tensor, cls: type | None = None, multi: bool = False) -> None:
    """Remember that ``view`` shares ``base``'s memory: in-place changes through either are seen
    by the other's autograd (CopySlices, version checks).

    Note [View creation]
    As torch's CreationMeta: a view made in no_grad mode (or inference mode), or one of several views a single op
    returned (unbind, split, chunk), may not be modified in place where the in-place op would
    record (``inplace.check_view_creation`` raises torch's words). A view of such a view inherits
    the refusal unless it is one itself (torch's propagate_creation_meta). ``creation`` keeps
    (kind, the creating node's name or None, the output's number): torch's message names the node
    ("Output 0 of Unbind") where the view has a grad_fn in torch, i.e. it was made in grad mode
    from a base that requires grad (a view requires grad when its base does).
    """
    extra = base._extra
    root = extra.base if extra is not None and extra.base is not None else base
    grad_mode = grad_enabled.get()
    kind = MULTI_OUTPUT_VIEW if multi and grad_mode else NO_GRAD_VIEW if not grad_mode else None
    if kind is NO_GRAD_VIEW and INFERENCE_ACTIVE[0] and inference_enabled.get():
        kind = INFERENCE_MODE_VIEW
    creation = None
    if kind is not None:
        named = grad_mode and cls is not None and (base._requires_grad or root._requires_grad)
        creation = (kind, cls.__name__ if named else None, view.output_nr)
    elif extra is not None and extra.creation is not None:
        inherited = extra.creation
        named = cls is not None and (base._requires_grad or root._requires_grad)
        creation = (inherited[0], cls.__name__ if named else None, view.output_nr)
    view_extra = view._extras()
    view_extra.base = root
    if creation is not None:
        view_extra.creation = creation
    extra = root._extras()
    if extra.views is None:
        extra.views = weakref.WeakSet()
    extra.views.add(view)


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


class ArrayMath:
    """Formula primitives on raw device arrays, through each array's backend (Note [One array
    backend per device] in devices/backend.py): standard Array API calls, or the backend's own
    primitives where the standard has none."""

    unpack = staticmethod(unpack_arrays)

    @staticmethod
    def sum_to(g: Any, shape: tuple[int, ...]) -> Any:
        if g.shape == shape:
            return g
        if g.ndim == len(shape) + 1 and g.shape[1:] == shape:  # a bias's gradient: the leading axis summed away
            backend = backend_of(g)
            return backend.array(backend.sum(g, axis=0))
        axes, _ = reduced_axes(g.shape, shape)
        backend = backend_of(g)  # Note [Reductions without numpy's wrappers] in devices/backend.py
        return backend.array(ArrayMath.reshape(backend.sum(g, axis=axes), shape))

    @staticmethod
    def expand(g: Any, shape: tuple[int, ...]) -> Any:
        if g.shape == shape:
            return g
        return backend_of(g).xp.broadcast_to(g, shape)

    @staticmethod
    def sum(g: Any, axis: Any = None, keepdims: bool = False) -> Any:
        backend = backend_of(g)
        return backend.array(backend.sum(g, axis=axis, keepdims=keepdims))

    @staticmethod
    def reshape(g: Any, shape: tuple[int, ...]) -> Any:
        """``g`` itself when it has ``shape`` already: numpy's reshape would return a view, and a
        gradient that is a view cannot be stolen by AccumulateGrad (``owned_by``), which then
        copies it (W3's 784x256 weight gradient: a 1.6 MB copy per step)."""
        return g if g.shape == shape else backend_of(g).xp.reshape(g, shape)

    @staticmethod
    def index(g: Any, index: Any) -> Any:
        """``g[index]`` with numpy's rules, kept an array."""
        return backend_of(g).getitem(g, index)

    @staticmethod
    def permute(g: Any, axes: tuple[int, ...]) -> Any:
        return backend_of(g).xp.permute_dims(g, axes)

    @staticmethod
    def mT(g: Any) -> Any:
        # the standard's ``mT`` attribute, read directly on numpy's arrays (its function form checks its
        # argument in Python first); other arrays go through their namespace's function
        return g.mT if g.__class__ is _ndarray else backend_of(g).xp.matrix_transpose(g)

    @staticmethod
    def mm(a: Any, b: Any) -> Any:
        """A gradient's matrix product: the backend's, which may recycle its buffer (Note [Recycled
        product buffers] in devices/buffers.py)."""
        return backend_of(a).matmul(a, b)

    @staticmethod
    def where(cond: Any, a: Any, b: Any) -> Any:
        return backend_of(cond).xp.where(cond, a, b)

    @staticmethod
    def exp(x: Any) -> Any:
        return backend_of(x).xp.exp(x)

    @staticmethod
    def log(x: Any) -> Any:
        return backend_of(x).xp.log(x)

    @staticmethod
    def sin(x: Any) -> Any:
        return backend_of(x).xp.sin(x)

    @staticmethod
    def cos(x: Any) -> Any:
        return backend_of(x).xp.cos(x)

    @staticmethod
    def sign(x: Any) -> Any:
        return backend_of(x).xp.sign(x)

    # pointwise math
    @staticmethod
    def trunc(x: Any) -> Any:
        return backend_of(x).xp.trunc(x)

    @staticmethod
    def floor(x: Any) -> Any:
        return backend_of(x).xp.floor(x)

    @staticmethod
    def abs(x: Any) -> Any:
        return backend_of(x).xp.abs(x)

    @staticmethod
    def isfinite(x: Any) -> Any:
        return backend_of(x).xp.isfinite(x)

    @staticmethod
    def rot90(g: Any, k: int, dims: tuple[int, int]) -> Any:
        """``k`` quarter turns in the plane of ``dims`` (torch's rot90: flips, then a transpose)."""
        xp = backend_of(g).xp
        k %= 4
        d0, d1 = dims
        if k == 0:
            return g
        if k == 2:
            return xp.flip(g, axis=(d0, d1))
        axes = list(range(g.ndim))
        axes[d0], axes[d1] = d1, d0
        return xp.permute_dims(xp.flip(g, axis=d1 if k == 1 else d0), tuple(axes))

    @staticmethod
    def vector_norm(x: Any, p: float, axes: Any, keepdim: bool) -> Any:
        """The ``p``-norm over ``axes`` (inf and -inf included; p > 0)."""
        backend = backend_of(x)
        xp = backend.xp
        magnitude = xp.abs(x)
        if p == math.inf:
            return xp.max(magnitude, axis=axes, keepdims=keepdim)
        if p == -math.inf:
            return xp.min(magnitude, axis=axes, keepdims=keepdim)
        if p == 1:
            return xp.sum(magnitude, axis=axes, keepdims=keepdim)
        if p == 2:
            return xp.sqrt(xp.sum(x * x, axis=axes, keepdims=keepdim))
        return xp.sum(magnitude ** p, axis=axes, keepdims=keepdim) ** (1 / p)

    @staticmethod
    def delayed_error(g: Any, message: str) -> Any:
        """``g`` whose own backward raises ``message`` (torch's DelayedError); nothing records here."""
        return g

    @staticmethod
    def scatter_prod(base: Any, key: tuple, axis: int, index: Any, src: Any) -> Any:
        """``base`` with ``src``'s entries multiplied in at ``key`` (scatter_reduce's "prod")."""
        backend = backend_of(base)
        return backend.scatter_multiply(backend.xp.asarray(base, copy=True), key, src)

    # the gamma and Bessel functions' formulas (devices/gamma.py, devices/bessel.py)
    @staticmethod
    def digamma(x: Any) -> Any:
        return backend_of(x).digamma(x)

    @staticmethod
    def polygamma(n: int, x: Any) -> Any:
        return backend_of(x).polygamma(n, x)

    @staticmethod
    def i0(x: Any) -> Any:
        return backend_of(x).i0(x)

    @staticmethod
    def special_i1(x: Any) -> Any:
        return backend_of(x).i1(x)

    @staticmethod
    def sinh(x: Any) -> Any:
        return backend_of(x).xp.sinh(x)

    @staticmethod
    def cosh(x: Any) -> Any:
        return backend_of(x).xp.cosh(x)

    @staticmethod
    def inv(a: Any) -> Any:
        return backend_of(a).xp.linalg.inv(a)

    @staticmethod
    def solve(a: Any, b: Any) -> Any:
        """``a⁻¹ b`` for a batch of matrices ``b`` (never a vector: the caller makes it a column)."""
        return backend_of(a).solve(a, b)

    @staticmethod
    def cholesky_solve(b: Any, L: Any, upper: bool) -> Any:
        """(T Tᵀ)⁻¹ b (Tᵀ T with ``upper``), T the triangle of ``L`` a Cholesky factor keeps: two
        solves, batch dims broadcast (torch's ``cholesky_solve``, which reads only that triangle)."""
        backend = backend_of(L)
        xp = backend.xp
        T = xp.triu(L) if upper else xp.tril(L)
        first, second = (xp.matrix_transpose(T), T) if upper else (T, xp.matrix_transpose(T))
        return backend.solve(second, backend.solve(first, b))

    @staticmethod
    def einsum(equation: str, *operands: Any) -> Any:
        return backend_of(operands[0]).einsum(equation, *operands)

    @staticmethod
    def zeros_like(g: Any) -> Any:
        """torch's ``zeros_like(grad)`` in a formula: a zero gradient that is no part of any graph
        (Note [Zero derivatives are constants] in ops/elementwise.py)."""
        return backend_of(g).xp.zeros_like(g)

    @staticmethod
    def threshold_backward(g: Any, y: Any, threshold: float = 0.0) -> Any:
        """torch's ``threshold_backward(grad, y, threshold)`` (relu's gradient, threshold's): 0 where
        ``y <= threshold``, so a NaN passes the gradient."""
        return backend_of(y).zero_where(y <= threshold, g)  # Note [Branchless zero_where] in devices/backend.py

    @staticmethod
    def cast(g: Any, dtype: np.dtype) -> Any:
        return backend_of(g).astype(g, dtype)

    @staticmethod
    def to_device(g: Any, device: Device) -> Any:
        return device.asarray(g)

    @staticmethod
    def index_add(shape: tuple[int, ...], index: tuple[Any, bool], g: Any) -> Any:
        return backend_of(g).index_add(shape, index[0], index[1], g)

    @staticmethod
    def index_put(x: Any, index: Any, values: Any) -> Any:
        backend = backend_of(x)
        out = backend.xp.asarray(x, copy=True)
        backend.setitem(out, index, values)
        return out

    @staticmethod
    def constant(value: Any, like: Any) -> Any:
        return value

    @staticmethod
    def special(name: str, x: Any) -> Any:
        """A special function's kernel by name (Note [Special functions by name] in ops/special.py)."""
        return getattr(backend_of(x), name)(x)

    # convolution and pooling (ops/conv.py, ops/pooling.py): their formulas' kernels on raw arrays
    convolution = staticmethod(windows.convolution)
    pool = staticmethod(windows.pool)

    # the primitives the activation and normalisation formulas need
    @staticmethod
    def tanh(x: Any) -> Any:
        return backend_of(x).xp.tanh(x)

    @staticmethod
    def log1p(x: Any) -> Any:
        return backend_of(x).xp.log1p(x)

    # views and shape ops (ops/views.py, ops/shape.py)
    @staticmethod
    def cat(gs: list, axis: int) -> Any:
        return backend_of(gs[0]).xp.concat(gs, axis=axis)

    # ---- the scans (cumsum's and cumprod's backwards)
    @staticmethod
    def cumsum(g: Any, axis: int) -> Any:
        return backend_of(g).xp.cumulative_sum(g, axis=axis)

    @staticmethod
    def cumprod(g: Any, axis: int) -> Any:
        return backend_of(g).xp.cumulative_prod(g, axis=axis)
