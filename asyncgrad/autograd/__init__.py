"""``ag.autograd``: torch.autograd's namespace, the front door: ``backward``, ``grad`` and their sync
bridges (``api.py``), ``Function`` (``function.py``), ``functional``, ``gradcheck``, ``graph``,
``profiler``, and the grad and anomaly modes of the graph record (``asyncgrad/graph/``).

Note [The front door is the top]: this package sits above the engine, the ops and ``Tensor``, and
nothing below it imports it; what a tensor needs of autograd (saved variables, ``AccumulateGrad``,
hook calls) is ``asyncgrad/variable/``, and the graph record is ``asyncgrad/graph/``.
``tests/structure/test_import_cycles.py`` counts an import of ``asyncgrad.autograd.x`` from outside
as an import of this package too (Python runs this file first), so a lower module importing from
here is a cycle it names.
"""

from asyncgrad.autograd import functional, graph, profiler
from asyncgrad.autograd.api import backward, backward_sync, grad, grad_sync
from asyncgrad.autograd.function import Function, FunctionCtx, InplaceFunction, once_differentiable
from asyncgrad.autograd.gradcheck import gradcheck, gradgradcheck
from asyncgrad.autograd.profiler import _profiler_enabled
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
