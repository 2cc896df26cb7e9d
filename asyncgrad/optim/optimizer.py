"""Optimizer: parameter groups, per-parameter state and zero_grad, as in torch.optim."""

from __future__ import annotations

import copy
import functools
import inspect
from typing import Any, Awaitable, Callable, Iterable, Iterator

from asyncgrad.graph import awaitable
from asyncgrad.graph.grad_mode import enable_grad
from asyncgrad.nn.parameter import zero_grads
from asyncgrad.tensor import Tensor, type_name

ParamsT = Iterable[Tensor] | Iterable[dict[str, Any]]


class Optimizer:
    """Subclasses implement ``step()``; a group's own settings override ``defaults``.

    ``state`` is keyed by the parameter itself, as in torch, so ``opt.state[p]`` works.
    ``step(closure)`` re-evaluates the loss first (Note [step(closure)]).
    ``step()`` and ``zero_grad()`` refuse to run while a ``backward()`` called without ``await``
    is pending, with a message that says so (Note [Await or not] in graph/awaitable.py).
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "step" in cls.__dict__:
            cls.step = _checked_step(cls.__dict__["step"])

    def __init__(self, params: ParamsT, defaults: dict[str, Any]) -> None:
        if isinstance(params, Tensor):
            raise TypeError(
                "params argument given to the optimizer should be an iterable of Tensors or dicts, but got "
                + type_name(params.dtype)
            )
        self.defaults = defaults
        self.state: dict[Tensor, dict[str, Any]] = {}
        self.param_groups: list[dict[str, Any]] = []
        groups = list(params)
        if not groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for group in groups:
            self.add_param_group(group)

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group).__name__}")
        if "params" not in param_group:
            raise ValueError("parameter group didn't specify a value of required optimization parameter params")
        params = param_group["params"]
        params = [params] if isinstance(params, Tensor) else list(params)
        for param in params:
            if not isinstance(param, Tensor):
                raise TypeError("optimizer can only optimize Tensors, but one of the params is " + type(param).__name__)
            if not param.is_leaf:
                raise ValueError("can't optimize a non-leaf Tensor")
        taken = {id(p) for group in self.param_groups for p in group["params"]}
        if any(id(p) in taken for p in params):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append({**self.defaults, **param_group, "params": params})

    def _grads(self, group: dict[str, Any]) -> Iterator[tuple[Tensor, Tensor]]:
        """The parameters of ``group`` that have a gradient, each with it: negated under
        ``maximize`` (torch ascends by descending on the negated gradient)."""
        maximize = group["maximize"]
        for param in group["params"]:
            grad = param.grad
            if grad is not None:
                yield param, (-grad if maximize else grad)

    def zero_grad(self, set_to_none: bool = True) -> None:
        if _pending:
            awaitable.check("optimizer.zero_grad()")
        zero_grads((p for group in self.param_groups for p in group["params"]), set_to_none)

    def step(self) -> None:
        """One update of every parameter that has a ``.grad``. Subclasses write ``step(self)``;
        callers may pass torch's ``closure`` (Note [step(closure)]): ``loss = opt.step(closure)``
        for a ``def`` closure, ``loss = await opt.step(closure)`` for an ``async def`` one."""
        raise NotImplementedError

    def state_dict(self) -> dict[str, Any]:
        """torch's layout: ``{"state": {index: {...}}, "param_groups": [{..., "params": [index, ...]}]}``,
        parameters numbered in group order, so a state dict saved from one model loads into
        another built the same way. The state's tensors are the optimizer's own, as in torch."""
        index: dict[int, int] = {}
        groups = []
        for group in self.param_groups:
            for param in group["params"]:
                index.setdefault(id(param), len(index))
            groups.append({**{k: v for k, v in group.items() if k != "params"},
                           "params": [index[id(p)] for p in group["params"]]})
        state = {index[id(p)]: value for p, value in self.state.items() if id(p) in index}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Take over the settings and state of ``state_dict`` (from :meth:`state_dict`, possibly
        through ``ag.save``/``ag.load``). State tensors are copied to each parameter's device
        (and dtype, for floating parameters; ``step`` is left alone), as torch does; unlike torch
        they are always copies, so two optimizers loaded from one dict never share buffers."""
        saved_groups = copy.deepcopy(state_dict["param_groups"])
        if len(self.param_groups) != len(saved_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        if any(len(g["params"]) != len(s["params"]) for g, s in zip(self.param_groups, saved_groups)):
            raise ValueError("loaded state dict contains a parameter group that doesn't match the size of "
                             "optimizer's group")
        params = {i: p for s, g in zip(saved_groups, self.param_groups) for i, p in zip(s["params"], g["params"])}
        self.state = {params[k]: _cast_state(params[k], v) for k, v in state_dict["state"].items() if k in params}
        self.param_groups = [{**s, "params": g["params"]} for s, g in zip(saved_groups, self.param_groups)]

    def __repr__(self) -> str:
        lines = [type(self).__name__ + " ("]
        for index, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {index}")
            lines.extend(f"    {key}: {group[key]}" for key in sorted(group) if key != "params")
        return "\n".join(lines) + "\n)"


_pending = awaitable.pending


def _cast_state(param: Tensor, value: Any, key: Any = None) -> Any:
    """A copy of one parameter's state, its tensors moved to the parameter's device and dtype."""
    if isinstance(value, Tensor):
        if key == "step" or not param.is_floating_point():
            return value.to(param.device).clone()
        return value.to(param.device, param.dtype).clone()
    if isinstance(value, dict):
        return {k: _cast_state(param, v, k) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_cast_state(param, v) for v in value)
    return value


def _checked_step(step: Callable) -> Callable:
    """``step`` of a subclass, refusing to use gradients that an un-awaited backward has not
    produced, and taking torch's ``closure`` (Note [step(closure)]) when ``step`` itself does not."""
    if getattr(step, "_checks_unawaited", False):
        return step
    takes_closure = "closure" in inspect.signature(step).parameters

    @functools.wraps(step)
    def checked(self: Optimizer, *args: Any, **kwargs: Any) -> Any:
        if takes_closure:
            if _pending:
                awaitable.check("optimizer.step()")
            return step(self, *args, **kwargs)
        if not args and not kwargs:  # a training loop's ``step()``: no closure to look for
            if _pending:
                awaitable.check("optimizer.step()")
            step(self)
            return None
        closure = _closure_arg(type(self).__name__, args, kwargs)
        if closure is None:
            _update(step, self)
            return None
        with enable_grad():
            loss = closure()
        if inspect.isawaitable(loss):
            return _after_async_closure(step, self, loss)
        _update(step, self)
        return loss

    checked._checks_unawaited = True
    if not takes_closure:  # help() and IDEs show the closure the wrapper takes
        signature = inspect.signature(step)
        closure_param = inspect.Parameter("closure", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None)
        checked.__signature__ = signature.replace(parameters=[*signature.parameters.values(), closure_param],
                                                  return_annotation=Any)
    return checked


# Note [step(closure)]: torch's ``step(closure)`` calls the closure in grad mode (it zeroes the
# grads, runs the forward and the backward, returns the loss), then updates, and returns the
# loss. Here a backward is awaited, so a closure is usually ``async def``: ``step`` then returns
# a coroutine that awaits the closure, updates and gives its loss (``loss = await
# opt.step(closure)``; the update happens only once it is awaited). A plain ``def`` closure
# (using ``backward_sync``) runs at once and ``step(closure)`` returns its loss, and ``step()``
# with no closure stays a plain synchronous call returning None, as in torch. The check for an
# un-awaited backward runs just before the update, after the closure, since the closure is
# where the backward is started. A subclass whose ``step`` names a ``closure`` parameter
# (LBFGS) handles the closure itself.
def _closure_arg(name: str, args: tuple, kwargs: dict) -> Any:
    if len(args) + len(kwargs) > 1 or (kwargs and "closure" not in kwargs):
        extra = next(iter(k for k in kwargs if k != "closure"), None)
        if extra is not None:
            raise TypeError(f"{name}.step() got an unexpected keyword argument '{extra}'")
        raise TypeError(f"{name}.step() takes from 1 to 2 positional arguments but {len(args) + 1} were given")
    closure = args[0] if args else kwargs.get("closure")
    if closure is not None and not callable(closure):
        raise TypeError(f"'{type(closure).__name__}' object is not callable")
    return closure


def _update(step: Callable, opt: Optimizer) -> None:
    if _pending:
        awaitable.check("optimizer.step()")
    step(opt)


async def _after_async_closure(step: Callable, opt: Optimizer, pending_loss: Awaitable) -> Any:
    with enable_grad():
        loss = await pending_loss
    _update(step, opt)
    return loss
