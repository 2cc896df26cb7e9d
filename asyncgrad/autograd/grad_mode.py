"""Grad mode on context variables, so that each asyncio task has its own.

``no_grad``/``enable_grad``/``set_grad_enabled`` are context managers and decorators, on
``def`` and ``async def`` alike; a decorated coroutine function switches the mode inside
the coroutine's own context, never in the caller's.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
from typing import Any, Callable

import numpy as np

from asyncgrad._validate import type_label

grad_enabled = contextvars.ContextVar("asyncgrad_grad_enabled", default=True)


def is_grad_enabled() -> bool:
    return grad_enabled.get()


class _GradModeContext:
    """Base of the grad-mode switches: ``with`` form and decorator form."""

    _mode: bool

    def __enter__(self) -> None:
        self._tokens = getattr(self, "_tokens", [])
        self._tokens.append(grad_enabled.set(self._mode))

    def __exit__(self, *exc: Any) -> None:
        grad_enabled.reset(self._tokens.pop())

    def __call__(self, fn: Callable) -> Callable:
        mode = self._mode
        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def async_wrapper(*args, **kwargs):
                token = grad_enabled.set(mode)
                try:
                    return await fn(*args, **kwargs)
                finally:
                    grad_enabled.reset(token)

            return async_wrapper

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            token = grad_enabled.set(mode)
            try:
                return fn(*args, **kwargs)
            finally:
                grad_enabled.reset(token)

        return wrapper


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
        grad_enabled.reset(self._tokens.pop())
        return super().__call__(fn)


# --------------------------------------------------------------------------- engine-reentry: multithreading
multithreading_enabled = contextvars.ContextVar("asyncgrad_multithreading_enabled", default=True)
"""Read by ``Engine.execute`` as a backward starts: False keeps every node of it on the loop."""


class set_multithreading_enabled:
    """As torch: ``set_multithreading_enabled(False)`` runs the backwards started in this context
    without kernel threads (every node on the event loop). Switches at once when called, so it works
    as a plain function too, and restores the previous mode on ``__exit__``; also a decorator."""

    def __init__(self, mode: bool) -> None:
        if not isinstance(mode, (bool, np.bool_)):
            raise TypeError(f"set_multithreading_enabled(): argument 'enabled' (position 1) must be bool, "
                            f"not {type_label(mode)}")
        self.prev = multithreading_enabled.get()
        self.mode = bool(mode)
        multithreading_enabled.set(self.mode)

    def __enter__(self) -> None:
        pass

    def __exit__(self, *exc: Any) -> None:
        multithreading_enabled.set(self.prev)

    def clone(self) -> set_multithreading_enabled:
        return self.__class__(self.mode)

    def __call__(self, fn: Callable) -> Callable:
        # The decorator form switches only inside ``fn``. (torch's leaves the mode switched in the
        # decorating context, since its constructor switches it and nothing restores it.)
        multithreading_enabled.set(self.prev)
        mode = self.mode
        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def async_wrapper(*args, **kwargs):
                token = multithreading_enabled.set(mode)
                try:
                    return await fn(*args, **kwargs)
                finally:
                    multithreading_enabled.reset(token)

            return async_wrapper

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            token = multithreading_enabled.set(mode)
            try:
                return fn(*args, **kwargs)
            finally:
                multithreading_enabled.reset(token)

        return wrapper


# --------------------------------------------------------------------------- engine-reentry: inference mode
inference_enabled = contextvars.ContextVar("asyncgrad_inference_mode", default=False)


def is_inference_mode_enabled() -> bool:
    return inference_enabled.get()


class inference_mode:
    """torch's ``inference_mode(mode=True)``: a context manager and a decorator (also bare:
    ``@inference_mode``). Enabled, it switches grad mode off as ``no_grad`` does, so nothing is
    recorded; disabled (``inference_mode(False)``), it switches grad mode on, as torch's does.
    Tensors made inside are not marked as inference tensors (torch's ``is_inference()``), so using
    them in recorded ops later is not refused."""

    def __new__(cls, mode: Any = True) -> Any:
        if isinstance(mode, (bool, np.bool_)):
            return super().__new__(cls)
        return cls()(mode)  # bare decorator: the function came as ``mode``

    def __init__(self, mode: bool = True) -> None:
        self.mode = bool(mode)

    def __enter__(self) -> None:
        tokens = self.__dict__.setdefault("_tokens", [])
        tokens.append((inference_enabled.set(self.mode), grad_enabled.set(not self.mode)))

    def __exit__(self, *exc: Any) -> None:
        inference_token, grad_token = self._tokens.pop()
        inference_enabled.reset(inference_token)
        grad_enabled.reset(grad_token)

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
