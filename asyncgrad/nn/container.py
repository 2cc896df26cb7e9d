"""Containers: ``Sequential`` (positional or from an OrderedDict), ``ModuleList``, ``ModuleDict``,
``ParameterList``.

Each keeps its entries as attributes named as torch names them (``"0"``, ``"1"``, ... or the
dict's keys), so Module's implicit registration (module.py)
finds them, in order, and ``state_dict`` keys are torch's (``layers.0.weight``).
"""

from __future__ import annotations

import operator
from collections import OrderedDict
from typing import Any, Iterable, Iterator, Mapping

from asyncgrad.nn.module import Module
from asyncgrad.nn.parameter import Parameter


class _Indexed(Module):
    """Entries under the attribute names ``"0"``, ``"1"``, ...: the list containers' storage."""

    _kind: type = Module

    def _entries(self) -> list[Any]:
        return [value for name, value in vars(self).items() if name.isdigit()]

    def _check(self, value: Any) -> None:
        if not isinstance(value, self._kind):
            raise TypeError(f"{type(value).__name__} is not a Module subclass" if self._kind is Module else  # torch's
                            f"{type(self).__name__}: expected a Parameter, got {type(value).__name__}")

    def _reset(self, values: list[Any]) -> None:
        for name in [name for name in vars(self) if name.isdigit()]:
            delattr(self, name)
        for index, value in enumerate(values):
            setattr(self, str(index), value)

    def _index(self, index: Any) -> int:
        i = operator.index(index)
        n = len(self)
        if not -n <= i < n:
            raise IndexError(f"index {i} is out of range")
        return i % n

    def __len__(self) -> int:
        return len(self._entries())

    def __iter__(self) -> Iterator[Any]:
        return iter(self._entries())

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return type(self)(self._entries()[index])
        return self._entries()[self._index(index)]

    def __setitem__(self, index: int, value: Any) -> None:
        self._check(value)
        setattr(self, str(self._index(index)), value)

    def __delitem__(self, index: Any) -> None:
        entries = self._entries()
        del entries[index if isinstance(index, slice) else self._index(index)]
        self._reset(entries)

    def append(self, value: Any) -> Any:
        self._check(value)
        setattr(self, str(len(self)), value)
        return self

    def extend(self, values: Iterable[Any]) -> Any:
        for value in values:
            self.append(value)
        return self

    def insert(self, index: int, value: Any) -> None:
        self._check(value)
        entries = self._entries()
        entries.insert(index, value)
        self._reset(entries)


class Sequential(_Indexed):
    """Runs its modules in order: ``Sequential(a, b)`` names them ``"0"``, ``"1"``;
    ``Sequential(OrderedDict(conv=a, act=b))`` by the dict's keys, as torch does."""

    def __init__(self, *modules: Any) -> None:
        super().__init__()
        if len(modules) == 1 and isinstance(modules[0], OrderedDict):
            for name, module in modules[0].items():
                self._check(module)
                setattr(self, name, module)
        else:
            for module in modules:
                self.append(module)

    def _entries(self) -> list[Module]:
        """Every entry in order, repeats included (``children()`` lists a shared module once)."""
        return [value for name, value in vars(self).items() if isinstance(value, Module)]

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            names = [name for name, value in vars(self).items() if isinstance(value, Module)][index]
            return Sequential(OrderedDict((name, getattr(self, name)) for name in names))
        return self._entries()[self._index(index)]

    def __setitem__(self, index: int, value: Any) -> None:
        self._check(value)
        names = [name for name, v in vars(self).items() if isinstance(v, Module)]
        setattr(self, names[self._index(index)], value)

    def forward(self, input: Any) -> Any:
        for module in self._entries():
            input = module(input)
        return input


class ModuleList(_Indexed):
    """A list of modules, registered (their parameters are the container's); no forward of its own."""

    def __init__(self, modules: Iterable[Module] | None = None) -> None:
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def __iadd__(self, modules: Iterable[Module]) -> ModuleList:
        return self.extend(modules)


class ParameterList(_Indexed):
    """A list of Parameters, registered under ``"0"``, ``"1"``, ... (a tensor is made a Parameter)."""

    _kind = Parameter

    def __init__(self, values: Iterable[Any] | None = None) -> None:
        super().__init__()
        if values is not None:
            self.extend(values)

    def _check(self, value: Any) -> None:
        if not isinstance(value, Parameter):
            raise TypeError(f"ParameterList: expected a Parameter or a Tensor, got {type(value).__name__}")

    def append(self, value: Any) -> ParameterList:
        from_tensor = not isinstance(value, Parameter) and hasattr(value, "requires_grad_")
        return super().append(Parameter(value) if from_tensor else value)

    def extra_repr(self) -> str:
        return "\n".join(f"({i}): Parameter containing: [{type(p).__name__} of size {'x'.join(map(str, p.shape))}]"
                         for i, p in enumerate(self))


class ModuleDict(Module):
    """A dict of modules, in insertion order, registered under their keys."""

    def __init__(self, modules: Mapping[str, Module] | Iterable[tuple[str, Module]] | None = None) -> None:
        super().__init__()
        if modules is not None:
            self.update(modules)

    def _names(self) -> list[str]:
        return [name for name, value in vars(self).items() if isinstance(value, Module)]

    def __getitem__(self, key: str) -> Module:
        if key not in self._names():
            raise KeyError(key)
        return getattr(self, key)

    def __setitem__(self, key: str, module: Module) -> None:
        if not isinstance(key, str):
            raise TypeError(f"module name should be a string. Got {type(key).__name__}")
        if not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        if key in vars(self) and not isinstance(vars(self)[key], Module) or hasattr(Module, key):
            raise KeyError(f"attribute '{key}' already exists")
        setattr(self, key, module)

    def __delitem__(self, key: str) -> None:
        self[key]  # KeyError for a missing one
        delattr(self, key)

    def __len__(self) -> int:
        return len(self._names())

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __contains__(self, key: object) -> bool:
        return key in self._names()

    def keys(self) -> list[str]:
        return self._names()

    def values(self) -> list[Module]:
        return [getattr(self, name) for name in self._names()]

    def items(self) -> list[tuple[str, Module]]:
        return [(name, getattr(self, name)) for name in self._names()]

    def pop(self, key: str) -> Module:
        module = self[key]
        delattr(self, key)
        return module

    def clear(self) -> None:
        for name in self._names():
            delattr(self, name)

    def update(self, modules: Mapping[str, Module] | Iterable[tuple[str, Module]]) -> None:
        pairs = modules.items() if isinstance(modules, Mapping) else modules
        for key, module in pairs:
            self[key] = module
