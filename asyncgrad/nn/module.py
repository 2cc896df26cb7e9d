"""Module: a tree of layers whose Parameters are found by walking its attributes.

Registration is implicit: any attribute holding a ``Parameter`` or a ``Module``, or a list
or tuple of them, belongs to the module, in assignment order. Sequential names its
children ``"0"``, ``"1"``, ... through ``setattr``, so state_dict keys match torch's.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Iterator, Mapping, NamedTuple

from asyncgrad.autograd.grad_mode import no_grad
from asyncgrad.factories import tensor as as_tensor
from asyncgrad.nn.parameter import Parameter, zero_grads
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
        return self.forward(*args, **kwargs)

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

    # ------------------------------------------------------------------ buffers (nn-model)
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
        """This module's buffers that hold a tensor, in registration order."""
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


def _size(shape: tuple[int, ...]) -> str:
    return f"asyncgrad.Size({list(shape)})"
