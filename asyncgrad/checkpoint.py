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
import functools
import inspect
from typing import Any, Callable, ContextManager

from asyncgrad import factories
from asyncgrad.autograd.api import backward, call_plain
from asyncgrad.autograd.function import Function
from asyncgrad.engine.graph_task import current_graph_task
from asyncgrad.graph.grad_mode import enable_grad, grad_enabled, no_grad
from asyncgrad.graph.node import saved_tensors_hooks
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
    retained graph recomputes once per backward) reruns ``fn`` on detached inputs, with grad
    enabled and the forward's RNG state, under a pack hook that collects the detached values in
    order; torch's CheckpointErrors report a different count or metadata. Each value is handed out
    once and dropped (a second unpack is torch's error), and what a backward did not use goes with
    its graph task (a final callback). A nested checkpoint in ``fn`` works as in the forward: its
    own hooks are innermost, so it keeps its own handles, and its values are recomputed when its
    own nodes unpack them. The recomputation runs where the unpack happens, inside a node, where
    nothing can be awaited: for an ``async def fn`` an identity node on the outputs (its backward
    is an ``async def``, which runs before any node of the region) awaits the recomputation first.
    """

    def __init__(self, fn: Callable, args: tuple, kwargs: dict, rng_state: Any, recompute_context: ContextManager,
                 check_metadata: bool) -> None:
        self.fn = fn
        self.args = args
        self.kwargs = kwargs
        self.rng_state = rng_state
        self.recompute_context = recompute_context
        self.check_metadata = check_metadata
        self.forward_completed = False
        """False while ``fn`` still runs the first time: a backward inside it (``fn`` calling ``grad``)
        recomputes a region whose forward is not over, so the counts cannot agree yet (torch's
        ``ignore_saved_mismatch``)."""
        self.metas: list[dict] = []
        self.recomputed: dict[int | None, dict[int, Tensor]] = {}

    def pack(self, t: Tensor) -> _Handle:
        self.metas.append(_meta(t))
        return _Handle(len(self.metas) - 1)

    def unpack(self, handle: _Handle) -> Tensor:
        key = self._key()
        values = self.recomputed.get(key)
        if values is None:
            with self.recomputing(key) as (inputs, kwargs):
                _call_now(self.fn, inputs, kwargs)
            values = self.recomputed[key]
        value = values.pop(handle.index, None)
        if value is None:
            raise CheckpointError(
                "torch.utils.checkpoint: Unpack is being triggered for a tensor that was already unpacked once. If "
                "you are calling ctx.saved_tensors in backward, make sure to do so only once. Otherwise please open "
                "an issue with details on your use case.")
        return value

    @staticmethod
    def _key() -> int | None:
        graph_task = current_graph_task.get()
        return None if graph_task is None else id(graph_task)

    def recomputing(self, key: int | None) -> _Recomputation:
        return _Recomputation(self, key)

    def check(self, values: dict[int, Tensor], count: int) -> None:
        if count != len(self.metas):
            raise CheckpointError(
                "torch.utils.checkpoint: A different number of tensors was saved during the original forward and "
                f"recomputation.\nNumber of tensors saved during forward: {len(self.metas)}\nNumber of tensors "
                f"saved during recomputation: {count}.")
        if not self.check_metadata:
            return
        different = [(i, self.metas[i], _meta(v)) for i, v in values.items() if _meta(v) != self.metas[i]]
        if different:
            listed = "".join(f"tensor at position {i}:\nsaved metadata: {saved}\nrecomputed metadata: {new}\n"
                             for i, saved, new in different)
            raise CheckpointError("torch.utils.checkpoint: Recomputed values for the following tensors have "
                                  f"different metadata than during the forward pass.\n{listed}.")


class _Recomputation:
    """``with frame.recomputing(key) as (inputs, kwargs): fn(*inputs, **kwargs)`` stores the values
    that ``fn`` saves into ``frame.recomputed[key]`` (Note [Non-reentrant checkpoint])."""

    def __init__(self, frame: _Frame, key: int | None) -> None:
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
                                  "during the original forward pass.")
        self.values[self.count] = value
        self.count += 1
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

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        self.frame.recompute_context.__exit__(exc_type, *exc)
        self.grad.__exit__()
        self.hooks.__exit__()
        self.rng.__exit__()
        if exc_type is not None:
            return
        if not self.ignore_mismatch:
            self.frame.check(self.values, self.count)
        self.frame.recomputed[self.key] = self.values
        graph_task = current_graph_task.get()
        if graph_task is not None:
            graph_task.final_callbacks.append(self._forget)

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
            with frame.recomputing(key) as (inputs, kwargs):
                await _call(frame.fn, inputs, kwargs)
        return (None, *grads)


async def _checkpoint_without_reentrant(fn: Callable, preserve_rng_state: bool, context_fn: Callable,
                                       determinism_check: str, args: tuple, kwargs: dict) -> Any:
    if determinism_check not in DETERMINISM_CHECKS:
        raise ValueError(f"determinism_check should be one of {list(DETERMINISM_CHECKS)}, but got {determinism_check}")
    forward_context, recompute_context = context_fn()
    rng_state = factories._rng[0].bit_generator.state if preserve_rng_state else None
    frame = _Frame(fn, args, kwargs, rng_state, recompute_context, determinism_check == "default")
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
    (``"default"``: compare the recomputed tensors' shapes, dtypes and devices; ``"none"``) and
    keyword arguments for ``fn``; ``early_stop`` is accepted (the recomputation always runs
    ``fn`` to its end, which changes its cost, not its results); ``debug=True`` is not supported.
    """
    if use_reentrant is None:
        use_reentrant = False
    if kwargs and use_reentrant:
        raise ValueError("Unexpected keyword arguments: " + ",".join(arg for arg in kwargs))
    if use_reentrant and (context_fn is not noop_context_fn or debug is not False):
        raise ValueError("Passing `context_fn` or `debug` is only supported when use_reentrant=False.")
    if debug:
        raise NotImplementedError("checkpoint(debug=True) is not supported by asyncgrad")
    if not use_reentrant:
        return await _checkpoint_without_reentrant(fn, preserve_rng_state, context_fn, determinism_check, args,
                                                   kwargs)
    rng_state = factories._rng[0].bit_generator.state if preserve_rng_state else None
    with no_grad():
        outputs = await _call(fn, args, {})
    single = not isinstance(outputs, tuple)
    result = CheckpointFunction.apply(fn, rng_state, (outputs,) if single else outputs, *args)
    return result[0] if single else result
