"""Where the profilers plug into the layers below them: the recorder of the current context, and
the one flag that ``record`` (ops/_node.py) and the factories test before telling it about an op.

Design: docs/design/profiler-plumbing.md.
"""

from __future__ import annotations

import contextvars
import re
from typing import Any

# Note [Forward ops reach the profiler through record]: ``ag.autograd.profiler.profile`` records
# the forward ops run in its context as torch's ``aten::`` events. Every differentiable op returns
# through ``record`` and every factory through ``factories._leaf``, so these two places are the
# only ones that report an op; they pay one truth test of ``PROFILING`` (the profiles open
# anywhere in the process) when no profile is open, and only then look up the context's recorder
# (``current_recorder``, the same variable that backward passes record through: Note [Recording is
# per task] in asyncgrad/profiler.py). A recorder is a ``profile`` (``ag.profiler.trace`` is one):
# the engine's ``record`` and ``timed``, and ``record_op``, ``record_factory``, ``open_range``, each
# passed on to the recorder it is nested in. This module imports nothing of asyncgrad: the ops and
# the engine both sit above it.


current_recorder: contextvars.ContextVar[Any] = contextvars.ContextVar("asyncgrad_profiler", default=None)
"""The profiler (``asyncgrad.profiler.trace`` or ``ag.autograd.profiler.profile``) that a backward
started in this context records into, or None. Read once when a graph task starts
(``GraphTask.profile``); the worker sets it to its current graph task's, as it does grad mode, so a
reentrant child records where its parent does. Forward ops read it when ``PROFILING``."""

PROFILING: list = []
"""The ``profile`` blocks open in the process (a ``trace`` is one): ``record`` asks the context's
recorder about an op only when this is not empty (Note [Forward ops reach the profiler through record])."""

open_ranges: contextvars.ContextVar[tuple] = contextvars.ContextVar("asyncgrad_record_function", default=())
"""The ``record_function`` ranges open in this context, innermost last: memory allocated or freed
while they are open counts in each of them."""

_ATEN: dict[str, str] = {
    # node classes whose torch op is not their name without "Backward<n>"
    "CopySlices": "aten::copy_", "CopyBackwards": "aten::copy_", "ToCopyBackward0": "aten::to",
    "FillBackward2": "aten::fill_", "FillBackward3": "aten::fill_", "ZeroBackward0": "aten::zero_",
    "PreluKernelBackward0": "aten::prelu", "UnsafeViewBackward0": "aten::_unsafe_view",
    "ReshapeAliasBackward0": "aten::reshape", "LinalgInvExBackward0": "aten::linalg_inv_ex",
}
_SUFFIX = re.compile(r"(Number)?Backwards?\d*(_copy)?$")
_WORD = re.compile(r"(?<=[a-z])(?=[A-Z])|(?<=[A-Za-z0-9])(?=[A-Z][a-z])")


_NAMES: dict[type, str] = {}


def aten_name(cls: type) -> str:
    """torch's name for the op that records a node of class ``cls``: the class's ``aten`` when it
    has one (``nn.linear``'s nodes say ``aten::linear``), else ``MulBackward0`` and
    ``MulNumberBackward`` are ``aten::mul``, ``MaxPool2DWithIndicesBackward0`` is
    ``aten::max_pool2d_with_indices``. Computed once per class."""
    name = _NAMES.get(cls)
    if name is None:
        name = getattr(cls, "aten", None) or _ATEN.get(cls.__name__)
        if name is None:
            name = "aten::" + _WORD.sub("_", _SUFFIX.sub("", cls.__name__).lstrip("_")).lower()
        _NAMES[cls] = name
    return name


def note_op(cls: type, inputs: tuple, result: Any, sequence_nr: int, allocates: bool) -> None:
    """Tell the context's recorder, if any, that the op of node class ``cls`` just returned
    ``result`` (called by ``record`` when ``PROFILING``)."""
    recorder = current_recorder.get()
    if recorder is not None:
        recorder.record_op(aten_name(cls), inputs, result, sequence_nr, allocates)


def note_factory(fn: str, result: Any) -> None:
    """Tell the context's recorder, if any, that the factory ``fn`` (``"rand"``, ``"zeros"``) just
    made ``result`` (called by the factories when ``PROFILING``)."""
    recorder = current_recorder.get()
    if recorder is not None:
        recorder.record_factory("aten::" + fn, result)
