"""Grad mode on context variables, so that each asyncio task has its own.

``no_grad``/``enable_grad``/``set_grad_enabled`` are context managers and decorators, on
``def`` and ``async def`` alike; a decorated coroutine function switches the mode inside
the coroutine's own context, never in the caller's.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import sys
import warnings
from typing import Any, Callable

import numpy as np

from asyncgrad._validate import type_label
from asyncgrad.graph.switches import leave, restore

grad_enabled = contextvars.ContextVar("asyncgrad_grad_enabled", default=True)


def is_grad_enabled() -> bool:
    """Whether gradient recording is on in the current context (per asyncio task, unlike torch's per thread)."""
    return grad_enabled.get()


# Note [Grad mode at every resume]: a decorated function runs with the mode wherever its body
# runs, never leaking it to the caller:
#
# * a plain function: set around the call;
# * a generator function: set around each resume (``send``/``throw``/``close``) and restored
#   at each ``yield``, as torch's ``_wrap_generator``; the consumer's code between two ``next``
#   keeps its own mode;
# * an async generator function: the same around each ``asend``/``athrow``/``aclose``;
# * a coroutine function (``async def``): set inside the coroutine, so the mode holds across
#   its awaits; the context variable is per asyncio task, so other tasks interleaved with it
#   keep theirs. torch's decorator only wraps the call that creates a coroutine (its body then
#   runs with the caller's mode); asyncgrad, where coroutines are the way in, holds it inside.
#
# A class given to the decorator gets torch's FutureWarning, and its construction is wrapped.
class _GradModeContext:
    """Base of the grad-mode switches: ``with`` form and decorator form (``@no_grad()`` and, as
    torch, ``@no_grad`` without parentheses)."""

    _mode: bool

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        if cls is not set_grad_enabled and len(args) == 1 and not kwargs and callable(args[0]):
            return cls()(args[0])  # @no_grad without parentheses
        return super().__new__(cls)

    def __enter__(self) -> None:
        self._tokens = getattr(self, "_tokens", [])
        self._tokens.append(grad_enabled.set(self._mode))

    def __exit__(self, *exc: Any) -> None:
        leave(grad_enabled, self._tokens)  # Note [A switch restored where its scope ends]

    def __call__(self, fn: Callable) -> Callable:
        if inspect.isclass(fn):
            warnings.warn(
                "Decorating classes is deprecated and will be disabled in future versions. You should only decorate "
                "functions or methods. To preserve the current behavior of class decoration, you can directly "
                "decorate the `__init__` method and nothing else.", FutureWarning, stacklevel=2)
            cls = fn

            def construct(*args: Any, **kwargs: Any) -> Any:
                return cls(*args, **kwargs)

            fn = construct
        mode = self._mode
        if inspect.isasyncgenfunction(fn):
            return _wrap_async_generator(mode, fn)
        if inspect.isgeneratorfunction(fn):
            return _wrap_generator(mode, fn)
        return _wrap_call(grad_enabled, mode, fn)


def _wrap_call(var: contextvars.ContextVar, mode: bool, fn: Callable) -> Callable:
    """``fn`` with ``var`` set to ``mode`` while it runs (Note [Grad mode at every resume]): around
    the call of a plain function, inside the coroutine of an ``async def``."""
    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def async_wrapper(*args, **kwargs):
            token = var.set(mode)
            try:
                return await fn(*args, **kwargs)
            finally:
                restore(var, token)

        return async_wrapper

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        token = var.set(mode)
        try:
            return fn(*args, **kwargs)
        finally:
            restore(var, token)

    return wrapper


def _wrap_generator(mode: bool, fn: Callable) -> Callable:
    """torch's ``_wrap_generator``: the mode around each resume of the generator (Note [Grad mode
    at every resume])."""

    @functools.wraps(fn)
    def generator_context(*args: Any, **kwargs: Any) -> Any:
        gen = fn(*args, **kwargs)
        switch = enable_grad() if mode else no_grad()
        try:
            with switch:
                response = gen.send(None)
            while True:
                try:
                    request = yield response
                except GeneratorExit:
                    with switch:
                        gen.close()
                    raise
                except BaseException:
                    with switch:
                        response = gen.throw(*sys.exc_info()[1:2])
                else:
                    with switch:
                        response = gen.send(request)
        except StopIteration as stop:
            return stop.value

    return generator_context


def _wrap_async_generator(mode: bool, fn: Callable) -> Callable:
    """``_wrap_generator`` for an async generator: the mode around each ``asend``/``athrow``/``aclose``."""

    @functools.wraps(fn)
    async def async_generator_context(*args: Any, **kwargs: Any) -> Any:
        gen = fn(*args, **kwargs)
        switch = enable_grad() if mode else no_grad()
        try:
            with switch:
                response = await gen.asend(None)
            while True:
                try:
                    request = yield response
                except GeneratorExit:
                    with switch:
                        await gen.aclose()
                    raise
                except BaseException:
                    with switch:
                        response = await gen.athrow(*sys.exc_info()[1:2])
                else:
                    with switch:
                        response = await gen.asend(request)
        except StopAsyncIteration:
            return

    return async_generator_context


class no_grad(_GradModeContext):
    _mode = False


class enable_grad(_GradModeContext):
    _mode = True


class set_grad_enabled(_GradModeContext):
    """As torch: switches the mode at once when called, and restores it on ``__exit__``."""

    def __init__(self, mode: bool) -> None:
        if not isinstance(mode, (bool, np.bool_)):
            raise TypeError(f"set_grad_enabled(): argument 'enabled' (position 1) must be bool, not {type_label(mode)}")
        self._mode = bool(mode)
        self._tokens = [grad_enabled.set(self._mode)]

    def __enter__(self) -> None:
        pass

    def __call__(self, fn: Callable) -> Callable:
        leave(grad_enabled, self._tokens)  # the decorator form switches only inside ``fn``
        return super().__call__(fn)


# --------------------------------------------------------------------------- multithreading
multithreading_enabled = contextvars.ContextVar("asyncgrad_multithreading_enabled", default=True)
"""Read by ``Engine.execute`` as a backward starts: False keeps every node of it on the loop."""


def is_multithreading_enabled() -> bool:
    """torch's ``is_multithreading_enabled``: whether backwards started in this context may use kernel threads."""
    return multithreading_enabled.get()


class set_multithreading_enabled:
    """As torch: ``set_multithreading_enabled(False)`` runs the backwards started in this context
    without kernel threads (every node on the event loop). Switches at once when called, so it works
    as a plain function too, and restores the previous mode on ``__exit__``; also a decorator."""

    def __init__(self, mode: bool) -> None:
        if not isinstance(mode, (bool, np.bool_)):
            raise TypeError(f"set_multithreading_enabled(): argument 'enabled' (position 1) must be bool, "
                            f"not {type_label(mode)}")
        self.mode = bool(mode)
        self._tokens = [multithreading_enabled.set(self.mode)]

    def __enter__(self) -> None:
        pass

    def __exit__(self, *exc: Any) -> None:
        leave(multithreading_enabled, self._tokens)  # Note [A switch restored where its scope ends]

    def clone(self) -> set_multithreading_enabled:
        return self.__class__(self.mode)

    def __call__(self, fn: Callable) -> Callable:
        # The decorator form switches only inside ``fn``. (torch's leaves the mode switched in the
        # decorating context, since its constructor switches it and nothing restores it.)
        leave(multithreading_enabled, self._tokens)
        return _wrap_call(multithreading_enabled, self.mode, fn)


# --------------------------------------------------------------------------- inference mode
inference_enabled = contextvars.ContextVar("asyncgrad_inference_mode", default=False)


def is_inference_mode_enabled() -> bool:
    """Whether an ``inference_mode()`` block is active in the current context."""
    return inference_enabled.get()


INFERENCE_ACTIVE = [0]
"""How many ``inference_mode(True)`` blocks are open, in any context: while none is, making a tensor
costs one test of this flag (Note [Inference tensors])."""

INFERENCE_INPLACE = ("Inplace update to inference tensor outside InferenceMode is not allowed.You can make a clone to "
                     "get a normal tensor before doing inplace update.See https://github.com/pytorch/rfcs/pull/17 for "
                     "more details.")
INFERENCE_SAVED = ("Inference tensors cannot be saved for backward. Please do not use Tensors created in inference "
                   "mode in computation tracked by autograd. To work around this, you can make a clone to get a normal "
                   "tensor and use it in autograd, or use `torch.no_grad()` instead of `torch.inference_mode()`.")


class InferenceVersion(list):
    """Note [Inference tensors]: as torch, a tensor made under ``inference_mode()`` (and every view
    of it) is an inference tensor: ``is_inference()``, refused in place outside inference mode
    (INFERENCE_INPLACE), never saved for backward (INFERENCE_SAVED), no ``_version``. What marks it
    is its version counter, which views share: this list subclass, made by ``Tensor._make`` and
    ``Tensor.__init__`` (the one flag test, ``INFERENCE_ACTIVE``, while no block is open), so no
    tensor carries another slot. A view of a normal tensor made inside keeps its base's counter and
    stays normal, as in torch. The in-place refusal is the counter's own ``__setitem__`` (every
    in-place bumps it; ``apply_inplace`` asks first, so nothing is written before it raises);
    saving is refused by ``SavedTensor``."""

    __slots__ = ()
    tracks_version = False  # ``increment_version`` leaves it alone, as torch does

    def __setitem__(self, index: Any, value: Any) -> None:
        if not inference_enabled.get():
            raise RuntimeError(INFERENCE_INPLACE)
        list.__setitem__(self, index, value)


def fresh_version() -> list:
    """The version counter of a new tensor: an inference one under ``inference_mode()``."""
    return InferenceVersion([0]) if INFERENCE_ACTIVE[0] and inference_enabled.get() else [0]


class inference_mode:
    """torch's ``inference_mode(mode=True)``: a context manager and a decorator (also bare:
    ``@inference_mode``). Enabled, it switches grad mode off as ``no_grad`` does, so nothing is
    recorded, and tensors made inside are inference tensors (Note [Inference tensors]); disabled
    (``inference_mode(False)``), it switches grad mode on and makes normal tensors, as torch's does."""

    def __new__(cls, mode: Any = True) -> Any:
        if isinstance(mode, (bool, np.bool_)):
            return super().__new__(cls)
        return cls()(mode)  # bare decorator: the function came as ``mode``

    def __init__(self, mode: bool = True) -> None:
        self.mode = bool(mode)

    def __enter__(self) -> None:
        modes = self.__dict__.setdefault("_tokens", [])
        grads = self.__dict__.setdefault("_grad_tokens", [])
        modes.append(inference_enabled.set(self.mode))
        grads.append(grad_enabled.set(not self.mode))
        if self.mode:
            INFERENCE_ACTIVE[0] += 1

    def __exit__(self, *exc: Any) -> None:
        # The two lists grow and shrink together (Note [A switch restored where its scope ends]), so
        # the scope ended in one is the scope ended in the other; the count of open blocks goes down
        # once per scope ended, wherever it ends.
        ended = leave(inference_enabled, self.__dict__.get("_tokens", []))
        leave(grad_enabled, self.__dict__.get("_grad_tokens", []))
        if ended and self.mode:
            INFERENCE_ACTIVE[0] -= 1

    def clone(self) -> inference_mode:
        return self.__class__(self.mode)

    def __call__(self, fn: Callable) -> Callable:
        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def async_wrapper(*args, **kwargs):
                with self.clone():
                    return await fn(*args, **kwargs)

            return async_wrapper

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.clone():
                return fn(*args, **kwargs)

        return wrapper
