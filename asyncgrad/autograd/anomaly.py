"""Anomaly mode: forward tracebacks kept in node metadata, NaN checks after every node."""

from __future__ import annotations

import contextvars
import functools
import inspect
import os
import traceback
from typing import Any

anomaly_enabled = contextvars.ContextVar("asyncgrad_anomaly", default=(False, True))
"""(enabled, check_nan), per asyncio task like grad mode."""


_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def is_anomaly_enabled() -> bool:
    return anomaly_enabled.get()[0]


def is_anomaly_check_nan_enabled() -> bool:
    return anomaly_enabled.get()[1]


def set_detect_anomaly(mode: bool, check_nan: bool = True) -> None:
    anomaly_enabled.set((bool(mode), bool(check_nan)))


class detect_anomaly:
    """Context manager and decorator that turns anomaly detection on (torch's name)."""

    def __init__(self, check_nan: bool = True) -> None:
        self.check_nan = check_nan

    def __enter__(self) -> None:
        self._token = anomaly_enabled.set((True, self.check_nan))

    def __exit__(self, *exc: Any) -> None:
        anomaly_enabled.reset(self._token)

    def __call__(self, fn):
        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def async_wrapper(*args, **kwargs):
                with self.__class__(self.check_nan):
                    return await fn(*args, **kwargs)

            return async_wrapper

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.__class__(self.check_nan):
                return fn(*args, **kwargs)

        return wrapper


def forward_traceback() -> str:
    """The user's stack at the point a node was recorded, without asyncgrad's own frames."""
    frames = [f for f in traceback.extract_stack()[:-1] if not f.filename.startswith(_PACKAGE_DIR)]
    return "".join(traceback.format_list(frames))
