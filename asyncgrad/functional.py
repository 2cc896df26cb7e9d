"""torch.autograd.functional on asyncgrad: vjp, jvp, jacobian, hessian, vhp, hvp (coroutines).

Inputs and outputs keep torch's conventions: a Tensor in gives a Tensor out, a tuple in
gives a tuple out. ``jvp`` and ``hvp`` use the double-backward trick (a vjp is linear in
its cotangent, so differentiating it once more against the cotangent gives a jvp).
"""

from __future__ import annotations

import inspect
from typing import Any, Callable

from asyncgrad import factories
from asyncgrad.autograd.api import call_plain, grad
from asyncgrad.autograd.grad_mode import enable_grad
from asyncgrad.ops.shape import stack
from asyncgrad.tensor import Tensor


def _as_tuple(value: Any, arg_name: str, fn_name: str) -> tuple[bool, tuple]:
    is_tuple = isinstance(value, tuple)
    items = value if is_tuple else (value,)
    for i, item in enumerate(items):
        if not isinstance(item, Tensor):
            if is_tuple:
                raise TypeError(f"The {arg_name} given to {fn_name} must be either a Tensor or a tuple of Tensors but "
                                f"the value at index {i} has type {type(item)}.")
            raise TypeError(f"The {arg_name} given to {fn_name} must be either a Tensor or a tuple of Tensors but the "
                            f"given {arg_name} has type {type(item)}.")
    return is_tuple, items


def _prepare(inputs: tuple, create_graph: bool) -> tuple:
    """Fresh leaves to differentiate against (views that keep the graph when create_graph)."""
    out = []
    for t in inputs:
        if create_graph and t.requires_grad:
            out.append(t.view(t.shape))
        else:
            out.append(t.detach().requires_grad_(True))
    return tuple(out)


def _finish(values: tuple, create_graph: bool) -> tuple:
    if create_graph:
        return values
    return tuple(v.detach() if isinstance(v, Tensor) else v for v in values)


async def _call(func: Callable, inputs: tuple) -> Any:
    with enable_grad():
        result = await call_plain(func, *inputs)  # a plain func may call grad_sync (Note [Sync bridge])
        if inspect.isawaitable(result):
            result = await result
    return result


async def _grads(outputs: tuple, inputs: tuple, grad_outputs: tuple, create_graph: bool, strict: bool,
                 strict_what: str) -> tuple:
    pairs = [(o, g) for o, g in zip(outputs, grad_outputs) if o.requires_grad]
    if not pairs:
        result = (None,) * len(inputs)
    else:
        result = await grad([o for o, _ in pairs], inputs, [g for _, g in pairs], create_graph=create_graph,
                            retain_graph=True, allow_unused=True)
    if strict:
        for i, r in enumerate(result):
            if r is None:
                raise RuntimeError(f"The {strict_what} of the user-provided function is independent of input {i}. "
                                   "This is not allowed in strict mode.")
    return tuple(factories.zeros_like(t) if r is None else r for t, r in zip(inputs, result))


def _check_v(v: Any, like: tuple, name: str, fn_name: str, like_is_tuple: bool) -> tuple:
    """torch's ``_validate_v``, word for word."""
    _, vs = _as_tuple(v, name, fn_name)
    if len(vs) != len(like):
        if like_is_tuple:
            raise RuntimeError(f"v is a tuple of invalid length: should be {len(like)} but got {len(vs)}.")
        raise RuntimeError("The given v should contain a single Tensor.")
    for i, (a, b) in enumerate(zip(vs, like)):
        if a.shape != b.shape:
            prefix = f"Entry {i} in " if like_is_tuple else ""
            raise RuntimeError(f"{prefix}v has invalid size: should be asyncgrad.Size({list(b.shape)}) but got "
                               f"asyncgrad.Size({list(a.shape)}).")
    return vs


async def vjp(func: Callable, inputs: Any, v: Any = None, create_graph: bool = False,
              strict: bool = False) -> tuple[Any, Any]:
    """(func(inputs), v^T J)."""
    is_tuple, inputs = _as_tuple(inputs, "inputs", "vjp")
    inputs = _prepare(inputs, create_graph)
    out_tuple, outputs = _as_tuple(await _call(func, inputs), "outputs of the user-provided function", "vjp")
    if v is None:
        if len(outputs) != 1 or outputs[0].numel() != 1:
            raise RuntimeError("The vector v can only be None if the user-provided function returns a single Tensor "
                               "with a single element.")
        vs = (factories.ones_like(outputs[0]),)
    else:
        vs = _check_v(v, outputs, "v", "vjp", out_tuple)
    result = await _grads(outputs, inputs, vs, create_graph, strict, "output")
    outputs, result = _finish(outputs, create_graph), _finish(result, create_graph)
    return (outputs if out_tuple else outputs[0]), (result if is_tuple else result[0])


async def jvp(func: Callable, inputs: Any, v: Any = None, create_graph: bool = False,
              strict: bool = False) -> tuple[Any, Any]:
    """(func(inputs), J v), by differentiating a vjp against its cotangent."""
    is_tuple, inputs = _as_tuple(inputs, "inputs", "jvp")
    inputs = _prepare(inputs, create_graph)
    if v is None:
        if len(inputs) != 1 or inputs[0].numel() != 1:
            raise RuntimeError("The vector v can only be None if the input to the user-provided function is a single "
                               "Tensor with a single element.")
        vs = (factories.ones_like(inputs[0]),)
    else:
        vs = _check_v(v, inputs, "v", "jvp", is_tuple)
    out_tuple, outputs = _as_tuple(await _call(func, inputs), "outputs of the user-provided function", "jvp")
    cotangents = tuple(factories.zeros_like(o).requires_grad_(True) for o in outputs)
    vjps = await _grads(outputs, inputs, cotangents, True, strict, "output")
    pairs = [(g, w) for g, w in zip(vjps, vs) if g.requires_grad]
    if pairs:
        result = await grad([g for g, _ in pairs], cotangents, [w for _, w in pairs], create_graph=create_graph,
                            retain_graph=True, allow_unused=True)
    else:
        result = (None,) * len(cotangents)
    if strict and any(r is None for r in result):
        raise RuntimeError("The output of the user-provided function is independent of input 0. This is not allowed "
                           "in strict mode.")
    result = tuple(factories.zeros_like(o) if r is None else r for o, r in zip(outputs, result))
    outputs, result = _finish(outputs, create_graph), _finish(result, create_graph)
    return (outputs if out_tuple else outputs[0]), (result if out_tuple else result[0])


async def jacobian(func: Callable, inputs: Any, create_graph: bool = False, strict: bool = False,
                   vectorize: bool = False, strategy: str = "reverse-mode") -> Any:
    """d outputs / d inputs, one vjp per output element; entry shape = output.shape + input.shape.

    Reverse mode only, unvectorized (Note [No vmap, no forward mode]); ``strategy`` and
    ``vectorize`` are checked as torch checks them, and what would need forward AD or vmap is refused.
    """
    if strategy not in ("forward-mode", "reverse-mode"):
        raise AssertionError(
            'Expected strategy to be either "forward-mode" or "reverse-mode". Hint: If your '
            'function has more outputs than inputs, "forward-mode" tends to be more performant. '
            'Otherwise, prefer to use "reverse-mode".')
    if strategy == "forward-mode":
        _refuse_forward_mode(create_graph, strict, vectorize)
    is_tuple, inputs = _as_tuple(inputs, "inputs", "jacobian")
    inputs = _prepare(inputs, create_graph)
    out_tuple, outputs = _as_tuple(await _call(func, inputs), "outputs of the user-provided function", "jacobian")
    if strict:
        for i, out in enumerate(outputs):
            if not out.requires_grad:
                raise RuntimeError(f"Output {i} of the user-provided function does not require gradients. The outputs "
                                   "must be computed in a differentiable manner from the input when running in strict "
                                   "mode.")
    if vectorize:
        if strict:
            raise RuntimeError("torch.autograd.functional.jacobian: `strict=True` and `vectorized=True` are not "
                               "supported together. Please either set `strict=False` or `vectorize=False`.")
        raise NotImplementedError(_NO_VMAP)
    table = []
    for out in outputs:
        flat = out.reshape(-1)
        rows: list[list[Tensor]] = [[] for _ in inputs]
        for k in range(flat.numel()):
            row = await _grads((flat[k],), inputs, (factories.ones_like(flat[k]),), create_graph, strict,
                               "output") if out.requires_grad else tuple(factories.zeros_like(t) for t in inputs)
            for i, r in enumerate(row):
                rows[i].append(r)
        entries = []
        for inp, row in zip(inputs, rows):
            block = stack(row) if row else factories.zeros((0,) + inp.shape, dtype=inp.dtype, device=inp.device)
            entries.append(block.reshape(out.shape + inp.shape))
        table.append(tuple(_finish(tuple(entries), create_graph)))
    if not out_tuple:
        return table[0] if is_tuple else table[0][0]
    return tuple(row if is_tuple else row[0] for row in table)


async def hessian(func: Callable, inputs: Any, create_graph: bool = False, strict: bool = False,
                  vectorize: bool = False, outer_jacobian_strategy: str = "reverse-mode") -> Any:
    """The Jacobian of the gradient of a scalar function (reverse over reverse: Note [No vmap, no
    forward mode]; ``vectorize`` and ``outer_jacobian_strategy`` go to the outer ``jacobian``, as in torch)."""
    is_tuple, items = _as_tuple(inputs, "inputs", "hessian")
    if outer_jacobian_strategy not in ("forward-mode", "reverse-mode"):
        raise AssertionError('Expected strategy to be either "forward-mode" or "reverse-mode".')

    async def gradient(*args: Tensor) -> Any:
        out = await _call(func, args)
        _check_scalar(out, "hessian")
        grads = await _grads((out.reshape(()),), args, (factories.ones_like(out.reshape(())),), True, strict,
                             "output")
        return grads if is_tuple else grads[0]

    return await jacobian(gradient, items if is_tuple else items[0], create_graph=create_graph, strict=strict,
                          vectorize=vectorize, strategy=outer_jacobian_strategy)


# Note [No vmap, no forward mode]: torch's ``vectorize=True`` computes every row of a Jacobian in one
# backward by running each node's formula under vmap, on gradients with an extra batch dimension
# (``is_grads_batched``); ``strategy="forward-mode"`` pushes dual tensors forward. asyncgrad has
# neither: its backward formulas (ops/) take gradients of exactly their output's shape, and it has
# no dual tensors. Looping over rows is what ``vectorize=False`` already does, so calling that
# "vectorized" would only rename it: both are refused with an error that says why, after torch's own
# checks (its wording) for the combinations torch refuses too.
_NO_VMAP = ("jacobian(vectorize=True) needs vmap (batched backward formulas), which asyncgrad does not have; "
            "use vectorize=False, which computes the same Jacobian one vector-Jacobian product per output element")
_NO_FORWARD_AD = ('jacobian(strategy="forward-mode") needs forward-mode AD (dual tensors) and vmap, which asyncgrad '
                  'does not have; use strategy="reverse-mode"')


def _refuse_forward_mode(create_graph: bool, strict: bool, vectorize: bool) -> None:
    """torch's checks for ``strategy="forward-mode"``, in its order and words; what passes them
    would need forward AD (Note [No vmap, no forward mode])."""
    if create_graph:
        raise NotImplementedError(
            "torch.autograd.functional.jacobian: `create_graph=True` and `strategy=\"forward-mode\"` are not "
            "supported together (yet). Please either set `create_graph=False` or `strategy=\"reverse-mode\"`.")
    if strict:
        raise RuntimeError(
            "torch.autograd.functional.jacobian: `strict=True` and `strategy=\"forward-mode\"` are not supported "
            "together (yet). Please either set `strict=False` or `strategy=\"reverse-mode\"`.")
    if not vectorize:
        raise NotImplementedError(  # torch's two literals, without a space between them
            "Computing Jacobian using forward-AD or forward-over-reverse Hessian is"
            "only implemented for `vectorize=True`.")
    raise NotImplementedError(_NO_FORWARD_AD)


async def vhp(func: Callable, inputs: Any, v: Any = None, create_graph: bool = False,
              strict: bool = False) -> tuple[Any, Any]:
    """(func(inputs), v^T H): a vjp of the gradient."""
    is_tuple, inputs, vs, out, grads = await _recorded_gradient(func, inputs, v, create_graph, strict, "vhp")
    pairs = [(g, w, t) for g, w, t in zip(grads, vs, inputs) if g.requires_grad]
    result = await _grads(tuple(g for g, _, _ in pairs), inputs, tuple(w for _, w, _ in pairs), create_graph,
                          strict, "jacobian") if pairs else tuple(factories.zeros_like(t) for t in inputs)
    (out,), result = _finish((out,), create_graph), _finish(result, create_graph)
    return out, (result if is_tuple else result[0])


async def hvp(func: Callable, inputs: Any, v: Any = None, create_graph: bool = False,
              strict: bool = False) -> tuple[Any, Any]:
    """(func(inputs), H v), by the double-backward trick on the gradient."""
    is_tuple, inputs, vs, out, grads = await _recorded_gradient(func, inputs, v, create_graph, strict, "hvp")
    cotangents = tuple(factories.zeros_like(t).requires_grad_(True) for t in inputs)
    pairs = [(g, c) for g, c in zip(grads, cotangents) if g.requires_grad]
    if pairs:
        double = await _grads(tuple(g for g, _ in pairs), inputs, tuple(c for _, c in pairs), True, strict,
                              "jacobian")
        live = [(d, w) for d, w in zip(double, vs) if d.requires_grad]
        result = await grad([d for d, _ in live], cotangents, [w for _, w in live], create_graph=create_graph,
                            retain_graph=True, allow_unused=True) if live else (None,) * len(inputs)
    else:
        result = (None,) * len(inputs)
    result = tuple(factories.zeros_like(t) if r is None else r for t, r in zip(inputs, result))
    (out,), result = _finish((out,), create_graph), _finish(result, create_graph)
    return out, (result if is_tuple else result[0])


async def _recorded_gradient(func: Callable, inputs: Any, v: Any, create_graph: bool, strict: bool,
                             fn_name: str) -> tuple:
    """What vhp and hvp start from: the inputs, the vectors, func's scalar output and its
    gradient recorded (create_graph) so it can be differentiated again."""
    is_tuple, inputs = _as_tuple(inputs, "inputs", fn_name)
    inputs = _prepare(inputs, create_graph)
    vs = _vector(v, inputs, fn_name, is_tuple)
    out = await _call(func, inputs)
    _check_scalar(out, fn_name)
    grads = await _grads((out,), inputs, (factories.ones_like(out),), True, strict, "output")
    return is_tuple, inputs, vs, out, grads


def _vector(v: Any, inputs: tuple, fn_name: str, is_tuple: bool) -> tuple:
    if v is None:
        if len(inputs) != 1 or inputs[0].numel() != 1:
            raise RuntimeError("The vector v can only be None if the input to the user-provided function is a single "
                               "Tensor with a single element.")
        return (factories.ones_like(inputs[0]),)
    return _check_v(v, inputs, "v", fn_name, is_tuple)


def _check_scalar(out: Any, fn_name: str) -> None:
    if not isinstance(out, Tensor):
        raise TypeError(f"The outputs of the user-provided function given to {fn_name} must be either a Tensor or a "
                        f"tuple of Tensors but the given outputs of the user-provided function has type "
                        f"{type(out)}.")
    if out.numel() != 1:
        raise RuntimeError(f"The Tensor returned by the function given to {fn_name} should contain a single element")
