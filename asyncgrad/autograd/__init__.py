"""``ag.autograd``: torch.autograd's namespace (``grad``, ``backward``, ``Function``, ``functional``,
``graph``, ``gradcheck``, anomaly and grad modes), over the package that holds the graph record,
grad and anomaly modes, and the backward()/grad() entry points.

Note [A namespace over the low layers]: this package is also home to layers below the front door
(``grad_mode.py``, ``saved.py``, ``accumulate.py`` sit below the ops), and Python runs this file
before any of its submodules. Importing the front door here at import time would make loading
``grad_mode.py`` load the engine, the ops and ``Tensor`` first: a cycle through ``tensor.py``. So the public names
are loaded on first use, by the module-level ``__getattr__`` below (PEP 562), through ordinary
import statements, which ``tests/structure/test_import_cycles.py`` and ``tools/import-cycles.py`` count
like any other: they are edges from this package module to the layers above, and no module
imports this package module itself (``from asyncgrad.autograd import graph`` resolves to the
submodule), so they close no cycle. Each name is then kept in this module's globals, so
``__getattr__`` runs once per name. Re-exporting from ``asyncgrad/__init__.py`` onto this module
would work too, but would leave these names defined in no file of this package, invisible to
readers of it and reachable only after the top-level package has finished loading.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what __getattr__ gives, for type checkers
    from asyncgrad import functional
    from asyncgrad.autograd import profiler
    from asyncgrad.autograd.anomaly import detect_anomaly, set_detect_anomaly
    from asyncgrad.autograd.api import backward, backward_sync, grad, grad_sync
    from asyncgrad.autograd.function import Function, FunctionCtx, InplaceFunction, once_differentiable
    from asyncgrad.autograd.grad_mode import (
        enable_grad,
        inference_mode,
        is_multithreading_enabled,
        no_grad,
        set_grad_enabled,
        set_multithreading_enabled,
    )
    from asyncgrad.autograd.profiler import _profiler_enabled
    from asyncgrad.gradcheck import gradcheck, gradgradcheck

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
    from asyncgrad.autograd.anomaly import detect_anomaly, set_detect_anomaly
    from asyncgrad.autograd.api import backward, backward_sync, grad, grad_sync
    from asyncgrad.autograd.function import Function, FunctionCtx, InplaceFunction, once_differentiable
    from asyncgrad.autograd.grad_mode import (
        enable_grad,
        inference_mode,
        is_multithreading_enabled,
        no_grad,
        set_grad_enabled,
        set_multithreading_enabled,
    )
    from asyncgrad.autograd.profiler import _profiler_enabled
    from asyncgrad.gradcheck import gradcheck, gradgradcheck

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
