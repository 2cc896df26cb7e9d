"""Activation checkpointing: keep no intermediates of ``fn``; recompute them during backward.

``await ag.checkpoint(fn, *args)`` is awaitable, because ``fn`` may be an ``async def``
(API.md). Two variants, as torch's ``use_reentrant``:

* non-reentrant (the default, ``use_reentrant=False``; Note [Non-reentrant checkpoint]): ``fn``
  runs with grad enabled under saved-tensor hooks that keep only a handle per saved tensor;
  the first unpack in a backward reruns ``fn`` under hooks that collect the recomputed values.
  It composes with ``ag.grad()``, ``inputs=``, nested checkpoints and retained graphs.
* reentrant (``use_reentrant=True``): the forward runs under ``no_grad``; the recorded node's
  backward reruns ``fn`` on detached inputs and runs a nested ``ag.backward`` through the
  recomputed graph, which also accumulates into any parameters ``fn`` closes over. That nested
  backward is a reentrant child of the outer one: cancelling or failing the outer call aborts it
  too (Note [Cancellation] in engine/engine.py). As in torch it refuses ``grad()`` and ``inputs=``.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import inspect
import os
import traceback
import warnings
from typing import Any, Callable, ContextManager, NoReturn

from asyncgrad import factories
from asyncgrad.autograd.api import backward, call_plain
from asyncgrad.autograd.function import Function
from asyncgrad.engine.graph_task import current_exec_group, current_graph_task
from asyncgrad.graph.grad_mode import enable_grad, grad_enabled, no_grad
from asyncgrad.graph.node import saved_tensors_hooks
from asyncgrad.graph.recorder import PROFILING, current_recorder
from asyncgrad.graph.switches import leave
from asyncgrad.nn.container import Sequential
from asyncgrad.tensor import Tensor

REENTRANT_WITH_GRAD = (
    "When use_reentrant=True, torch.utils.checkpoint is incompatible with .grad() or passing an `inputs` parameter "
    "to .backward(). To resolve this error, you can either set use_reentrant=False, or call .backward() without "
    "passing the `inputs` argument.")


def noop_context_fn() -> tuple[ContextManager, ContextManager]:
    """The default ``context_fn``: nothing around the forward, nothing around the recomputation."""
    return contextlib.nullcontext(), contextlib.nullcontext()


DETERMINISM_CHECKS = ("default", "none")
"""torch's ``determinism_check`` values: compare the recomputed tensors' metadata, or not."""
CONTEXT_SUPPRESSED = ("torch.utils.checkpoint: the forward context provided by context_fn suppressed an exception "
                      "raised during the checkpointed forward. This is not supported because checkpoint cannot return "
                      "a value for a failed forward.")
"""torch's error when ``context_fn``'s forward context swallows the exception of a failed forward."""


class CheckpointError(RuntimeError):
    """torch's ``torch.utils.checkpoint.CheckpointError``: a recomputation that does not match the forward."""


DEBUG_TIP = """
Tip: To see a more detailed error message, either pass `debug=True` to
`torch.utils.checkpoint.checkpoint(...)` or wrap the code block
with `with torch.utils.checkpoint.set_checkpoint_debug_enabled(True):` to
enable checkpoint\u2011debug mode globally.
"""
"""torch's tip under a CheckpointError about a mismatch (its torch.compile paragraph left out)."""

DEBUG_TEMPLATE = """ \
An error happened while unpacking tensors; dumping logs of latest computation
because you passed `debug=True` to `torch.utils.checkpoint.checkpoint()`.
Scroll all the way down for guidance on how to navigate these logs.

+~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~+
|        1. Stack traces of the operators that ran in the original forward     |
+------------------------------------------------------------------------------+

{forward_traces}
+~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~+
|        2. Stack traces of the operators that ran during recomputation        |
+------------------------------------------------------------------------------+

{recompute_traces}
+~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~+
|       3. Log of operators in the original forward and recomputation          |
+------------------------------------------------------------------------------+
(Scroll up to correlate stack traces with each operation listed below. This
 helps identify their source in the code.)

IMPORTANT: Differences in "detach" calls between the original forward and the
           recomputation are expected. They are introduced by the checkpointing
           mechanism and can be ignored.

Operations executed during the original forward:

{forward_ops}

Operations executed during recomputation:

{recompute_ops}

+------------------------------------------------------------------------------+
 ERROR: Detected non-determinism while running activation checkpointing

 You are seeing this error because you passed `debug=True` to checkpoint and
 tensors to be saved during the original forward and differ between those saved
 during recomputation. This can happen if different operators were ran in the
 original forward and in the recomputation.

 To identify where the mismatch may be coming from, you can do the following:

 1) Compare the operators ran during original forward and recomputation to
    see where they differ. These operators are printed above in the order they
    were executed.

 2) Review the stack trace for each operator to locate its invocation source.
    Each operator's stack trace is printed in their execution order.

 Note that the logs can be quite long. Here's how they are structured:
 (Tip: you can Ctrl-f for these headers)

 1. Stack traces of the operators that ran in the original forward
 2. Stack traces of the operators that ran during recomputation
 3. Log of operators in the original forward and recomputation
 4. Error message                                             <--- You are here
--------------------------------------------------------------------------------
"""
"""torch's ``_checkpoint_error_template``: what a CheckpointError becomes under ``debug=True``."""

_PACKAGE = os.path.dirname(os.path.abspath(__file__))

early_stop_enabled: contextvars.ContextVar[bool | None] = contextvars.ContextVar("asyncgrad_checkpoint_early_stop",
                                                                                default=None)
"""``set_checkpoint_early_stop``'s setting in this context; None: each checkpoint's own ``early_stop``."""
debug_enabled: contextvars.ContextVar[bool | None] = contextvars.ContextVar("asyncgrad_checkpoint_debug",
                                                                           default=None)
"""``set_checkpoint_debug_enabled``'s setting in this context; None: each checkpoint's own ``debug``."""


class _Setting:
    """A context manager that sets ``var`` to ``value`` for its block (Note [A switch restored where
    its scope ends] in autograd/switches.py)."""

    var: contextvars.ContextVar

    def __init__(self, value: bool | None) -> None:
        self.value = value
        self._tokens: list = []

    def __enter__(self) -> None:
        self._tokens.append(self.var.set(self.value))

    def __exit__(self, *exc: Any) -> None:
        leave(self.var, self._tokens)


class set_checkpoint_early_stop(_Setting):
    """torch's ``set_checkpoint_early_stop(enable)``: whether the non-reentrant checkpoints made in
    this block stop their recomputation as soon as every saved tensor is recomputed (the default), or
    run ``fn`` to its end. Read when the forward runs; the backward may happen outside the block."""

    var = early_stop_enabled


class set_checkpoint_debug_enabled(_Setting):
    """torch's ``set_checkpoint_debug_enabled(enabled)``: ``debug`` for every non-reentrant checkpoint
    made in this block, whatever it was passed (None: each checkpoint's own)."""

    var = debug_enabled


class GraphExecGroup:
    """torch's ``GraphExecGroup``: the backward calls started in its block recompute each
    checkpointed region at most once between them (Note [Non-reentrant checkpoint]), so they must
    not overlap: a saved value unpacked by one is gone for the others. Groups do not nest. Only
    ``use_reentrant=False`` checkpoints use it. What the group's backwards recomputed and did not
    unpack is dropped when the block ends."""

    def __init__(self) -> None:
        self._tokens: list = []
        self._forget: list[Callable[[], None]] = []

    def __enter__(self) -> GraphExecGroup:
        current = current_exec_group.get()
        if current is not None:
            raise RuntimeError(f"GraphExecGroup contexts cannot be nested. Already inside group {current}")
        self._tokens.append(current_exec_group.set(self))
        return self

    def __exit__(self, *exc: Any) -> None:
        leave(current_exec_group, self._tokens)
        forget, self._forget = self._forget, []
        for fn in forget:
            fn()

    @classmethod
    def _get_current_group(cls) -> GraphExecGroup | None:
        return current_exec_group.get()


class _StopRecomputation(Exception):
    """Raised by the recomputation's pack hook once every saved tensor is recomputed (early stop)."""


class _OpLog:
    """``debug=True``'s log of the ops run in its block, each with the stack that ran it: a recorder
    (Note [Forward ops reach the profiler through record] in graph/recorder.py) that passes
    everything on to the recorder it is nested in."""

    def __init__(self) -> None:
        self.logs: list[str] | None = None
        self.tbs: list[list[str]] = []
        self._outer: Any = None
        self._tokens: list = []

    def __enter__(self) -> _OpLog:
        self.logs, self.tbs = [], []
        self._outer = current_recorder.get()
        self._tokens.append(current_recorder.set(self))
        PROFILING.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self in PROFILING:
            PROFILING.remove(self)
        leave(current_recorder, self._tokens)

    def _log(self, name: str, inputs: tuple, result: Any) -> None:
        def describe(t: Any) -> str:
            return f"{t.dtype}{list(t.shape)}" if isinstance(t, Tensor) else repr(t)

        assert self.logs is not None
        self.logs.append(f"{describe(result)} = {name}({', '.join(describe(t) for t in inputs)})")
        self.tbs.append([f"{f.filename}:{f.lineno}:{f.name}" for f in reversed(traceback.extract_stack())
                         if not f.filename.startswith(_PACKAGE)])

    def record_op(self, name: str, inputs: tuple, result: Any, sequence_nr: int, allocates: bool) -> None:
        self._log(name, inputs, result)
        if self._outer is not None:
            self._outer.record_op(name, inputs, result, sequence_nr, allocates)

    def record_factory(self, name: str, result: Any) -> None:
        self._log(name, (), result)
        if self._outer is not None:
            self._outer.record_factory(name, result)

    def open_range(self, name: str) -> list:
        return [] if self._outer is None else self._outer.open_range(name)

    def record(self, *args: Any) -> None:
        if self._outer is not None:
            self._outer.record(*args)

    def timed(self, worker: Any, fn: Callable) -> Callable:
        return fn if self._outer is None else self._outer.timed(worker, fn)

    def traces(self, label: str) -> str:
        assert self.logs is not None
        out = ""
        for i, (log, tb) in enumerate(zip(self.logs, self.tbs)):
            out += f"{log}   ({i + 1} of {len(self.logs)} in {label})\n\n" + "".join(line + "\n" for line in tb)
            out += "\n\n"
        return out


def _debug_context_and_cb() -> tuple[Callable[[], tuple[ContextManager, ContextManager]],
                                     Callable[[CheckpointError], NoReturn]]:
    """torch's ``_get_debug_context_and_cb``: a ``context_fn`` that logs the ops of the forward and of
    the recomputation, and the callback that turns a CheckpointError into one carrying both logs."""
    forward_log, recompute_log = _OpLog(), _OpLog()

    def unpack_error_cb(e: CheckpointError) -> NoReturn:
        raise CheckpointError(DEBUG_TEMPLATE.format(
            forward_traces=forward_log.traces("original"), recompute_traces=recompute_log.traces("recompute"),
            forward_ops="\n".join(forward_log.logs or ()), recompute_ops="\n".join(recompute_log.logs or ()),
        )) from e

    def context_fn() -> tuple[ContextManager, ContextManager]:
        return forward_log, recompute_log

    return context_fn, unpack_error_cb


async def _call(fn: Callable, args: tuple, kwargs: dict) -> Any:
    # a plain fn may call backward_sync (Note [Sync bridge])
    result = await call_plain(functools.partial(fn, **kwargs) if kwargs else fn, *args)
    return await result if inspect.isawaitable(result) else result


def _call_now(fn: Callable, args: tuple, kwargs: dict) -> Any:
    """``fn`` run to its end here and now, an ``async def`` one included as long as it never
    suspends (a recomputation inside a node, where nothing can be awaited)."""
    result = fn(*args, **kwargs)
    if not inspect.isawaitable(result):
        return result
    steps = result.__await__()
    try:
        steps.send(None)
    except StopIteration as stop:
        return stop.value
    steps.close()
    raise RuntimeError(
        "checkpoint: the async def function suspended while being recomputed inside a node, where it cannot be "
        "awaited; await ag.checkpoint(...) recomputes such a function before the backward reaches it, so this "
        "happens only when a backward starts inside the checkpointed region (use use_reentrant=True there)")


class _RngFork:
    """The default generator set to the forward's state for a recomputation, and put back after."""

    def __init__(self, state: Any) -> None:
        self.state = state

    def __enter__(self) -> None:
        if self.state is not None:
            generator = factories._rng[0]
            self.current = generator.bit_generator.state
            generator.bit_generator.state = self.state

    def __exit__(self, *exc: Any) -> None:
        if self.state is not None:
            factories._rng[0].bit_generator.state = self.current


# --------------------------------------------------------------------------- non-reentrant
class _Handle:
    """What a checkpointed forward keeps for one saved tensor: its position."""

    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index


def _meta(t: Tensor) -> dict:
    return {"shape": t.shape, "dtype": t.dtype, "device": t.device}


class _Frame:
    """One non-reentrant checkpoint call: how to recompute it, and what each backward recomputed.

    Note [Non-reentrant checkpoint]: as torch's ``_checkpoint_without_reentrant_generator``, the
    forward's pack hook keeps a ``_Handle`` (its position) per saved tensor and the tensor's
    metadata, nothing else. The first unpack within a backward (keyed by its graph task, so that a
    retained graph recomputes once per backward; outside any backward, a node's ``_saved_result``
    read, each unpack is its own key, as torch's temporary graph task id) reruns ``fn`` on detached
    inputs, with grad enabled and the forward's RNG state, under a pack hook that collects the
    detached values in order; torch's CheckpointErrors report a different count or metadata. Each
    value is handed out once and dropped (a second unpack is torch's error); what a backward did not
    use goes with its graph task (a final callback). A nested checkpoint in ``fn`` keeps its own
    handles (its hooks are innermost) and recomputes when its own nodes unpack. The recomputation
    runs where the unpack happens, inside a node, where nothing can be awaited: for an ``async def
    fn`` an identity node on the outputs (an ``async def`` backward, run first) awaits it first."""

    def __init__(self, fn: Callable, args: tuple, kwargs: dict, rng_state: Any, recompute_context: ContextManager,
                 check_metadata: bool, early_stop: bool = False,
                 unpack_error_cb: Callable[[CheckpointError], NoReturn] | None = None) -> None:
        self.fn = fn
        self.args = args
        self.kwargs = kwargs
        self.rng_state = rng_state
        self.recompute_context = recompute_context
        self.check_metadata = check_metadata
        self.early_stop = early_stop
        """Stop the recomputation as soon as every saved tensor is recomputed (torch's early stop)."""
        self.unpack_error_cb = unpack_error_cb
        """``debug=True``'s: what a CheckpointError of an unpack becomes."""
        self.forward_completed = False
        """False while ``fn`` still runs the first time: a backward inside it (``fn`` calling ``grad``)
        recomputes a region whose forward is not over, so the counts cannot agree yet (torch's
        ``ignore_saved_mismatch``)."""
        self.metas: list[dict] = []
        self.recomputed: dict[Any, dict[int, Tensor]] = {}

    def pack(self, t: Tensor) -> _Handle:
        self.metas.append(_meta(t))
        return _Handle(len(self.metas) - 1)

    def unpack(self, handle: _Handle) -> Tensor:
        try:
            return self._unpack(handle)
        except CheckpointError as e:
            if self.unpack_error_cb is None:
                raise
            self.unpack_error_cb(e)

    def _unpack(self, handle: _Handle) -> Tensor:
        key = self._key()
        alone = key is None
        if alone:  # read outside any backward: a recomputation of its own, kept for no one after
            key = object()
        values = self.recomputed.get(key)
        if values is None:
            with self.recomputing(key) as (inputs, kwargs):
                _call_now(self.fn, inputs, kwargs)
            values = self.recomputed.pop(key) if alone else self.recomputed[key]
        value = values.pop(handle.index, None)
        if value is None:
            extra = ("Performing two backward calls that overlap (i.e. require the same saved activation in order to "
                     "compute gradients) is not allowed while under the torch.utils.checkpoint.GraphExecGroup "
                     "context. " if isinstance(key, GraphExecGroup) else "")
            raise CheckpointError(
                "torch.utils.checkpoint: Unpack is being triggered for a tensor that was already unpacked once. "
                f"{extra}If you are calling ctx.saved_tensors in backward, make sure to do so only once. Otherwise "
                "please open an issue with details on your use case.")
        return value

    @staticmethod
    def _key() -> Any:
        """Whose recomputation an unpack uses: the running backward's GraphExecGroup, else the backward's
        own (None outside any backward: the unpack's own, as torch's temporary graph task id)."""
        graph_task = current_graph_task.get()
        group = current_exec_group.get() if graph_task is None else graph_task.exec_group
        if group is not None:
            return group
        return None if graph_task is None else id(graph_task)

    def recomputing(self, key: Any) -> _Recomputation:
        return _Recomputation(self, key)

    def check(self, values: dict[int, Tensor], count: int) -> None:
        if count != len(self.metas):
            raise CheckpointError(
                "torch.utils.checkpoint: A different number of tensors was saved during the original forward and "
                f"recomputation.\nNumber of tensors saved during forward: {len(self.metas)}\nNumber of tensors "
                f"saved during recomputation: {count}.\n{DEBUG_TIP}")
        if not self.check_metadata:
            return
        different = [(i, self.metas[i], _meta(v)) for i, v in values.items() if _meta(v) != self.metas[i]]
        if different:
            listed = "".join(f"tensor at position {i}:\nsaved metadata: {saved}\nrecomputed metadata: {new}\n"
                             for i, saved, new in different)
            raise CheckpointError("torch.utils.checkpoint: Recomputed values for the following tensors have "
                                  f"different metadata than during the forward pass.\n{listed}.\n{DEBUG_TIP}")


class _Recomputation:
    """``with frame.recomputing(key) as (inputs, kwargs): fn(*inputs, **kwargs)`` stores the values
    that ``fn`` saves into ``frame.recomputed[key]`` (Note [Non-reentrant checkpoint])."""

    def __init__(self, frame: _Frame, key: Any) -> None:
        self.frame = frame
        self.key = key
        self.values: dict[int, Tensor] = {}
        self.count = 0
        self.ignore_mismatch = False

    def _pack(self, t: Tensor) -> Tensor:
        """As torch's recomputation hook: keep the detached value for the forward's handle at this
        position, and hand the value itself to whatever saved it during the recomputation (a
        backward run inside ``fn`` unpacks it, with ``_unpacked`` as it is). A tensor that does not
        require grad is kept as the object it is, so its unpack gives that very object, as torch's."""
        value = t.detach() if t.requires_grad else t
        if self.count >= len(self.frame.metas):
            if not self.frame.forward_completed:
                self.ignore_mismatch = True
                self.count += 1
                return value
            raise CheckpointError("torch.utils.checkpoint: trying to save more tensors during recomputation than "
                                  f"during the original forward pass.\n{DEBUG_TIP}")
        self.values[self.count] = value
        self.count += 1
        if self.frame.early_stop and self.count == len(self.frame.metas):
            raise _StopRecomputation  # caught by __exit__: the rest of fn need not run
        return value

    def __enter__(self) -> tuple[tuple, dict]:
        self.hooks = saved_tensors_hooks(self._pack, _unpacked)
        self.rng = _RngFork(self.frame.rng_state)
        self.grad = enable_grad()
        self.rng.__enter__()
        self.hooks.__enter__()
        self.grad.__enter__()
        self.frame.recompute_context.__enter__()
        inputs = tuple(a.detach().requires_grad_(True) if isinstance(a, Tensor) and a.requires_grad else a
                       for a in self.frame.args)  # an input that needs no grad: the object itself, as torch
        return inputs, self.frame.kwargs

    def __exit__(self, exc_type: Any, *exc: Any) -> bool:
        self.frame.recompute_context.__exit__(exc_type, *exc)
        self.grad.__exit__()
        self.hooks.__exit__()
        self.rng.__exit__()
        stopped = exc_type is _StopRecomputation
        if exc_type is not None and not stopped:
            return False
        if not self.ignore_mismatch:
            self.frame.check(self.values, self.count)
        self.frame.recomputed[self.key] = self.values
        if isinstance(self.key, GraphExecGroup):  # kept for the group's other backwards
            self.key._forget.append(self._forget)
        else:
            graph_task = current_graph_task.get()
            if graph_task is not None:
                graph_task.final_callbacks.append(self._forget)
        return stopped

    def _forget(self) -> None:
        """What the backward did not unpack goes with it."""
        self.frame.recomputed.pop(self.key, None)


def _unpacked(value: Tensor) -> Tensor:
    """A value saved during a recomputation is unpacked only by a backward run inside ``fn``: as is."""
    return value


class _RecomputeFirst(Function):
    """Identity on a non-reentrant checkpoint's outputs whose ``async def`` backward awaits the
    recomputation of an ``async def fn`` before the region's nodes unpack (Note [Non-reentrant
    checkpoint])."""

    @staticmethod
    def forward(ctx, frame: _Frame, *outputs: Any) -> tuple:
        ctx.frame = frame
        return tuple(Tensor._make(o.data, o.device, False, None, 0, o._vc) if isinstance(o, Tensor) else o
                     for o in outputs)

    @staticmethod
    async def backward(ctx, *grads: Any) -> tuple:
        frame = ctx.frame
        key = frame._key()
        if key not in frame.recomputed:
            try:
                with frame.recomputing(key) as (inputs, kwargs):
                    await _call(frame.fn, inputs, kwargs)
            except CheckpointError as e:
                if frame.unpack_error_cb is None:
                    raise
                frame.unpack_error_cb(e)
        return (None, *grads)


async def _checkpoint_without_reentrant(fn: Callable, preserve_rng_state: bool, context_fn: Callable,
                                       determinism_check: str, debug: bool, early_stop: bool, args: tuple,
                                       kwargs: dict) -> Any:
    unpack_error_cb = None
    debug_setting = debug_enabled.get()
    if debug_setting if debug_setting is not None else debug:
        if context_fn is not noop_context_fn:
            raise ValueError("debug=True is incompatible with non-default context_fn")
        context_fn, unpack_error_cb = _debug_context_and_cb()
    if determinism_check not in DETERMINISM_CHECKS:
        raise ValueError(f"determinism_check should be one of {list(DETERMINISM_CHECKS)}, but got {determinism_check}")
    forward_context, recompute_context = context_fn()
    rng_state = factories._rng[0].bit_generator.state if preserve_rng_state else None
    stop_setting = early_stop_enabled.get()
    frame = _Frame(fn, args, kwargs, rng_state, recompute_context, determinism_check == "default",
                   stop_setting if stop_setting is not None else early_stop, unpack_error_cb)
    failed = False
    with saved_tensors_hooks(frame.pack, frame.unpack), forward_context:
        try:
            # in a portal: a plain fn may call backward_sync (Note [Sync bridge]); an async def one gives its coroutine
            result = await call_plain(functools.partial(fn, **kwargs) if kwargs else fn, *args)
            is_async = inspect.isawaitable(result)
            if is_async:
                result = await result
        except BaseException:
            failed = True
            raise
    if failed:  # the forward raised and context_fn's forward context swallowed it: there is no result to return
        raise RuntimeError(CONTEXT_SUPPRESSED)
    frame.forward_completed = True
    if not is_async or not grad_enabled.get():
        return result
    single = not isinstance(result, tuple)
    wrapped = _RecomputeFirst.apply(frame, *((result,) if single else result))
    return wrapped[0] if single else wrapped


# --------------------------------------------------------------------------- reentrant
class CheckpointFunction(Function):
    @staticmethod
    def forward(ctx, fn: Callable, rng_state: dict | None, outputs: tuple, *args: Any) -> tuple:
        ctx.fn = fn
        ctx.rng_state = rng_state
        ctx.args = tuple(None if isinstance(a, Tensor) else a for a in args)
        ctx.save_for_backward(*(a for a in args if isinstance(a, Tensor)))
        return tuple(Tensor._make(o.data, o.device, False, None, 0, o._vc) for o in outputs)

    @staticmethod
    async def backward(ctx, *grads: Tensor) -> tuple:
        graph_task = current_graph_task.get()
        if graph_task is not None and graph_task.exec_info is not None:  # torch's _is_checkpoint_valid()
            raise RuntimeError(REENTRANT_WITH_GRAD)
        saved = iter(ctx.saved_tensors)
        inputs = []
        for arg in ctx.args:
            if arg is not None:
                inputs.append(arg)
                continue
            t = next(saved)
            inputs.append(t.detach().requires_grad_(t.requires_grad))
        with _RngFork(ctx.rng_state), enable_grad():
            outputs = await _call(ctx.fn, tuple(inputs), {})
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        pairs = [(o, g) for o, g in zip(outputs, grads) if isinstance(o, Tensor) and o.requires_grad]
        if not pairs:
            raise RuntimeError(
                "none of output has requires_grad=True, this checkpoint() is not necessary")
        await backward([o for o, _ in pairs], [g for _, g in pairs])
        input_grads = tuple(t.grad if isinstance(t, Tensor) else None for t in inputs)
        return (None, None, None) + input_grads


async def checkpoint(fn: Callable, *args: Any, use_reentrant: bool | None = None,
                     context_fn: Callable[[], tuple[ContextManager, ContextManager]] = noop_context_fn,
                     determinism_check: str = "default", debug: bool = False, early_stop: bool = True,
                     preserve_rng_state: bool = True, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` (a ``def`` or an ``async def``) without keeping its intermediates.

    ``use_reentrant`` left out means False, the non-reentrant variant (API.md; torch 2.13 warns
    and takes True when it is left out). ``preserve_rng_state`` replays the forward's random
    numbers in the recomputation. The non-reentrant variant takes torch's ``context_fn`` (two
    context managers: around the forward, around the recomputation), ``determinism_check``
    (``"default"``: compare the recomputed tensors' shapes, dtypes and devices; ``"none"``),
    ``early_stop`` (stop the recomputation once every saved tensor is recomputed;
    ``set_checkpoint_early_stop`` overrides it), ``debug`` (a mismatch's error lists the ops of the
    forward and of the recomputation with their stacks; ``set_checkpoint_debug_enabled`` overrides
    it) and keyword arguments for ``fn``.
    """
    if use_reentrant is None:
        use_reentrant = False
    if kwargs and use_reentrant:
        raise ValueError("Unexpected keyword arguments: " + ",".join(arg for arg in kwargs))
    if use_reentrant and (context_fn is not noop_context_fn or debug is not False):
        raise ValueError("Passing `context_fn` or `debug` is only supported when use_reentrant=False.")
    if not use_reentrant:
        return await _checkpoint_without_reentrant(fn, preserve_rng_state, context_fn, determinism_check, debug,
                                                   early_stop, args, kwargs)
    rng_state = factories._rng[0].bit_generator.state if preserve_rng_state else None
    with no_grad():
        outputs = await _call(fn, args, {})
    single = not isinstance(outputs, tuple)
    result = CheckpointFunction.apply(fn, rng_state, (outputs,) if single else outputs, *args)
    return result[0] if single else result


SEQUENTIAL_NOT_EXPLICIT = (
    "torch.utils.checkpoint.checkpoint_sequential: the use_reentrant parameter should be passed explicitly. In "
    "version 2.9 we will raise an exception if use_reentrant is not passed. use_reentrant=False is recommended, but "
    "if you need to preserve the current default behavior, you can pass use_reentrant=True. Refer to docs for more "
    "details on the differences between the two variants.")
"""torch 2.13's warning when ``checkpoint_sequential`` is not told ``use_reentrant``."""


async def checkpoint_sequential(functions: Any, segments: int, input: Any, use_reentrant: bool | None = None,
                                **kwargs: Any) -> Any:
    """torch's ``checkpoint_sequential``: ``functions`` (a ``Sequential`` or a list of modules or
    functions, each a ``def`` or an ``async def``) run in order on ``input``, in ``segments`` chunks
    of ``len(functions) // segments``; every chunk but the last is checkpointed. As torch 2.13,
    ``use_reentrant`` left out warns and means True; ``preserve_rng_state`` is the only other
    keyword."""
    if use_reentrant is None:
        warnings.warn(SEQUENTIAL_NOT_EXPLICIT, UserWarning, stacklevel=2)
        use_reentrant = True
    preserve = kwargs.pop("preserve_rng_state", True)
    if kwargs:
        raise ValueError("Unexpected keyword arguments: " + ",".join(arg for arg in kwargs))

    def run_function(start: int, end: int, functions: list) -> Callable:
        async def forward(input: Any) -> Any:
            for j in range(start, end + 1):
                input = await _call(functions[j], (input,), {})
            return input

        return forward

    if isinstance(functions, Sequential):
        functions = list(functions.children())
    segment_size = len(functions) // segments
    end = -1  # the last chunk is not checkpointed
    for start in range(0, segment_size * (segments - 1), segment_size):
        end = start + segment_size - 1
        input = await checkpoint(run_function(start, end, functions), input, use_reentrant=use_reentrant,
                                 preserve_rng_state=preserve)
    return await run_function(end + 1, len(functions) - 1, functions)(input)
