"""Devices: where arrays live, which array module computes on them, and how kernels run.

A device is interned (``device("sim:0") is device("sim:0")``) so the engine can key its
workers by identity. ``cpu`` computes with numpy, ``sim:N`` is a simulated accelerator in
host memory (numpy too, but its own identity, queue, worker and executor), and ``cuda:N``
computes with CuPy.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

_DEFAULT_INLINE_THRESHOLD = 200_000
"""Kernels estimated below this many element-operations run inline on the event loop.

Measured on the 2-core reference machine (``benchmarks``): a round trip to a worker thread
costs 50-200 us of wake-ups, about what numpy spends on 2e5 element-operations. Above that,
threads win: independent branches overlap (W4), the loop stays responsive (W7, worst
heartbeat 3.3 ms at 2e5 against 4.7 ms at 1e6), and large temporaries come from a thread's
malloc arena instead of the main one, which glibc trims after every free (W3's matmul
backwards: 1.4 ms in threads against 2.5 ms inline).
"""


class Device:
    __slots__ = ("type", "index", "xp", "inline_threshold", "num_workers", "_name")

    def __init__(self, type: str, index: int | None, xp: Any) -> None:
        self.type = type
        self.index = index
        self.xp = xp
        self.inline_threshold = _DEFAULT_INLINE_THRESHOLD
        self.num_workers = max(1, os.cpu_count() or 1)
        self._name = type if index is None else f"{type}:{index}"

    def __repr__(self) -> str:
        return f"device(type='{self.type}'" + ("" if self.index is None else f", index={self.index}") + ")"

    def __str__(self) -> str:
        return self._name

    def __reduce__(self):
        return (device, (self._name,))

    @property
    def is_cpu(self) -> bool:
        return self.type == "cpu"

    def asarray(self, array: Any, dtype: np.dtype | None = None, copy: bool | None = None) -> Any:
        """Bring ``array`` (from any device) onto this device."""
        if self.type == "cuda":
            with self.xp.cuda.Device(self.index):
                return self.xp.array(array, dtype=dtype, copy=True if copy is None else copy)
        if not isinstance(array, np.ndarray) and hasattr(array, "get"):
            array = array.get()
        return np.array(array, dtype=dtype, copy=copy)

    def to_host(self, array: Any) -> np.ndarray:
        return array.get() if self.type == "cuda" else array


_DEVICES: dict[str, Device] = {}


def _load_cupy():
    try:
        import cupy
    except ImportError as exc:  # pragma: no cover - depends on the machine
        raise RuntimeError(
            "cuda devices need CuPy: install asyncgrad with the 'cuda' extra (pip install 'asyncgrad[cuda]')"
        ) from exc
    return cupy


def device(spec: str | Device | None = None) -> Device:
    """``ag.device("cpu")``, ``ag.device("sim:1")``, ``ag.device("cuda:0")``; a Device is returned as is."""
    if isinstance(spec, Device):
        return spec
    if spec is None:
        spec = "cpu"
    if not isinstance(spec, str):
        raise TypeError(f"device() expects a string like 'cpu', 'sim:0' or 'cuda:0', got {type(spec).__name__}")
    found = _DEVICES.get(spec)
    if found is not None:
        return found
    kind, colon, index_text = spec.partition(":")
    if colon and not index_text:
        raise RuntimeError(f"Invalid device string: '{spec}'")
    if kind == "cpu" and index_text in ("", "0"):
        dev = _DEVICES.get("cpu") or Device("cpu", None, np)
    elif kind in ("sim", "cuda"):
        if index_text == "":
            index_text = "0"
        if not index_text.isdigit():
            raise RuntimeError(f"Invalid device string: '{spec}'")
        index = int(index_text)
        name = f"{kind}:{index}"
        dev = _DEVICES.get(name)
        if dev is None:
            dev = Device(kind, index, _load_cupy() if kind == "cuda" else np)
            _DEVICES[name] = dev
    else:
        raise RuntimeError(
            f"Expected one of cpu, sim, cuda device type at start of device string: {spec}"
        )
    _DEVICES[spec] = dev
    _DEVICES[str(dev)] = dev
    return dev


cpu = device("cpu")


def _count(value: Any, fn: str, name: str) -> None:
    """An int setting (numpy ints pass; bools, floats and strings do not), named in the error."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{fn}(): argument '{name}' must be int, not {type(value).__name__}")


def set_num_workers(dev: str | Device, n: int) -> None:
    """How many independent large kernels a device worker keeps in flight at once."""
    _count(n, "set_num_workers", "num_workers")
    if n < 1:
        raise ValueError(f"num_workers must be at least 1, got {n}")
    device(dev).num_workers = int(n)


def set_inline_threshold(dev: str | Device, element_ops: int) -> None:
    """Kernels estimated at fewer element-operations than this run inline on the loop."""
    _count(element_ops, "set_inline_threshold", "threshold")
    if element_ops < 0:
        raise ValueError(f"the inline threshold must be at least 0, got {element_ops}")
    device(dev).inline_threshold = int(element_ops)
