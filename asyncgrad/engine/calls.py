"""Running one node: tensor pre-hooks, pre-hooks, apply, release, post-hooks; and the checks
on what it returned. Free of engine state so it can run on the loop or in an executor.

Note [One way to run a node]: every node, inline in a device worker (``Engine.evaluate_function``),
in a kernel thread or as a task of its own, runs through ``call_function`` (``call_function_async``
for a coroutine ``apply``, the one kind that runs as a task). Its first branch is the common case,
a node without hooks that is not called on undefined gradients and got at least one: ``apply``,
then the release of what it saved, with no further call. The one other copy of that branch is the
cpu worker's chain step, which must compute exactly what this branch computes: Note [One evaluate
path] in worker.py, pinned by tests/engine/test_chain_step_matches_route.py.
"""

from __future__ import annotations

from typing import Any

from asyncgrad.devices.backend import backend_of
from asyncgrad.engine.graph_task import GraphTask
from asyncgrad.graph.node import Node
from asyncgrad.variable.hook_calls import run_post, run_pre, run_tensor_pre


def _before_apply(graph_task: GraphTask, node: Node, inputs: list) -> list | None:
    """The inputs after hooks; None when every gradient is undefined and the node may be skipped."""
    hooks = node._hooks
    if hooks is not None:
        inputs = run_tensor_pre(hooks, node, inputs, graph_task.create_graph)
        inputs = run_pre(hooks, node, inputs, graph_task.create_graph)
    for grad in inputs:
        if grad is not None:
            return inputs
    return inputs if node.call_on_undefined else None


def _after_apply(graph_task: GraphTask, node: Node, inputs: list, outputs: Any) -> Any:
    if not graph_task.keep_graph:
        node.release_variables()
    hooks = node._hooks
    if hooks is not None and hooks.post:
        outputs = run_post(hooks, node, outputs, inputs, graph_task.create_graph)
    return outputs


def call_function(graph_task: GraphTask, node: Node, inputs: list) -> Any:
    """Run ``node`` on ``inputs``, wherever it runs (Note [One way to run a node])."""
    if node._hooks is None and not node.call_on_undefined:
        for grad in inputs:
            if grad is not None:
                grad = None  # the buffer's reference must stay the only one (see owned_by)
                outputs = node.apply(inputs, graph_task.create_graph)
                if not graph_task.keep_graph and (node.saved or node.saves_variables):
                    node.release_variables()
                return outputs
        return [None] * node.num_outputs
    inputs = _before_apply(graph_task, node, inputs)
    if inputs is None:
        return [None] * node.num_outputs
    return _after_apply(graph_task, node, inputs, node.apply(inputs, graph_task.create_graph))


async def call_function_async(graph_task: GraphTask, node: Node, inputs: list) -> Any:
    """For nodes whose ``apply`` is a coroutine function."""
    inputs = _before_apply(graph_task, node, inputs)
    if inputs is None:
        return [None] * node.num_outputs
    return _after_apply(graph_task, node, inputs, await node.apply(inputs, graph_task.create_graph))


def validate_grad(node: Node, index: int, grad: Any, meta: tuple, create_graph: bool) -> Any:
    """Bring a gradient to its consumer's shape (summing broadcast dims) and dtype, or fail.

    The engine calls this when a gradient's shape differs or its dtype is not the very dtype
    object of the meta: a raw array of an accelerator carries its library's dtype object, not
    asyncgrad's numpy dtype, so the dtypes are compared here through the array's backend."""
    shape, dtype, device = meta
    backend = None if create_graph else backend_of(grad)
    if grad.shape != shape:
        if not _expandable(shape, grad.shape):
            raise RuntimeError(
                f"Function {node.name()} returned an invalid gradient at index {index} - got {list(grad.shape)} "
                f"but expected shape compatible with {list(shape)}"
            )
        lead = grad.ndim - len(shape)
        axes = tuple(range(lead)) + tuple(i + lead for i, n in enumerate(shape) if n == 1 and grad.shape[i + lead] != 1)
        if create_graph:
            grad = grad.sum(axes, keepdim=True).reshape(shape)
        else:
            grad = backend.xp.reshape(backend.xp.sum(grad, axis=axes, keepdims=True), shape)
    if create_graph:
        if grad.dtype != dtype:
            grad = grad.to(dtype)
    elif backend.dtype(grad) != dtype:
        grad = backend.astype(grad, dtype)
    if create_graph and grad.device is not device:
        raise RuntimeError(
            f"Function {node.name()} returned an invalid gradient at index {index} - expected device {device} "
            f"but got {grad.device}"
        )
    return grad


def _expandable(shape: tuple[int, ...], to: tuple[int, ...]) -> bool:
    if len(shape) > len(to):
        return False
    return all(a == b or a == 1 for a, b in zip(reversed(shape), reversed(to)))


def check_nan(node: Node, outputs: Any, create_graph: bool) -> None:
    """Anomaly mode: fail on the first output gradient holding a NaN (torch's wording).

    Gradients are Tensors when a graph is recorded and raw device arrays (or 0-d numpy scalars)
    otherwise (Note [Grads on the fast path]); only the array is looked at.
    """
    for i, grad in enumerate(outputs):
        if grad is None:
            continue
        data = grad.data if create_graph else grad
        backend = backend_of(data)
        if backend.dtype(data).kind in "fc" and backend.any_nan(data):
            raise RuntimeError(f"Function '{node.name()}' returned nan values in its {i}th output.")
