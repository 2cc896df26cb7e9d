"""Devices: where arrays live, which array backend computes on them, and how kernels run.

A device is interned (``device("sim:0") is device("sim:0")``) so the engine can key its
workers by identity. ``cpu`` computes with numpy, ``sim:N`` is a simulated accelerator in
host memory with its own queue, worker and executor, computing with ``array_api_strict`` so
that what would break on a GPU breaks there too, and ``cuda:N`` computes with CuPy (Note [One
array backend per device] in ``backend.py``).
"""

from __future__ import annotations

import os
import sys
from typing import Any

import numpy as np

from asyncgrad.devices.backend import NUMPY, ArrayBackend, CupyBackend, StrictBackend

_DEFAULT_INLINE_THRESHOLD = 200_000
"""Kernels estimated below this many element-operations run inline on the event loop.

Measured on the 2-core reference machine (``benchmarks``): a round trip to a worker thread
costs 50-200 us of wake-ups, about what numpy spends on 2e5 element-operations. Above that,
threads win: independent branches overlap (W4), the loop stays responsive (W7, worst
heartbeat 3.3 ms at 2e5 against 4.7 ms at 1e6), and large temporaries come from a thread's
malloc arena instead of the main one, which glibc trims after every free (W3's matmul
backwards: 1.4 ms in threads against 2.5 ms inline).
"""

_ASYNC_LAUNCH_INLINE_THRESHOLD = sys.maxsize
"""cuda:N runs every kernel inline on the loop by default: a CuPy call queues the kernel on the
stream and returns, so the loop is held for the launch alone whatever the kernel's size, while a
kernel thread adds its round trip to every node and orders nothing the stream does not already
order (``python -m benchmarks.cuda --inline-threshold N`` compares; benchmarks/HISTORY.md). A
formula that waits for the GPU (a host read) still holds the loop while it waits, as torch's
device thread is held; ``ag.set_inline_threshold("cuda:0", n)`` sends large kernels to threads."""


class Device:
    """A device: ``cpu`` (numpy), ``sim:N`` (a simulated accelerator on ``array_api_strict``) or
    ``cuda:N`` (CuPy), with its array backend and its engine settings.

    Made by ``ag.device("sim:0")``; ``str(device)`` is its name. ``type`` and
    ``index`` are torch's; ``xp`` is the device's Array API namespace."""

    __slots__ = ("type", "index", "backend", "xp", "inline_threshold", "num_workers", "_name")

    def __init__(self, type: str, index: int | None, backend: ArrayBackend) -> None:
        self.type = type
        self.index = index
        self.backend = backend
        self.xp = backend.xp
        """The device's Array API namespace (``backend.xp``), read on every op."""
        self.inline_threshold = _ASYNC_LAUNCH_INLINE_THRESHOLD if type == "cuda" else _DEFAULT_INLINE_THRESHOLD
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
        """Bring ``array`` (host data, or an array of any device) onto this device: an explicit transfer."""
        # Another device's array leaves it through its own backend's to_host (CuPy refuses an implicit
        # conversion; array_api_strict arrays carry their device): never through this backend's from_host.
        if not isinstance(array, _HOST_VALUES) and not self.backend.is_array(array):
            array = _host_of(array)
        return self.backend.from_host(array, dtype, copy)

    def to_host(self, array: Any) -> np.ndarray:
        """This device's array as a numpy array (a copy unless the device is the host)."""
        return self.backend.to_host(array)


_HOST_VALUES = (np.ndarray, np.generic, int, float, bool, complex, list, tuple)
"""What ``asarray`` takes as host data as it is; anything else may be another device's array."""


def _host_of(array: Any) -> np.ndarray:
    """An array of another device's backend, copied to the host (a device-to-device transfer)."""
    for dev in _DEVICES.values():
        if dev.backend.is_array(array):
            return dev.backend.to_host(array)
    return np.asarray(array)


_DEVICES: dict[str, Device] = {}

_STRICT_DEVICES = ("device1", "device2")
"""array_api_strict's simulated devices: sim:N takes one by parity, so arrays of sim:0 and sim:1
never mix without a transfer (asyncgrad's own device check catches sim:0 with sim:2)."""


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
        dev = _DEVICES.get("cpu") or Device("cpu", None, NUMPY)
    elif kind in ("sim", "cuda"):
        if index_text == "":
            index_text = "0"
        if not index_text.isdigit():
            raise RuntimeError(f"Invalid device string: '{spec}'")
        index = int(index_text)
        name = f"{kind}:{index}"
        dev = _DEVICES.get(name)
        if dev is None:
            backend = CupyBackend(index) if kind == "cuda" else StrictBackend(_STRICT_DEVICES[index % 2])
            dev = Device(kind, index, backend)
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
