"""Module: a tree of layers whose Parameters are found by walking its attributes.

Registration is implicit: any attribute holding a ``Parameter`` or a ``Module``, or a list
or tuple of them, belongs to the module, in assignment order. Sequential names its
children ``"0"``, ``"1"``, ... through ``setattr``, so state_dict keys match torch's.
"""

from __future__ import annotations

import warnings
from collections import OrderedDict
from typing import Any, Callable, Iterator, Mapping, NamedTuple

import numpy as np

from asyncgrad.devices import Device
from asyncgrad.devices import device as as_device
from asyncgrad.dtypes import float32, float64
from asyncgrad.factories import tensor as as_tensor
from asyncgrad.graph.grad_mode import no_grad
from asyncgrad.graph.node import RemovableHandle
from asyncgrad.nn.backward_hooks import BackwardHook
from asyncgrad.nn.parameter import Parameter, zero_grads
from asyncgrad.ops.shape import to_args
from asyncgrad.tensor import Tensor


class IncompatibleKeys(NamedTuple):
    missing_keys: list[str]
    unexpected_keys: list[str]


class Module:
    """Base of every layer: override ``forward``; call the module to run it."""

    def __init__(self) -> None:
        self.training = True

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required "forward" function')

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """``forward``, between the forward pre-hooks and the forward hooks when there are any, its
        Tensors wrapped for the full backward hooks when there are any (Note [Full backward hooks]
        in nn/backward_hooks.py)."""
        hooks = self.__dict__.get("_hooks")
        if not hooks:
            return self.forward(*args, **kwargs)
        for hook in list(hooks.pre.values()):
            changed = hook(self, args)
            if changed is not None:
                args = changed if isinstance(changed, tuple) else (changed,)
        bw_hook = None
        if hooks.backward or hooks.backward_pre:
            bw_hook = BackwardHook(self, list(hooks.backward.values()), list(hooks.backward_pre.values()))
            args = bw_hook.setup_input_hook(args)
        output = self.forward(*args, **kwargs)
        for hook in list(hooks.post.values()):
            changed = hook(self, args, output)
            if changed is not None:
                output = changed
        if bw_hook is not None:
            if not isinstance(output, (Tensor, tuple)):
                warnings.warn("For backward hooks to be called, module output should be a Tensor or a tuple of "
                              f"Tensors but received {type(output)}", stacklevel=2)
            output = bw_hook.setup_output_hook(output)
        return output

    # ------------------------------------------------------------------ the tree
    def _members(self) -> Iterator[tuple[str, Any]]:
        """Direct Parameters and Modules, lists and tuples flattened to ``name.index``."""
        for name, value in vars(self).items():
            if isinstance(value, (Parameter, Module)):
                yield name, value
            elif isinstance(value, (list, tuple)):
                for index, item in enumerate(value):
                    if isinstance(item, (Parameter, Module)):
                        yield f"{name}.{index}", item

    def named_children(self) -> Iterator[tuple[str, Module]]:
        seen: set[int] = set()
        for name, member in self._members():
            if isinstance(member, Module) and id(member) not in seen:
                seen.add(id(member))
                yield name, member

    def children(self) -> Iterator[Module]:
        for _, child in self.named_children():
            yield child

    def named_modules(self, prefix: str = "", remove_duplicate: bool = True) -> Iterator[tuple[str, Module]]:
        """Pre-order, a shared module once under its first name unless ``remove_duplicate=False``.

        An explicit stack instead of recursion, so nesting depth is not bounded by Python's.
        """
        seen: set[int] = set()
        stack: list[tuple[str, Module]] = [(prefix, self)]
        while stack:
            name, module = stack.pop()
            if remove_duplicate:
                if id(module) in seen:
                    continue
                seen.add(id(module))
            yield name, module
            children = [(f"{name}.{child_name}" if name else child_name, child)
                        for child_name, child in module._members() if isinstance(child, Module)]
            stack.extend(reversed(children))

    def modules(self) -> Iterator[Module]:
        for _, module in self.named_modules():
            yield module

    def named_parameters(self, prefix: str = "", recurse: bool = True,
                         remove_duplicate: bool = True) -> Iterator[tuple[str, Parameter]]:
        """Each Parameter once, even when shared (weight tying), unless ``remove_duplicate=False``."""
        modules = self.named_modules(prefix, remove_duplicate) if recurse else iter([(prefix, self)])
        seen: set[int] = set()
        for module_name, module in modules:
            for name, member in module._members():
                if not isinstance(member, Parameter) or id(member) in seen:
                    continue
                if remove_duplicate:
                    seen.add(id(member))
                yield (f"{module_name}.{name}" if module_name else name), member

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        for _, param in self.named_parameters(recurse=recurse):
            yield param

    # ------------------------------------------------------------------ buffers
    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        """A tensor the module keeps but does not train (BatchNorm's running statistics).

        Note [Buffers are attributes]: a buffer is a plain attribute whose name the module lists in
        ``_buffer_names`` (name -> persistent), so ``self.running_mean`` reads it and assigning
        rebinds it, as in torch. ``named_buffers`` walks those names; ``state_dict`` holds the
        persistent ones after the module's parameters, as torch orders them.
        """
        if not isinstance(name, str):
            raise TypeError(f"buffer name should be a string. Got {type(name).__name__}")
        if "." in name:
            raise KeyError('buffer name can\'t contain "."')
        if name == "":
            raise KeyError('buffer name can\'t be empty string ""')
        names = self.__dict__.setdefault("_buffer_names", {})
        if hasattr(self, name) and name not in names:
            raise KeyError(f"attribute '{name}' already exists")
        if tensor is not None and not isinstance(tensor, Tensor):
            kind = type(tensor)
            label = kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"
            raise TypeError(f"cannot assign '{label}' object to buffer "
                            f"'{name}' (torch Tensor or None required)")
        names[name] = persistent
        setattr(self, name, tensor)

    def _own_buffers(self, persistent_only: bool = False) -> Iterator[tuple[str, Tensor]]:
        """This module's buffers that hold a tensor, in registration order (Note [Buffers are attributes])."""
        state = vars(self)
        for name, persistent in state.get("_buffer_names", {}).items():
            value = state.get(name)
            if isinstance(value, Tensor) and (persistent or not persistent_only):
                yield name, value

    def named_buffers(self, prefix: str = "", recurse: bool = True,
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Tensor]]:
        modules = self.named_modules(prefix, remove_duplicate) if recurse else iter([(prefix, self)])
        seen: set[int] = set()
        for module_name, module in modules:
            for name, buf in module._own_buffers():
                if id(buf) in seen:
                    continue
                if remove_duplicate:
                    seen.add(id(buf))
                yield (f"{module_name}.{name}" if module_name else name), buf

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        for _, buf in self.named_buffers(recurse=recurse):
            yield buf

    def _state_entries(self) -> Iterator[tuple[str, Tensor]]:
        """Every module's parameters, then its persistent buffers, pre-order: torch's state_dict order."""
        for module_name, module in self.named_modules(remove_duplicate=False):
            prefix = f"{module_name}." if module_name else ""
            for name, member in module._members():
                if isinstance(member, Parameter):
                    yield prefix + name, member
            for name, buf in module._own_buffers(persistent_only=True):
                yield prefix + name, buf

    # ------------------------------------------------------------------ training state
    def zero_grad(self, set_to_none: bool = True) -> None:
        zero_grads(self.parameters(), set_to_none)

    def train(self, mode: bool = True) -> Module:
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        for module in self.modules():
            module.training = mode
        return self

    def eval(self) -> Module:
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> Module:
        for param in self.parameters():
            param.requires_grad_(requires_grad)
        return self

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> OrderedDict[str, Tensor]:
        """Detached tensors sharing memory with the parameters and persistent buffers, keyed like torch's
        (shared ones under each name)."""
        return OrderedDict((name, value.detach()) for name, value in self._state_entries())

    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True) -> IncompatibleKeys:
        """Copy values into the existing parameters in place, so optimizers holding them stay valid."""
        if not isinstance(state_dict, Mapping):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        params = dict(self._state_entries())
        missing = [name for name in params if name not in state_dict]
        unexpected = [name for name in state_dict if name not in params]
        errors = []
        if strict:
            if unexpected:
                errors.append("Unexpected key(s) in state_dict: " + ", ".join(f'"{k}"' for k in unexpected) + ". ")
            if missing:
                errors.append("Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in missing) + ". ")
        values = {}
        for name, param in params.items():
            if name not in state_dict:
                continue
            value = state_dict[name]
            if not isinstance(value, Tensor):
                try:
                    value = as_tensor(value)
                except (TypeError, ValueError, RuntimeError):
                    errors.append(f'While copying the parameter named "{name}", expected asyncgrad.Tensor or '
                                  f"Tensor-like object from checkpoint but received {type(value)}")
                    continue
            if value.shape != param.shape:
                errors.append(
                    f"size mismatch for {name}: copying a param with shape {_size(value.shape)} from checkpoint, "
                    f"the shape in current model is {_size(param.shape)}."
                )
            values[name] = value
        if errors:
            raise RuntimeError(f"Error(s) in loading state_dict for {type(self).__name__}:\n\t" + "\n\t".join(errors))
        with no_grad():
            for name, value in values.items():
                params[name].copy_(value)
        return IncompatibleKeys(missing, unexpected)

    # ------------------------------------------------------------------ hooks, apply, conversions
    def _hook_table(self) -> _Hooks:
        hooks = self.__dict__.get("_hooks")
        if hooks is None:
            hooks = self.__dict__["_hooks"] = _Hooks()
        return hooks

    def register_forward_pre_hook(self, hook: Callable[..., Any], *, prepend: bool = False) -> RemovableHandle:
        """``hook(module, args)`` before each forward; a non-None result replaces the positional
        arguments (a non-tuple is wrapped in one), as in torch."""
        return self._add_hook(self._hook_table().pre, hook, prepend)

    def register_forward_hook(self, hook: Callable[..., Any], *, prepend: bool = False) -> RemovableHandle:
        """``hook(module, args, output)`` after each forward; a non-None result replaces the output."""
        return self._add_hook(self._hook_table().post, hook, prepend)

    def register_full_backward_hook(self, hook: Callable[..., Any], prepend: bool = False) -> RemovableHandle:
        """``hook(module, grad_input, grad_output)`` once the gradients of the module's inputs are
        computed in a backward; a non-None result replaces ``grad_input`` (Note [Full backward hooks]
        in nn/backward_hooks.py). Non-Tensor arguments and outputs show as None."""
        return self._add_hook(self._hook_table().backward, hook, prepend)

    def register_full_backward_pre_hook(self, hook: Callable[..., Any], prepend: bool = False) -> RemovableHandle:
        """``hook(module, grad_output)`` once the gradients of the module's outputs are computed in a
        backward, before the module's own backward; a non-None result replaces ``grad_output``."""
        return self._add_hook(self._hook_table().backward_pre, hook, prepend)

    @staticmethod
    def _add_hook(table: dict, hook: Callable[..., Any], prepend: bool) -> RemovableHandle:
        if not callable(hook):
            raise TypeError(f"hook must be callable, got {type(hook).__name__}")
        handle = RemovableHandle(table)
        table[handle.id] = hook
        if prepend:
            for key in [key for key in table if key != handle.id]:
                table[key] = table.pop(key)
        return handle

    def apply(self, fn: Callable[[Module], Any]) -> Module:
        """``fn`` on every submodule, children first, then on this module (torch's order)."""
        for child in self.children():
            child.apply(fn)
        fn(self)
        return self

    def to(self, *args: Any, **kwargs: Any) -> Module:
        """``to(device)``, ``to(dtype)`` (floating parameters only, as torch), ``to(device, dtype)``
        or ``to(tensor)``: every parameter (and its grad) and every buffer converted in place, so
        the module keeps its Parameter objects (an optimizer built before holds the same ones); an
        integer buffer (``num_batches_tracked``) moves but keeps its dtype, as in torch."""
        dev, dtype = to_args(args, kwargs)
        if kwargs:
            raise TypeError(f"to() received an invalid combination of arguments: unexpected {sorted(kwargs)}")
        if dtype is not None:
            dtype = np.dtype(dtype)
            if dtype.kind != "f":
                raise TypeError(f"nn.Module.to only accepts floating point or complex dtypes, but got desired "
                                f"dtype={_dtype_name(dtype)}")
        target = as_device(dev) if dev is not None else None
        with no_grad():
            for param in [*self.parameters(), *self.buffers()]:
                _convert_in_place(param, target, dtype)
        return self

    def float(self) -> Module:
        return self.to(float32)

    def double(self) -> Module:
        return self.to(float64)

    def cpu(self) -> Module:
        return self.to("cpu")

    def cuda(self, device: int | None = None) -> Module:
        return self.to(f"cuda:{0 if device is None else device}")

    # ------------------------------------------------------------------ printing
    def extra_repr(self) -> str:
        """The layer's settings, shown by ``repr`` as torch shows them."""
        return ""

    def __repr__(self) -> str:
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = [f"({name}): " + "\n  ".join(repr(member).split("\n"))
                       for name, member in self._members() if isinstance(member, Module)]
        if len(extra_lines) == 1 and not child_lines:
            return f"{type(self).__name__}({extra_lines[0]})"
        lines = extra_lines + child_lines
        body = "\n  " + "\n  ".join(lines) + "\n" if lines else ""
        return f"{type(self).__name__}({body})"


class _Hooks:
    """A module's forward pre-hooks, forward hooks, full backward hooks and backward pre-hooks, each
    by its handle's id, in registration order."""

    __slots__ = ("pre", "post", "backward", "backward_pre")

    def __init__(self) -> None:
        self.pre: dict[int, Callable] = {}
        self.post: dict[int, Callable] = {}
        self.backward: dict[int, Callable] = {}
        self.backward_pre: dict[int, Callable] = {}

    def __bool__(self) -> bool:
        return bool(self.pre or self.post or self.backward or self.backward_pre)


def _dtype_name(dtype: np.dtype) -> str:
    return f"asyncgrad.{dtype.name}"


def _convert_in_place(param: Tensor, device: Device | None, dtype: np.dtype | None) -> None:
    """A parameter's data (and grad) moved and cast in place, keeping the Parameter object."""
    for t in (param, param.grad):
        if t is None:
            continue
        converted = t.to(dtype) if dtype is not None and t.dtype.kind == "f" else t
        converted = converted.to(device) if device is not None else converted
        if converted is not t:
            t.data = converted.data
            t.device = converted.device


def _size(shape: tuple[int, ...]) -> str:
    return f"asyncgrad.Size({list(shape)})"
