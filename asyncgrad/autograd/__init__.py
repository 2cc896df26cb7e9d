"""``ag.autograd``: torch.autograd's namespace (``grad``, ``backward``, ``Function``, ``functional``,
``graph``, ``gradcheck``, anomaly and grad modes), over the front door (``api.py``, ``function.py``,
``graph.py``, ``profiler.py``) and what sits between ``Tensor`` and the ops.

Note [A namespace over the low layers]: ``saved.py``, ``accumulate.py`` and ``hook_calls.py`` need
``Tensor``, so they cannot join the graph record (which knows no Tensor), and the ops import them,
as ``tensor.py`` imports ``awaitable.py``, the engine ``ownership.py`` and the factories
``recorder.py``. Python runs this file before any of its submodules, so importing the front door
here at import time would make the first of those imports load the engine, the ops and ``Tensor``
while ``tensor.py`` is half made: a cycle. The public names are loaded on first use instead, by
the module-level ``__getattr__`` below (PEP 562), through ordinary import statements that
``tests/structure/test_import_cycles.py`` counts like any other; no module imports this package
module itself, so they close no cycle. Each name is then kept in this module's globals, so
``__getattr__`` runs once per name. (Grad and anomaly modes are the graph record's: graph/.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what __getattr__ gives, for type checkers
    from asyncgrad import functional
    from asyncgrad.autograd import profiler
    from asyncgrad.autograd.api import backward, backward_sync, grad, grad_sync
    from asyncgrad.autograd.function import Function, FunctionCtx, InplaceFunction, once_differentiable
    from asyncgrad.autograd.profiler import _profiler_enabled
    from asyncgrad.gradcheck import gradcheck, gradgradcheck
    from asyncgrad.graph.anomaly import detect_anomaly, set_detect_anomaly
    from asyncgrad.graph.grad_mode import (
        enable_grad,
        inference_mode,
        is_multithreading_enabled,
        no_grad,
        set_grad_enabled,
        set_multithreading_enabled,
    )

__all__ = [
    "Function",
    "FunctionCtx",
    "InplaceFunction",
    "backward",
    "backward_sync",
    "detect_anomaly",
    "enable_grad",
    "functional",
    "grad",
    "grad_sync",
    "gradcheck",
    "gradgradcheck",
    "graph",
    "inference_mode",
    "is_multithreading_enabled",
    "no_grad",
    "once_differentiable",
    "set_detect_anomaly",
    "set_grad_enabled",
    "set_multithreading_enabled",
    # the profiler
    "profiler",
    "_profiler_enabled",
]


def _public() -> dict[str, Any]:
    """The names of ``__all__`` (Note [A namespace over the low layers])."""
    # submodules as ``import ... as``: ``from asyncgrad.autograd import graph`` asks this module's
    # ``__getattr__`` for the name before it imports the submodule, which would recurse here
    import asyncgrad.autograd.graph as graph
    import asyncgrad.autograd.profiler as profiler
    from asyncgrad import functional
    from asyncgrad.autograd.api import backward, backward_sync, grad, grad_sync
    from asyncgrad.autograd.function import Function, FunctionCtx, InplaceFunction, once_differentiable
    from asyncgrad.autograd.profiler import _profiler_enabled
    from asyncgrad.gradcheck import gradcheck, gradgradcheck
    from asyncgrad.graph.anomaly import detect_anomaly, set_detect_anomaly
    from asyncgrad.graph.grad_mode import (
        enable_grad,
        inference_mode,
        is_multithreading_enabled,
        no_grad,
        set_grad_enabled,
        set_multithreading_enabled,
    )

    return {
        "Function": Function, "FunctionCtx": FunctionCtx, "InplaceFunction": InplaceFunction, "backward": backward,
        "backward_sync": backward_sync, "detect_anomaly": detect_anomaly, "enable_grad": enable_grad,
        "functional": functional, "grad": grad, "grad_sync": grad_sync, "gradcheck": gradcheck,
        "gradgradcheck": gradgradcheck, "graph": graph, "no_grad": no_grad, "once_differentiable": once_differentiable,
        "set_detect_anomaly": set_detect_anomaly, "set_grad_enabled": set_grad_enabled,
        "inference_mode": inference_mode, "is_multithreading_enabled": is_multithreading_enabled,
        "set_multithreading_enabled": set_multithreading_enabled,
        "profiler": profiler, "_profiler_enabled": _profiler_enabled,  # the profiler
    }


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    names = _public()
    globals().update(names)
    return names[name]


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
