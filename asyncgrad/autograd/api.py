"""backward() and grad(): from tensors to the engine's roots, edges and initial gradients.

Both return an ``EngineCall`` to await; without a running loop they run at once, so a forgotten
``await`` never skips a backward (Note [Await or not] in awaitable.py). ``backward_sync``/``grad_sync``
run them for plain scripts, and from a kernel thread of the engine (a plain-def custom backward)
hop back to the engine's loop.
"""

from __future__ import annotations

import asyncio
import atexit
import contextvars
import functools
import os
import sys
import threading
import warnings
from collections.abc import Mapping
from typing import Any, Callable, Sequence

import anyio.from_thread
import greenback
import numpy as np

from asyncgrad._validate import type_label
from asyncgrad.dtypes import intern
from asyncgrad.engine.engine import ONES, get_engine, implicit_ones
from asyncgrad.engine.graph_task import current_graph_task
from asyncgrad.engine.kernels import run_from_kernel_thread
from asyncgrad.engine.worker import reenter
from asyncgrad.graph.awaitable import EngineCall, _fresh_on, check, pending, require_asyncio
from asyncgrad.graph.node import NO_EDGE, Edge, GradientEdge
from asyncgrad.ops.shape import stack
from asyncgrad.tensor import Tensor
from asyncgrad.variable.accumulate import gradient_edge

TensorOrTensors = Tensor | GradientEdge | Sequence[Tensor] | Sequence[GradientEdge]  # torch takes GradientEdges too
_get_running_loop = asyncio._get_running_loop


def _tuple(tensors: Any, what: str) -> tuple:
    """The roots (``tensors``, ``outputs``): a Tensor or an iterable of Tensors (or GradientEdges)."""
    if isinstance(tensors, (Tensor, GradientEdge)):
        return (tensors,)
    result = tuple(tensors)  # None: torch's "'NoneType' object is not iterable"
    for i, t in enumerate(result):
        if not isinstance(t, (Tensor, GradientEdge)):
            raise TypeError(f"{what} must be Tensors, but got {type_label(t)} at index {i}")
    return result


def _inputs(inputs: Any, fn: str) -> tuple:
    """``inputs=`` of backward() and grad(), with torch's words for what is not a Tensor."""
    result = (inputs,) if isinstance(inputs, (Tensor, GradientEdge)) else tuple(inputs)
    if not result:
        raise RuntimeError(f"`inputs` argument to `{fn}()` cannot be empty.")
    for t in result:
        if not isinstance(t, (Tensor, GradientEdge)):
            raise RuntimeError(f"all inputs have to be Tensors or GradientEdges, but got {type_label(t)}")
    return result


def _gradients(grads: Any) -> tuple:
    """``grad_tensors``/``grad_outputs``: Tensors or None (torch's words for the rest)."""
    result = (grads,) if isinstance(grads, Tensor) else tuple(grads)
    for g in result:
        if g is not None and not isinstance(g, Tensor):
            raise TypeError(f"gradients can be either Tensors or None, but got {type(g).__name__}")
    return result


def _flag(value: Any, fn: str, name: str) -> Any:
    """retain_graph / create_graph: a bool (or an int, which torch reads as one) or None."""
    if value is None or isinstance(value, (bool, int, np.bool_, np.integer)):
        return value
    raise TypeError(f"{fn}(): argument '{name}' must be bool, not {type_label(value)}")


def _make_grads(outputs: tuple[Tensor, ...], grads: tuple, create_graph: bool) -> list:
    """The initial gradient of each root, as the engine moves it (array or Tensor)."""
    result = []
    for i, (out, grad) in enumerate(zip(outputs, grads)):
        if isinstance(out, GradientEdge):  # its node's metadata stands for the output (torch)
            out = _EdgeOutput(out)
        if grad is None:
            result.append(_implicit(out))
            continue
        elif not isinstance(grad, Tensor):
            raise TypeError(f"gradients can be either Tensors or None, but got {type(grad).__name__}")
        else:
            if grad.shape != out.shape:
                raise RuntimeError(
                    f"Mismatch in shape: grad_output[{i}] has a shape of {_size(grad.shape)} and output[{i}] has a "
                    f"shape of {_size(out.shape)}."
                )
            if grad.device is not out.device:
                raise RuntimeError(
                    f"invalid gradient at index {i} - expected device {out.device} but got {grad.device}")
        if create_graph:  # a real gradient of another dtype is cast to the output's, as torch does
            result.append(grad if grad.dtype == out.dtype else grad.to(out.dtype))
        else:
            result.append(out.device.backend.astype(grad.data, out.dtype))
    return result


def _implicit(out: Any) -> Any:
    """The initial gradient of a root given none: ``ONES`` for a real scalar that requires grad
    (made later: Note [The implicit gradient is made on the budget] in engine/engine.py), None for
    a root that does not require grad (``_root_edge`` refuses it)."""
    if not out._requires_grad:
        return None
    if out.numel() != 1:
        raise RuntimeError("grad can be implicitly created only for scalar outputs")
    if not out.is_floating_point():
        raise RuntimeError(f"grad can be implicitly created only for real scalar outputs but got {out.dtype}")
    return ONES


class _EdgeOutput:
    """A GradientEdge as an output: shape, dtype and device from its node's input metadata."""

    _requires_grad = True

    def __init__(self, edge: GradientEdge) -> None:
        self.shape, dtype, self.device = edge.node._input_meta[edge.output_nr]
        self.dtype = intern(dtype)  # the meta holds the array's numpy dtype

    def numel(self) -> int:
        return int(np.prod(self.shape))

    def is_floating_point(self) -> bool:
        return np.dtype(self.dtype).kind in "fc"


def _size(shape: tuple[int, ...]) -> str:
    return f"asyncgrad.Size({list(shape)})"


def _root_edges(tensors: tuple[Tensor, ...]) -> list[Edge]:
    return [_root_edge(t, i) for i, t in enumerate(tensors)]


def _root_edge(t: Tensor | GradientEdge, i: int) -> Edge:
    if isinstance(t, GradientEdge):
        return (t.node, t.output_nr)
    if not t._requires_grad:
        raise RuntimeError(f"element {i} of tensors does not require grad and does not have a grad_fn")
    return gradient_edge(t)


def _input_edge(t: Tensor) -> Edge:
    """The edge whose incoming gradient is ``t``'s (None when ``t`` is a leaf no graph used)."""
    if isinstance(t, GradientEdge):
        return (t.node, t.output_nr)
    if t.grad_fn is not None:
        return (t.grad_fn, t.output_nr)
    extra = t._extra
    acc = extra.grad_accumulator() if extra is not None and extra.grad_accumulator is not None else None
    return (acc, 0) if acc is not None else NO_EDGE


_create_graph_warned: list = []
"""Non-empty once the warning below was given: torch gives it once per process (TORCH_WARN_ONCE)."""

_WARN_ALWAYS = [False]
"""``set_warn_always``'s setting, process-wide as torch's."""


def set_warn_always(b: bool) -> None:
    """torch's ``set_warn_always``: when True, a warning torch gives once per process (the one of
    ``backward(create_graph=True)``) is given every time."""
    _WARN_ALWAYS[0] = bool(b)


def is_warn_always_enabled() -> bool:
    """torch's ``is_warn_always_enabled``: ``set_warn_always``'s setting."""
    return _WARN_ALWAYS[0]


def _warn_create_graph() -> None:
    """torch's warning for ``backward(create_graph=True)``, whatever the roots and ``inputs`` (the
    gradient that accumulates into a leaf's ``.grad`` then holds a graph through the leaf)."""
    _create_graph_warned.append(True)
    warnings.warn(
        "Using backward() with create_graph=True will create a reference cycle between the parameter and its "
        "gradient which can cause a memory leak. We recommend using autograd.grad when creating the graph to avoid "
        "this. If you have to use this function, make sure to reset the .grad fields of your parameters to None "
        "after use to break the cycle and avoid the leak.", UserWarning, stacklevel=_user_stacklevel())


def _user_stacklevel() -> int:
    """The ``stacklevel`` of the innermost frame outside asyncgrad, for a warning given from the
    caller of this function: the user's line that called ``backward``, however it got here."""
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame, level = frame.f_back, level + 1
    return level


_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def _prepare_backward(tensors: TensorOrTensors, grad_tensors: Any, retain_graph: bool | None, create_graph: bool,
                      inputs: TensorOrTensors | None) -> tuple:
    """Check ``backward()``'s arguments where it is called; the engine's arguments."""
    if (tensors.__class__ is Tensor and grad_tensors is None and inputs is None and create_graph is False
            and (retain_graph is None or retain_graph.__class__ is bool)):
        # ``loss.backward()``, ``loss.backward(retain_graph=...)``: the checks below for one root given no
        # gradient, without the tuples (Note [A cheap call] in engine/budget.py; benchmarks.stalls many, shared)
        grad_value = _implicit(tensors)
        return [_root_edge(tensors, 0)], [grad_value], bool(retain_graph), False, None
    tensors = _tuple(tensors, "tensors")
    if inputs is not None:
        if type(inputs) is dict:  # torch 2.13: the dict's values are the inputs
            inputs = tuple(inputs.values())
        elif isinstance(inputs, Mapping):
            raise TypeError(f"`inputs` argument to `backward()` must be a dict, not {type(inputs).__name__}. "
                            "Other Mapping types are not supported.")
        inputs = _inputs(inputs, "backward")
    retain_graph, create_graph = _flag(retain_graph, "backward", "retain_graph"), _flag(create_graph, "backward",
                                                                                         "create_graph")
    if create_graph and (not _create_graph_warned or _WARN_ALWAYS[0]):
        _warn_create_graph()
    grads = _gradients(grad_tensors) if grad_tensors is not None else (None,) * len(tensors)
    if len(grads) != len(tensors):
        raise RuntimeError(f"got {len(tensors)} tensors and {len(grads)} gradients")
    if retain_graph is None:
        retain_graph = create_graph
    grad_values = _make_grads(tensors, grads, create_graph)
    roots = _root_edges(tensors)
    outputs = None
    if inputs is not None:
        outputs = []
        for t in inputs:
            if isinstance(t, GradientEdge):
                outputs.append((t.node, t.output_nr))
                continue
            if not t._requires_grad:
                raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
            if t.grad_fn is not None:
                t.retain_grad()
            outputs.append(gradient_edge(t))
    return roots, grad_values, retain_graph, create_graph, outputs


async def _implicit_tensors(engine: Any, roots: list, values: list) -> None:
    """``create_graph``: the implicit initial gradients in ``values`` made Tensors, once this call's turn
    on the loop's budget has come (Note [The implicit gradient is made on the budget] in engine/engine.py)."""
    for i, g in enumerate(values):
        if g is ONES:
            if engine.budget.due():
                await engine.budget.give_way()
            device = roots[i][0]._input_meta[roots[i][1]][2]
            values[i] = Tensor._make(implicit_ones(roots[i]), device, False, None, 0, [0])


async def _run_backward(roots: list, grad_values: list, retain_graph: bool, create_graph: bool,
                        outputs: list | None) -> None:
    engine = get_engine()
    if create_graph:
        await _implicit_tensors(engine, roots, grad_values)
    await engine.execute(roots, grad_values, retain_graph, create_graph, True, outputs)


def _prepare_grad(outputs: TensorOrTensors, inputs: TensorOrTensors, grad_outputs: Any, retain_graph: bool | None,
                  create_graph: bool, allow_unused: bool | None, is_grads_batched: bool,
                  materialize_grads: bool) -> tuple:
    """Check ``grad()``'s arguments where it is called; the engine's arguments and what shapes the result."""
    if (outputs.__class__ is Tensor and inputs.__class__ is Tensor and grad_outputs is None and allow_unused is None
            and not is_grads_batched and not materialize_grads and create_graph.__class__ is bool
            and (retain_graph is None or retain_graph.__class__ is bool)):
        # ``grad(loss, x)`` with ``retain_graph``/``create_graph``: the checks below for one output given no
        # gradient and one input (Note [A cheap call] in engine/budget.py; benchmarks.stalls create_graph)
        if not inputs._requires_grad:
            raise RuntimeError("One of the differentiated Tensors does not require grad")
        grad_value = _implicit(outputs)
        retain = create_graph if retain_graph is None else retain_graph
        return [_root_edge(outputs, 0)], [grad_value], retain, create_graph, (inputs,), False, False, False, None
    if materialize_grads and allow_unused is False:
        raise ValueError(
            "Expected allow_unused to be True or not passed when materialize_grads=True, but got: allow_unused=False."
        )
    if allow_unused is None:
        allow_unused = materialize_grads
    outputs = _tuple(outputs, "outputs")
    keys = None
    if type(inputs) is dict:  # torch 2.13: a dict of inputs gives a dict of gradients
        keys, inputs = tuple(inputs), tuple(inputs.values())
    elif isinstance(inputs, Mapping):
        raise TypeError(f"`inputs` argument to `grad()` must be a dict, not {type(inputs).__name__}. "
                        "Other Mapping types are not supported.")
    inputs = _inputs(inputs, "grad")
    retain_graph, create_graph = _flag(retain_graph, "grad", "retain_graph"), _flag(create_graph, "grad",
                                                                                     "create_graph")
    for t in inputs:
        if not isinstance(t, GradientEdge) and not t._requires_grad:
            raise RuntimeError("One of the differentiated Tensors does not require grad")
    grads = _gradients(grad_outputs) if grad_outputs is not None else (None,) * len(outputs)
    if len(grads) != len(outputs):
        raise RuntimeError(
            f"grad_outputs must have the same length as outputs: got {len(grads)} and {len(outputs)}")
    if retain_graph is None:
        retain_graph = create_graph
    if is_grads_batched:
        grad_values = _batched_grads(outputs, grads, create_graph)
    else:
        grad_values = _make_grads(outputs, grads, create_graph)
    roots = _root_edges(outputs)
    return (roots, grad_values, retain_graph, create_graph, inputs, allow_unused, materialize_grads, is_grads_batched,
            keys)


def _batched_grads(outputs: tuple[Tensor, ...], grads: tuple, create_graph: bool) -> list[list]:
    """``is_grads_batched=True``: the initial gradients of each sample of the batch (dimension 0 of every
    ``grad_outputs``), checked with torch's words (those of its ``_make_grads`` and of ``vmap``)."""
    sizes = []
    for i, (out, grad) in enumerate(zip(outputs, grads)):
        if grad is None:
            if out._requires_grad and out.numel() == 1 and out.is_floating_point() and out.ndim == 0:
                raise ValueError("vmap(vjp, in_dims=0, ...)(<inputs>): Got in_dim=0 for some input, but that input "
                                 "is a Tensor of dimensionality 0 so expected in_dim to satisfy 0 <= in_dim < 0.")
            continue
        first = grad[0]  # an empty batch: torch's IndexError
        if first.shape != out.shape:  # torch reports the sample's shape less its first dimension (sic)
            raise RuntimeError(
                "If `is_grads_batched=True`, we interpret the first dimension of each grad_output as the batch "
                "dimension. The sizes of the remaining dimensions are expected to match the shape of corresponding "
                f"output, but a mismatch was detected: grad_output[{i}] has a shape of {_size(first.shape[1:])} and "
                f"output[{i}] has a shape of {_size(out.shape)}. If you only want some tensors in `grad_output` to "
                "be considered batched, consider using vmap.")
        sizes.append(grad.shape[0])
    if len(set(sizes)) > 1:
        raise ValueError(f"vmap: Expected all tensors to have the same size in the mapped dimension, got sizes "
                         f"{sizes} for the mapped dimension")
    if not sizes:  # no gradient to map over: the checks of an unbatched call say what is wrong
        return [_make_grads(outputs, grads, create_graph)]
    return [_make_grads(outputs, tuple(None if g is None else g[b] for g in grads), create_graph)
            for b in range(sizes[0])]


async def _run_grad(roots: list, grad_values: list, retain_graph: bool, create_graph: bool, inputs: tuple,
                    allow_unused: bool, materialize_grads: bool, is_grads_batched: bool = False,
                    keys: tuple | None = None) -> Any:
    engine = get_engine()
    edges = [_input_edge(t) for t in inputs]
    if not is_grads_batched:
        if create_graph:
            await _implicit_tensors(engine, roots, grad_values)
        captured = await engine.execute(roots, grad_values, retain_graph, create_graph, False, edges)
        result = _grad_results(inputs, captured, allow_unused, materialize_grads, create_graph)
    else:
        # torch vmaps one backward over the batch; here one backward per sample (the graph kept for the
        # next), and each input's gradients stacked (``None`` where an input was unused)
        batches = []
        for b, values in enumerate(grad_values):
            keep = retain_graph or b < len(grad_values) - 1
            if create_graph:
                await _implicit_tensors(engine, roots, values)
            captured = await engine.execute(roots, values, keep, create_graph, False, edges)
            batches.append(_grad_results(inputs, captured, allow_unused, False, create_graph))
        result = tuple(
            (None if not materialize_grads else _zeros(t, create_graph)) if per[0] is None else stack(list(per))
            for t, per in zip(inputs, zip(*batches)))
    return result if keys is None else dict(zip(keys, result))


def _zeros(t: Tensor, requires_grad: bool) -> Tensor:
    """torch's ``zeros_like(input, requires_grad=create_graph)`` for a materialized gradient."""
    return Tensor._make(t.device.backend.zeros(t.shape, t.dtype), t.device, requires_grad, None, 0, [0])


def _grad_results(inputs: tuple, captured: list, allow_unused: bool, materialize_grads: bool,
                  create_graph: bool) -> tuple[Tensor | None, ...]:
    result = []
    for i, (t, g) in enumerate(zip(inputs, captured)):
        if g is None:
            if not allow_unused:
                raise RuntimeError(
                    f"The differentiated Tensor at index {i} appears to not have been used in the graph. "
                    "Set allow_unused=True if this is the desired behavior."
                )
            if materialize_grads:  # torch: zeros_like(input, requires_grad=create_graph)
                if isinstance(t, GradientEdge):
                    raise RuntimeError("materialize_grads cannot be used when the given input is a GradientEdge")
                g = _zeros(t, create_graph)
            result.append(g)
        elif isinstance(g, Tensor):
            result.append(g)
        else:
            device = t.node._input_meta[t.output_nr][2] if isinstance(t, GradientEdge) else t.device
            backend = device.backend
            if not backend.owns_memory(g):
                g = backend.copy(g, "C")
            result.append(Tensor._make(g, device, False, None, 0, [0]))
    return tuple(result)


async def _backward(tensors: TensorOrTensors, grad_tensors: Any = None, retain_graph: bool | None = None,
                    create_graph: bool = False, inputs: TensorOrTensors | None = None) -> None:
    """``backward()`` as a plain coroutine, for the blocking bridges."""
    await _run_backward(*_prepare_backward(tensors, grad_tensors, retain_graph, create_graph, inputs))


async def _grad(outputs: TensorOrTensors, inputs: TensorOrTensors, grad_outputs: Any = None,
                retain_graph: bool | None = None, create_graph: bool = False, allow_unused: bool | None = None,
                is_grads_batched: bool = False, materialize_grads: bool = False) -> tuple[Tensor | None, ...]:
    """``grad()`` as a plain coroutine, for the blocking bridges (``grad_sync`` has dealt with ``only_inputs``)."""
    return await _run_grad(*_prepare_grad(outputs, inputs, grad_outputs, retain_graph, create_graph, allow_unused,
                                          is_grads_batched, materialize_grads))


_backward.__name__ = _backward.__qualname__ = "backward"  # run_sync names the call in its messages
_grad.__name__ = _grad.__qualname__ = "grad"


# --------------------------------------------------------------------------- the front door
def _call(kind: str, run: Callable, prepared: tuple, depth: int) -> EngineCall:
    """Note [Await or not] (awaitable.py): an EngineCall, already finished when no loop runs here."""
    loop = _get_running_loop()
    # with nothing but this loop's fresh calls pending, check would return at once (Note [Fresh calls are
    # counted] in graph/awaitable.py)
    if pending and len(pending) != _fresh_on.get(loop, 0):
        check(f"{kind}()", fresh=False)
    if loop is None:
        require_asyncio(f"{kind}()")
        return EngineCall.finished(kind, run_sync(run, *prepared))
    if current_graph_task.get() is not None and greenback.has_portal():
        # A plain-def backward on the loop cannot await: run it here, through the portal.
        return EngineCall.finished(kind, run_sync(run, *prepared))
    budget = get_engine().budget
    budget.charge()  # Note [A caller's step is on the budget] in engine/budget.py
    return EngineCall(kind, run(*prepared), loop, depth + 1, budget)


def backward(tensors: TensorOrTensors, grad_tensors: Any = None, retain_graph: bool | None = None,
             create_graph: bool = False, inputs: TensorOrTensors | None = None, *, _depth: int = 1) -> EngineCall[None]:
    """Accumulate the gradients of ``tensors`` into the ``.grad`` of leaves (or of ``inputs``).

    Await it (``await ag.backward(...)``); without a running event loop it runs at once
    (Note [Await or not] in awaitable.py).
    """
    return _call("backward", _run_backward,
                 _prepare_backward(tensors, grad_tensors, retain_graph, create_graph, inputs), _depth)


def grad(outputs: TensorOrTensors, inputs: TensorOrTensors, grad_outputs: Any = None,
         retain_graph: bool | None = None, create_graph: bool = False, only_inputs: bool = True,
         allow_unused: bool | None = None, is_grads_batched: bool = False,
         materialize_grads: bool = False) -> EngineCall[tuple[Tensor, ...]]:
    """The gradients of ``outputs`` with respect to ``inputs``; leaves' ``.grad`` stay untouched.

    ``await ag.grad(...)`` gives the tuple (Note [Await or not] in awaitable.py), or a dict with the
    keys of ``inputs`` when that is a dict (as torch 2.13). ``only_inputs`` is deprecated and ignored,
    as in torch, which warns when it is False. ``is_grads_batched=True`` reads dimension 0 of every
    ``grad_outputs`` as a batch and gives each input's gradients stacked along it (torch vmaps one
    backward; this runs one per sample, same results).
    """
    if not only_inputs:
        _warn_only_inputs()
    return _call("grad", _run_grad,
                 _prepare_grad(outputs, inputs, grad_outputs, retain_graph, create_graph, allow_unused,
                               is_grads_batched, materialize_grads), 1)


def _warn_only_inputs() -> None:
    """torch's FutureWarning for ``grad(only_inputs=False)``, pointing at the caller of grad()/grad_sync()."""
    warnings.warn("only_inputs argument is deprecated and is ignored now (defaults to True). To accumulate gradient "
                  "for other parts of the graph, please use torch.autograd.backward.", FutureWarning, stacklevel=3)


# --------------------------------------------------------------------------- blocking bridges
class _ThreadLoop:
    """The event loop on which the blocking bridges run in one thread without a loop of its own.

    Note [Thread loops]: a loop holds three file descriptors (its selector and self-pipe), so
    it must not outlive its thread. The only reference to this object is the thread's slot in
    ``_runners`` (a ``threading.local``), which CPython clears in the thread itself as the
    thread ends: ``__del__`` then closes the loop there. It keeps no reference cycle, so that
    happens at once, not at some later collection. If it is finalized in another thread after
    all (a collection in another thread), the loop is closed without being run there, since
    that thread may be running a loop of its own. The main thread's loop is closed at exit.
    """

    __slots__ = ("runner", "loop", "ident")

    def __init__(self) -> None:
        self.runner = asyncio.Runner()
        # Made in an empty context: the runner and the loop's own handles keep a copy of the context
        # they are made in for as long as the thread lives, and every call brings its own context
        # (Note [A switch restored where its scope ends] in graph/switches.py: no state outlives its scope,
        # not even the one that was open at the first call).
        self.loop = contextvars.Context().run(self.runner.get_loop)
        self.ident = threading.get_ident()

    def close(self) -> None:
        if threading.get_ident() == self.ident:
            self.runner.close()
        else:
            self.loop.close()

    def __del__(self) -> None:
        self.close()


_runners = threading.local()


def _thread_runner() -> asyncio.Runner:
    holder = getattr(_runners, "loop", None)
    if holder is None:
        holder = _runners.loop = _ThreadLoop()
        if threading.current_thread() is threading.main_thread():
            atexit.register(holder.close)
    return holder.runner


def run_sync(coro_fn: Any, *args: Any, **kwargs: Any) -> Any:
    """Run an engine coroutine to completion from synchronous code, in the caller's current context.

    Note [Sync bridge]: from plain code the engine runs on the loop (hooks, plain-def backwards,
    functions recomputed by checkpoint: all in greenback portals) it reenters the running engine
    (``reenter``, Note [Servers] in engine/worker.py); from a kernel thread it hops back to the
    loop; from an anyio worker thread (``anyio.to_thread.run_sync``) it runs on that thread's event
    loop. In a thread with a running loop and no portal it refuses (that would block the loop);
    otherwise it runs on a per-thread loop. Every way runs the call in a copy of the caller's
    context variables as they are at this call (grad mode, anomaly mode, the profiler's trace),
    never in those of an earlier call; and an exception is raised as the call raised it, chained
    to nothing the bridge tried on its way.
    """
    if greenback.has_portal():
        return reenter(coro_fn(*args, **kwargs))
    if _get_running_loop() is not None:
        raise RuntimeError(
            f"{coro_fn.__name__}_sync() cannot be called while an event loop is running in this thread; "
            f"use 'await {coro_fn.__name__}(...)' instead"
        )
    result = run_from_kernel_thread(coro_fn(*args, **kwargs))
    if result is not NotImplemented:
        return result
    if getattr(anyio.from_thread.threadlocals, "current_token", None) is not None:  # an anyio worker thread
        return anyio.from_thread.run(functools.partial(coro_fn, *args, **kwargs))  # copies the context
    return _thread_runner().run(coro_fn(*args, **kwargs), context=contextvars.copy_context())


async def call_plain(fn: Callable, *args: Any) -> Any:
    """``fn(*args)`` in a greenback portal, so that plain code in it may call ``backward_sync``/``grad_sync``
    (Note [Sync bridge]): for the functions that gradcheck, functional and checkpoint call. An ``async
    def`` ``fn`` gives its coroutine, for the caller to await."""
    if not callable(fn):
        return fn(*args)  # Python's TypeError, as torch gives ("'int' object is not callable")
    return await greenback.with_portal_run_sync(fn, *args)


def backward_sync(tensors: TensorOrTensors, grad_tensors: Any = None, retain_graph: bool | None = None,
                  create_graph: bool = False, inputs: TensorOrTensors | None = None) -> None:
    """The blocking form of ``ag.backward``, for code that cannot await.

    In a plain script (no running loop) it runs the backward at once; inside plain code that the engine
    runs (a plain ``def`` backward, a hook, a function given to ``gradcheck`` or ``checkpoint``) it reenters
    the running engine, as torch's reentrant backward does. Elsewhere inside a running loop it raises and
    says to ``await ag.backward(...)``. Arguments as ``ag.backward``."""
    require_asyncio("backward_sync()")
    run_sync(_backward, tensors, grad_tensors, retain_graph, create_graph, inputs=inputs)


def grad_sync(outputs: TensorOrTensors, inputs: TensorOrTensors, grad_outputs: Any = None,
              retain_graph: bool | None = None, create_graph: bool = False, **kwargs: Any) -> tuple:
    """The blocking form of ``ag.grad``, for code that cannot await; returns the tuple of gradients.

    Where it may run is as for ``backward_sync``. Arguments as ``ag.grad``."""
    require_asyncio("grad_sync()")
    if not kwargs.pop("only_inputs", True):
        _warn_only_inputs()
    return run_sync(_grad, outputs, inputs, grad_outputs, retain_graph, create_graph, **kwargs)


async def give_way() -> None:
    """Let the event loop run other work if the engine has held it for its time budget.

    For long forward passes and training steps written as coroutines: call it between layers or
    steps, and the loop is handed back at the same points and for the same budget as the engine's own
    backward slices (Note [One budget per loop] in engine/budget.py), so a forward and a backward
    together hold the loop no longer than one slice. Costs a clock reading when there is budget left.
    Only inside a coroutine on an asyncio loop, as ``await loss.backward()``."""
    require_asyncio("give_way()")
    if _get_running_loop() is None:
        raise RuntimeError("give_way() must be awaited inside a coroutine running on an asyncio event loop")
    budget = get_engine().budget
    if budget.due():
        await budget.give_way()


# ``t.backward()`` and ``t.backward_sync()``: installed on Tensor by asyncgrad/_surface.py (Note [One
# declaration of Tensor's surface]).
def tensor_backward(self: Tensor, gradient: Tensor | None = None, retain_graph: bool | None = None,
                     create_graph: bool = False, inputs: TensorOrTensors | None = None) -> EngineCall[None]:
    """``await t.backward()``: accumulate into the leaves' ``.grad``, as torch's ``backward()``.

    Returns an awaitable; with no event loop running in this thread (a plain script) the
    backward has already run when it returns (Note [Await or not] in graph/awaitable.py).
    """
    return backward(self, gradient, retain_graph, create_graph, inputs=inputs, _depth=2)


def tensor_backward_sync(self: Tensor, gradient: Tensor | None = None, retain_graph: bool | None = None,
                          create_graph: bool = False, inputs: TensorOrTensors | None = None) -> None:
    backward_sync(self, gradient, retain_graph, create_graph, inputs=inputs)


tensor_backward.__name__ = tensor_backward.__qualname__ = "backward"
tensor_backward_sync.__name__ = tensor_backward_sync.__qualname__ = "backward_sync"
