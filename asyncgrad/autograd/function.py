"""Custom autograd functions: ``ag.Function`` with ``forward(ctx, ...)`` and ``backward(ctx, ...)``.

Design: docs/design/custom-functions.md.
"""

from __future__ import annotations

import functools
import inspect
import math
import warnings
import weakref
from typing import Any, Callable

from asyncgrad._validate import type_label
from asyncgrad.devices.backend import STREAMS_ACTIVE
from asyncgrad.devices.device import cpu
from asyncgrad.devices.streams import note_forward
from asyncgrad.dtypes import numpy_dtype
from asyncgrad.graph.anomaly import ANOMALY_USED, anomaly_enabled, anomaly_parent, forward_traceback
from asyncgrad.graph.grad_mode import grad_enabled, no_grad
from asyncgrad.graph.node import NO_EDGE, RELEASED, SECOND_BACKWARD, Edge, Node, Placement, portal_needed
from asyncgrad.graph.switches import restore
from asyncgrad.ops.inplace import rebase_custom_view
from asyncgrad.tensor import IN_CUSTOM_FUNCTION, MULTI_OUTPUT_VIEW, Tensor
from asyncgrad.variable.accumulate import gradient_edge
from asyncgrad.variable.saved import SavedTensor, unpack_tensors

CLEARED_ON_ACCESS = ("saved_tensors can only be accessed once when clear_saved_tensors_on_access=True is set on the "
                     "autograd.Function. Either access saved_tensors only once, or set "
                     "clear_saved_tensors_on_access=False.")
_CLEARED = ("cleared",)
"""``FunctionNode.saved`` once ``clear_saved_tensors_on_access`` gave the saved tensors out."""

_NO_OUTPUT_META = ((), None, cpu)
"""The input metadata of a forward output that is not a Tensor: a slot no gradient reaches
(Note [One gradient slot per output])."""

_DIRTY_VIEW_OF_MANY = (
    "If your Function modifies inplace an input that is a view of another Tensor, your Function cannot return more "
    "than one Tensor. This is not supported by the current autograd engine. You should either make sure the input "
    "is not a view (using .clone() for example) or make your Function only return one Tensor (potentially splitting "
    "it into two Functions: one doing the inplace that returns a single Tensor and a second one that does the other "
    "operations). You can ask on the forum https://discuss.pytorch.org/ if you need help to do this change.")


class FunctionCtx:
    """What ``forward`` and ``backward`` use to talk to each other (mixed into the node)."""

    def save_for_backward(self, *tensors: Tensor | None) -> None:
        for i, t in enumerate(tensors):
            if t is not None and not isinstance(t, Tensor):
                raise TypeError(f"save_for_backward can only save variables, but argument {i} is of type "
                                f"{type_label(t)}")
        self._to_save = tensors

    @property
    def saved_tensors(self) -> tuple[Tensor | None, ...]:
        """Version-checked; raises torch's error once the graph was freed. With the Function's
        ``clear_saved_tensors_on_access``, the node lets go of them at the first access (torch 2.13)."""
        if self.saved is RELEASED:
            raise RuntimeError(SECOND_BACKWARD)
        if self.saved is _CLEARED:
            raise RuntimeError(CLEARED_ON_ACCESS)
        tensors = iter(unpack_tensors(self))
        result = tuple(None if slot is None else next(tensors) for slot in self._saved_layout)
        if self._function.clear_saved_tensors_on_access:
            self.saved = _CLEARED
        return result

    def mark_dirty(self, *tensors: Tensor) -> None:
        """Checked as the outputs are wrapped, as torch (Note [Custom Function outputs])."""
        self._dirty = tensors

    def mark_non_differentiable(self, *tensors: Tensor) -> None:
        for t in tensors:
            if not isinstance(t, Tensor):
                raise RuntimeError(f"mark_non_differentiable only accepts variable arguments, but got {type_label(t)}")
        self._non_differentiable = tensors

    def set_materialize_grads(self, value: bool) -> None:
        self.materialize_grads = bool(value)


class FunctionNode(FunctionCtx, Node):
    """The node (and ctx) of one ``Function.apply`` call; one subclass per Function."""

    _function: type[Function]
    call_on_undefined = True

    def __init__(self, next_edges: tuple[Edge, ...]) -> None:
        Node.__init__(self, next_edges)
        self._to_save: tuple = ()
        self._saved_layout: tuple = ()
        self._dirty: tuple = ()
        self._non_differentiable: tuple = ()
        self.materialize_grads = True
        self._materialize_non_diff_grads = True
        """torch's: False leaves the undefined gradient of a non-differentiable output None in backward,
        whatever ``materialize_grads`` says."""
        self._non_diff_outputs: tuple[int, ...] = ()
        self.needs_input_grad: tuple[bool, ...] = ()
        self._tensor_positions: tuple[int, ...] = ()

    def _grads_in(self, grads: list, create_graph: bool) -> list:
        """Incoming gradients as the user's backward sees them: Tensors (zeros where undefined),
        None for an output that is not a Tensor (Note [One gradient slot per output])."""
        out = []
        for i, ((shape, dtype, device), grad) in enumerate(zip(self._input_meta, grads)):
            if dtype is None:
                out.append(None)
                continue
            if grad is None:
                if self.materialize_grads and (self._materialize_non_diff_grads or i not in self._non_diff_outputs):
                    grad = Tensor._make(device.backend.zeros(shape, dtype), device, False, None, 0, [0])
            elif not create_graph:
                grad = Tensor._make(grad, device, False, None, 0, [0])
            out.append(grad)
        return out

    def _grads_out(self, result: Any, create_graph: bool) -> list:
        if not isinstance(result, tuple):
            result = (result,)
        expected = len(self.needs_input_grad)
        if len(result) < expected or any(g is not None for g in result[expected:]):
            raise RuntimeError(
                f"function {self.name()} returned an incorrect number of gradients (expected {expected}, "
                f"got {len(result)})"
            )
        positions = self._tensor_positions
        if len(positions) != expected:  # a gradient for an input that is no Tensor is refused, as torch's
            for position in range(expected):
                if result[position] is not None and position not in positions:
                    raise RuntimeError(f"function {self.name()} returned a gradient different than None at position "
                                       f"{position + 1}, but the corresponding forward input was not a Variable")
        grads = []
        for position in positions:
            grad = result[position]
            if grad is not None and not isinstance(grad, Tensor):
                raise RuntimeError(f"expected Variable or None (got {type_label(grad)})")
            grads.append(grad if create_graph or grad is None else grad.data)
        return grads

    def apply(self, grads: list, create_graph: bool) -> Any:
        backward = self._function._user_backward()
        if self._function._async_backward:
            return self._apply_async(backward, grads, create_graph)
        if ANOMALY_USED[0] and anomaly_enabled.get()[0]:  # Note [Anomaly parents] in graph/anomaly.py
            token = anomaly_parent.set(self)
            try:
                return self._grads_out(backward(self, *self._grads_in(grads, create_graph)), create_graph)
            finally:
                restore(anomaly_parent, token)
        return self._grads_out(backward(self, *self._grads_in(grads, create_graph)), create_graph)

    async def _apply_async(self, backward: Callable, grads: list, create_graph: bool) -> list:
        token = anomaly_parent.set(self) if ANOMALY_USED[0] and anomaly_enabled.get()[0] else None
        try:  # Note [Anomaly parents] in graph/anomaly.py
            return self._grads_out(await backward(self, *self._grads_in(grads, create_graph)), create_graph)
        finally:
            if token is not None:
                restore(anomaly_parent, token)

    def __call__(self, *grads: Any) -> Any:
        """``y.grad_fn(g)``: the user's backward on ``g``, as torch's ``grad_fn.apply(g)`` (Note
        [Calling a node] in graph/node.py); awaitable when the backward is an ``async def``."""
        self._check_call(grads)
        return self._function._user_backward()(self, *self._grads_in(list(grads), True))


class Function:
    """Base class of custom differentiable operations (torch.autograd.Function).

    Two styles, as torch: ``forward(ctx, *args)``, or ``forward(*args)`` with
    ``setup_context(ctx, inputs, output)`` (``inputs`` with the forward's defaults bound). The
    backward is ``backward`` or its alias ``vjp`` (defining both is torch's error, at backward).
    """

    _async_backward = False
    _backward_cls: type[FunctionNode]
    _forward_signature: inspect.Signature | None = None
    """The forward's signature when the Function uses ``setup_context`` (its inputs are bound to it)."""
    clear_saved_tensors_on_access = False
    """Let go of the saved tensors at the first ``ctx.saved_tensors`` (torch 2.13); a second access raises."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        warnings.warn(
            f"{self.__class__} should not be instantiated. Methods on autograd functions are all static, so you "
            "should invoke them on the class itself. Instantiating an autograd function will raise an error in a "
            "future version of PyTorch.", DeprecationWarning, stacklevel=2)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(
            "Legacy autograd function with non-static forward method is deprecated. Please use new-style autograd "
            "function with static forward method. (Example: "
            "https://pytorch.org/docs/stable/autograd.html#torch.autograd.Function)")

    @classmethod
    def _user_backward(cls) -> Callable:
        """``backward`` or ``vjp``, whichever the subclass defines (torch's ``_get_user_fn``)."""
        if cls.backward is not Function.backward and cls.vjp is not Function.vjp:
            raise RuntimeError("Implementing both 'backward' and 'vjp' for a custom Function is not allowed. You "
                               "should only implement one of them.")
        return cls.vjp if cls.vjp is not Function.vjp else cls.backward

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        user = cls.vjp if cls.vjp is not Function.vjp else cls.backward
        cls._async_backward = inspect.iscoroutinefunction(inspect.unwrap(user))
        uses_setup_context = cls.setup_context is not Function.setup_context
        cls._forward_signature = inspect.signature(cls.forward) if uses_setup_context else None
        # Note [Placement] in graph/node.py: an async def backward runs as a task of its own; a plain
        # one may block on a reentrant backward (backward_sync), so it never runs plainly inline.
        placement = Placement.OWN_TASK if cls._async_backward else Placement.PORTAL
        cls._backward_cls = type(f"{cls.__name__}Backward", (FunctionNode,),
                               {"_function": cls, "placement": placement})

    @staticmethod
    def forward(ctx: FunctionCtx, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("You must implement the forward function for custom autograd.Function.")

    @staticmethod
    def setup_context(ctx: FunctionCtx, inputs: tuple[Any, ...], output: Any) -> Any:
        raise NotImplementedError("setup_context is not implemented.")

    @staticmethod
    def backward(ctx: FunctionCtx, *grad_outputs: Any) -> Any:
        raise NotImplementedError("You must implement either the backward or vjp method for your custom "
                                  "autograd.Function to use it with backward mode AD.")

    vjp = backward

    @classmethod
    def apply(cls, *args: Any, **kwargs: Any) -> Any:
        if cls is Function:
            raise RuntimeError("Function.apply must be called on a subclass")
        setup_context = cls._forward_signature is not None
        if setup_context:  # torch binds the forward's defaults, so that setup_context sees every input
            bound = cls._forward_signature.bind(*args, **kwargs)
            bound.apply_defaults()
            args, kwargs = bound.args, bound.kwargs
        elif kwargs:  # as torch, an argument given by name is the input at its place in forward's signature
            try:
                bound = inspect.signature(cls.forward).bind(None, *args, **kwargs)
            except TypeError:  # the call cannot bind either: it raises Python's own words, running nothing
                cls.forward(None, *args, **kwargs)
                raise
            args, kwargs = bound.args[1:], bound.kwargs
        positions = tuple(i for i, a in enumerate(args) if isinstance(a, Tensor))
        recording = grad_enabled.get() and any(args[i]._requires_grad for i in positions)
        edges = tuple(gradient_edge(args[i]) for i in positions) if recording else ()
        node = cls._backward_cls(edges)
        if node.placement is Placement.PORTAL:
            portal_needed[0] = True  # Note [Servers become portals on demand] in engine/worker.py
        node.needs_input_grad = tuple(isinstance(a, Tensor) and a._requires_grad and recording for a in args)
        node._tensor_positions = positions
        with no_grad():
            if setup_context:
                outputs = cls.forward(*args, **kwargs)
                if not inspect.isawaitable(outputs):
                    cls.setup_context(node, args, outputs)
            else:
                outputs = cls.forward(node, *args, **kwargs)
        if inspect.isawaitable(outputs):
            raise TypeError(f"{cls.__name__}.forward must be a plain def; only backward may be async")
        single = not isinstance(outputs, tuple)
        result = _wrap_outputs(node, args, (outputs,) if single else outputs, recording)
        if recording and anomaly_enabled.get()[0]:
            node.metadata["traceback_"] = forward_traceback()
            parent = anomaly_parent.get()
            if parent is not None:  # Note [Anomaly parents] in graph/anomaly.py
                node.metadata["parent_"] = parent
        return result[0] if single else result


MARK_DIRTY_NOT_INPUT = ("ctx.mark_dirty() received a tensor that was not an input. Only input Tensors that have been "
                        "mutated should be passed to ctx.mark_dirty().")
PURE_VIEW_ONE_TO_ONE = ("Pure view custom Function can only have one input Tensor and one output Tensor. Open an issue "
                        "if you need to support more.")
DIRTY_NOT_RETURNED = ("Some elements marked as dirty during the forward method were not returned as output. The inputs "
                      "that are modified inplace must all be outputs of the Function.")

def _is_view(t: Tensor) -> bool:
    return t._extra is not None and t._extra.base is not None


def _as_view(out: Tensor, of: Tensor) -> None:
    """Make ``out`` (a new tensor over ``of``'s memory) a view of ``of``'s base, as torch's view_as(self)."""
    extra = of._extra
    root = extra.base if extra is not None and extra.base is not None else of
    out._extras().base = root
    root_extra = root._extras()
    if root_extra.views is None:
        root_extra.views = weakref.WeakSet()
    root_extra.views.add(out)


# Note [Custom Function outputs]: as torch's _process_backward_mode_ad, after forward: every tensor
# given to mark_dirty must be returned (else "Some elements marked as dirty ..."), whether or not a
# graph is recorded; a dirty differentiable output that is no input gets a warning ("ctx.mark_dirty()
# received a tensor that was not an input ..."), raised as an error when it is a view (of an
# intermediate); a dirty input that is a view made by a multi-output op or in no_grad mode is refused
# with torch's words for an in-place op on it; a dirty input that is a view may only be the one
# output (its base is rebased onto CopySlices over the node, which reads only that output's
# gradient); an input returned as it was comes back as a view of itself, and every view returned
# (but a dirty input) is refused in place later: "... was created inside a custom Function ..."
# (IN_CUSTOM_FUNCTION), or, with several differentiable outputs, "... returns multiple views ..."
# (MULTI_OUTPUT_NODE); in-place on such a view would override the custom backward.
def _wrap_outputs(node: FunctionNode, args: tuple, outputs: tuple, recording: bool) -> tuple:
    """Attach the node to the outputs; handle dirty (in-place) and non-differentiable ones, with
    torch's checks (custom_function.cpp's _process_backward_mode_ad, Note [Custom Function outputs])."""
    for i, t in enumerate(node._dirty):
        if not isinstance(t, Tensor):
            raise RuntimeError(f"mark_dirty can only accept variables, but argument {i} is of type {type_label(t)}")
    pure_view = bool(getattr(node, "_is_pure_view", False))  # Note [Views a Function returns]
    if pure_view and (sum(isinstance(a, Tensor) for a in args) != 1
                      or sum(isinstance(o, Tensor) for o in outputs) != 1):
        raise RuntimeError(PURE_VIEW_ONE_TO_ONE)
    dirty = {id(t) for t in node._dirty}
    non_diff = {id(t) for t in node._non_differentiable}
    inputs = {id(a): a for a in args if isinstance(a, Tensor)}
    for t in node._dirty:
        t._vc[0] += 1
    returned = {id(out) for out in outputs if isinstance(out, Tensor)}
    if not dirty <= returned:
        raise RuntimeError(DIRTY_NOT_RETURNED)
    wrapped = []
    metas = []
    dirty_view = None
    for out in outputs:
        if not isinstance(out, Tensor):  # Note [One gradient slot per output]
            wrapped.append(out)
            metas.append(_NO_OUTPUT_META)
            continue
        output_nr = len(metas)
        is_input = id(out) in inputs
        is_modified = id(out) in dirty
        is_diff = recording and id(out) not in non_diff and out.is_floating_point()
        if is_diff and is_modified:
            if out._requires_grad and out.grad_fn is None:
                raise RuntimeError("a leaf Variable that requires grad has been used in an in-place operation.")
            if not is_input:  # torch refuses a view (of an intermediate) and warns about anything else
                if _is_view(out):
                    raise RuntimeError(MARK_DIRTY_NOT_INPUT)
                warnings.warn(MARK_DIRTY_NOT_INPUT, UserWarning, stacklevel=3)
            if _is_view(out):
                if len(outputs) > 1:
                    raise RuntimeError(_DIRTY_VIEW_OF_MANY)
                dirty_view = out
        if is_input and not is_modified:
            original = out
            out = Tensor._make(out.data, out.device, False, None, 0, out._vc)
            if is_diff:
                _as_view(out, original)
        metas.append((out.shape, numpy_dtype(out.dtype), out.device))
        if is_diff:
            if STREAMS_ACTIVE[0] and output_nr == 0:  # Note [Streaming backwards]: its backward runs on this stream
                note_forward(node, out.device)
            out.grad_fn = node
            out.output_nr = output_nr
            out._requires_grad = True
        else:
            node._non_diff_outputs += (output_nr,)
            if is_modified:
                out.grad_fn = None
                out._requires_grad = False
        wrapped.append(out)
    _mark_views(node, wrapped, dirty, inputs, pure_view)
    # Note [One gradient slot per output]: as torch, a forward's outputs are numbered whether
    # Tensors or not (``(3, x * 2, "s")``: ``x * 2`` is output 1), and its backward gets one
    # gradient per output, None for one that is not a Tensor; its slot's metadata says so.
    node._input_meta = tuple(metas)
    node.work = sum(math.prod(m[0]) for m in metas)
    outs = {id(o): o for o in wrapped if isinstance(o, Tensor)}
    layout = tuple(None if t is None else True for t in node._to_save)
    saved = []
    try:
        for t in node._to_save:
            if t is None:
                continue
            is_output = id(t) in outs and t.grad_fn is node
            saved.append(SavedTensor(t, is_output=is_output))
    finally:  # a pack hook that raises (a checkpoint's early stop) leaves no cycle output -> node -> output
        node._to_save = ()
    node.saved = tuple(saved)
    node._saved_layout = layout
    # Note [The ctx lets go of its marks]: the tensors given to mark_dirty and
    # mark_non_differentiable are read only here, and the node must not keep them: a dirty output
    # is one of the node's outputs (and a dirty view's CopySlices wraps the node), so holding it
    # would be a cycle output -> node -> output that outlives the graph; torch clears both
    # (custom_function.cpp's _mark_dirty and _parse_non_differentiable).
    node._dirty = node._non_differentiable = ()
    if dirty_view is not None:
        _rebase_dirty_view(node, args, dirty_view)
    return tuple(wrapped)


def _rebase_dirty_view(node: FunctionNode, args: tuple, view: Tensor) -> None:
    """torch's rebase_history of a dirty view: the base is rebased onto CopySlices over the node, which
    (as torch's) takes the view for the node's first input; an ``async def`` backward, which CopySlices
    cannot await, or the view as another input would give a wrong gradient, so both are refused."""
    if args[node._tensor_positions[0]] is not view:
        raise NotImplementedError(
            "a custom Function that modifies in place an input that is a view must take that view as its first "
            "Tensor argument (torch's CopySlices reads the Function's first gradient as the view's); pass "
            "view.clone() or reorder the arguments")
    if node._function._async_backward:
        raise NotImplementedError(
            "a custom Function with an async def backward cannot modify in place an input that is a view (the base's "
            "CopySlices runs the backward inline); pass view.clone()")
    rebase_custom_view(view, node)  # Note [A custom Function's in-place op on a view] in ops/inplace.py


def _mark_views(node: FunctionNode, outputs: list, dirty: set, inputs: dict, pure_view: bool) -> None:
    """Note [Views a Function returns]: as torch, an output that is a view (of an input or of a
    temporary), except a dirty input returned as itself, may not be modified in place where the
    in-place op would record: autograd's rebase of the view would replace the custom backward by
    the view's own, silently giving wrong gradients. torch's CreationMeta is MULTI_OUTPUT_NODE
    when the Function has more than one differentiable output, else IN_CUSTOM_FUNCTION; the
    refusal (view_creation_error in ops/inplace.py) names the Function's node when the output has
    it as grad_fn, and views of such an output inherit it (Note [View creation] in ops/_node.py).
    A Function that sets ``ctx._is_pure_view`` (one tensor in, one out) says its output is a plain
    view: in place on it is allowed, as on any view, and replays the view from its base, bypassing
    the custom backward (torch's pure view)."""
    differentiable = sum(1 for o in outputs if isinstance(o, Tensor) and o.grad_fn is node)
    kind = MULTI_OUTPUT_VIEW if differentiable > 1 else IN_CUSTOM_FUNCTION
    for nr, out in enumerate(outputs):
        if not isinstance(out, Tensor) or (id(out) in dirty and id(out) in inputs):
            continue
        extra = out._extra
        if extra is not None and extra.base is not None:
            extra.creation = None if pure_view else (kind, type(node).__name__ if out.grad_fn is node else None, nr)


class InplaceFunction(Function):
    """torch's ``InplaceFunction``, kept for backward compatibility: a Function with an ``inplace`` flag."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace


def once_differentiable(backward: Callable) -> Callable:
    """For backwards that are not themselves differentiable: run without recording, and make
    any attempt to differentiate their result fail with torch's error.

    An ``async def`` backward gets an ``async def`` wrapper, which holds grad mode off for the
    coroutine's whole run (grad mode is a context variable: switching it around the call that
    only creates the coroutine would leave the body recording)."""
    if inspect.iscoroutinefunction(backward):

        @functools.wraps(backward)
        async def async_wrapper(ctx: FunctionCtx, *grads: Any) -> Any:
            token = grad_enabled.set(False)
            try:
                result = await backward(ctx, *grads)
            finally:
                grad_enabled.reset(token)
            return _delay_error(result, grads)

        return async_wrapper

    @functools.wraps(backward)
    def wrapper(ctx: FunctionCtx, *grads: Any) -> Any:
        with no_grad():
            result = backward(ctx, *grads)
        return _delay_error(result, grads)

    return wrapper


def _delay_error(result: Any, grads: tuple) -> Any:
    """``result`` as it is, or, when a graph is recorded, the outputs of an ``Error`` node that
    refuses to run, as torch's once_differentiable builds it: one input per output, a detached
    copy requiring grad (so the node has edges: AccumulateGrads of those, None for a None output),
    and output ``i`` its ``i``-th output."""
    if not grad_enabled.get() or not any(isinstance(g, Tensor) and g._requires_grad for g in grads):
        return result
    single = not isinstance(result, tuple)
    outputs = (result,) if single else result
    fakes = [r.detach().requires_grad_() if isinstance(r, Tensor) else None for r in outputs]
    err = Error(tuple(NO_EDGE if f is None else gradient_edge(f) for f in fakes))
    err._input_meta = tuple(_NO_OUTPUT_META if f is None else (f.shape, numpy_dtype(f.dtype), f.device) for f in fakes)
    wrapped = tuple(Tensor._make(r.data, r.device, True, err, i, [0]) if isinstance(r, Tensor) else r
                    for i, r in enumerate(outputs))
    return wrapped[0] if single else wrapped


class Error(Node):
    """torch's ``Error`` node (the DelayedError of once_differentiable): differentiating through it raises."""

    __slots__ = ()

    def apply(self, grads: list, create_graph: bool) -> Any:
        raise RuntimeError("trying to differentiate twice a function that was marked with @once_differentiable")
