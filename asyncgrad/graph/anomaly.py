"""Anomaly mode: forward tracebacks kept in node metadata, NaN checks after every node."""

from __future__ import annotations

import contextvars
import functools
import inspect
import os
import sys
import traceback
import warnings
from typing import Any

from asyncgrad.graph.switches import leave

anomaly_enabled = contextvars.ContextVar("asyncgrad_anomaly", default=(False, True))
"""(enabled, check_nan), per asyncio task like grad mode."""

ANOMALY_USED = [False]
"""True from the first time anomaly mode is switched on, in any task: until then ``record`` knows
it is off without reading ``anomaly_enabled`` (Note [Anomaly mode read once it was used])."""

# Note [Anomaly mode read once it was used]: every recorded node asks whether anomaly mode is on, to
# keep the forward's traceback. ``record`` reads this list, much cheaper than the context variable
# (W1's forward shows the per-node cost: ``python -m benchmarks --only W1``), and the answer stays
# exact: the flag is set before the first ``anomaly_enabled.set((True, ..))`` and never cleared, so a
# False flag means no context anywhere has the mode on. Whoever switches the mode on must set it
# (``_switch_on``, called by ``set_detect_anomaly`` and ``detect_anomaly``).


anomaly_parent: contextvars.ContextVar[Any] = contextvars.ContextVar("asyncgrad_anomaly_parent", default=None)
"""Note [Anomaly parents]: while a custom Function's backward runs in anomaly mode, its node; a
custom Function recorded meanwhile (a double backward) keeps it as ``metadata["parent_"]``, so that
when the new node fails, torch's warning names the forward call that induced it too. Only custom
backwards set it: the engine does not say which built-in node is running."""


def _switch_on() -> None:
    ANOMALY_USED[0] = True


_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def is_anomaly_enabled() -> bool:
    """Whether anomaly mode is on in the current context (torch's ``is_anomaly_enabled``)."""
    return anomaly_enabled.get()[0]


def is_anomaly_check_nan_enabled() -> bool:
    return anomaly_enabled.get()[1]


class set_detect_anomaly:
    """torch's ``set_detect_anomaly(mode, check_nan=True)``: switches anomaly detection at once when
    called (as a function), and, used as a context manager, restores the previous setting on exit.
    It does not warn (torch's ``detect_anomaly`` does)."""

    def __init__(self, mode: bool, check_nan: bool = True) -> None:
        if mode:
            _switch_on()  # Note [Anomaly mode read once it was used]
        self._tokens = [anomaly_enabled.set((bool(mode), bool(check_nan)))]

    def __enter__(self) -> None:
        pass

    def __exit__(self, *exc: Any) -> None:
        leave(anomaly_enabled, self._tokens)  # Note [A switch restored where its scope ends]


_ENABLED_WARNING = ("Anomaly Detection has been enabled. This mode will increase the runtime and should only be "
                    "enabled for debugging.")


class detect_anomaly:
    """Context manager and decorator that turns anomaly detection on (torch's name); as torch, it
    warns when made that the mode is slow."""

    def __init__(self, check_nan: bool = True) -> None:
        self.check_nan = check_nan
        warnings.warn(_ENABLED_WARNING, UserWarning, stacklevel=2)

    def __enter__(self) -> None:
        _switch_on()  # Note [Anomaly mode read once it was used]
        self.__dict__.setdefault("_tokens", []).append(anomaly_enabled.set((True, self.check_nan)))

    def __exit__(self, *exc: Any) -> None:
        leave(anomaly_enabled, self.__dict__.get("_tokens", []))  # Note [A switch restored where its scope ends]

    def __call__(self, fn):
        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def async_wrapper(*args, **kwargs):
                with _quiet_copy(self):
                    return await fn(*args, **kwargs)

            return async_wrapper

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with _quiet_copy(self):
                return fn(*args, **kwargs)

        return wrapper


def _quiet_copy(manager: detect_anomaly) -> detect_anomaly:
    """A fresh manager for one call of a decorated function: torch warned once, at decoration."""
    copy = object.__new__(detect_anomaly)
    copy.check_nan = manager.check_nan
    return copy


def report_failure(node: Any, exc: BaseException) -> None:
    """torch's ``print_stack`` for a node that failed in anomaly mode: the warning, with the forward's
    traceback when the node was recorded in anomaly mode (also kept as a note on the error), or
    saying that there is none."""
    trace = node._metadata.get("traceback_") if node._metadata else None
    warn_error_detected(node.name(), trace)
    if trace is not None:
        exc.add_note(f"[asyncgrad] Error detected in {node.name()}. Traceback of forward call that caused the error:\n"
                     + trace)
    parent = node._metadata.get("parent_") if node._metadata else None
    while parent is not None:  # Note [Anomaly parents]
        metadata = parent._metadata or {}
        trace = metadata.get("traceback_")
        if trace is None:
            warn_error_detected(parent.name(), None)
        else:
            _warn(f"\n\nPrevious calculation was induced by {parent.name()}. Traceback of forward call that induced "
                  f"the previous calculation:\n{trace}")
        parent = metadata.get("parent_")


def warn_error_detected(node_name: str, forward_trace: str | None) -> None:
    """torch's warning when a node fails in anomaly mode; the error itself is raised as it was. A node
    recorded outside anomaly mode has no forward trace: torch's warning then says so.

    Called while the engine ends a failing graph task: a warning filter that turns it into an
    exception must not replace the node's error (or leave the graph task unfinished), so, as
    torch does, such a warning is printed to stderr instead."""
    if forward_trace is None:
        text = (f"Error detected in {node_name}. No forward pass information available. Enable detect anomaly during "
                "forward pass for more information.")
    else:
        text = f"Error detected in {node_name}. Traceback of forward call that caused the error:\n{forward_trace}"
    _warn(text)


def _warn(text: str) -> None:
    try:
        warnings.warn(text, UserWarning, stacklevel=2)
    except Exception:  # noqa: BLE001 - any filter action that raises: torch prints the warning
        print(f"UserWarning: {text}", file=sys.stderr)


def forward_traceback() -> str:
    """The user's stack at the point a node was recorded, without asyncgrad's own frames."""
    frames = [f for f in traceback.extract_stack()[:-1] if not f.filename.startswith(_PACKAGE_DIR)]
    return "".join(traceback.format_list(frames))
