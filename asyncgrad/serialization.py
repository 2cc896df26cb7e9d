"""``ag.save`` / ``ag.load``: tensors and (nested) state dicts in a format that holds no code.

Design: docs/design/serialization.md.
"""

from __future__ import annotations

import io
import json
import os
import zipfile
from collections import OrderedDict
from typing import IO, Any

import numpy as np

from asyncgrad.devices import device as as_device
from asyncgrad.nn.parameter import Parameter
from asyncgrad.tensor import Tensor

# Note [What a save keeps]: values, dtype, device, ``requires_grad`` and whether a tensor was a
# ``Parameter``; the same tensor object saved twice (tied weights) comes back as one object.
# Views are saved as copies of what they show: memory shared between *different* tensors is
# not kept. ``OrderedDict`` stays ordered; other dict subclasses (``Counter``) load as ``dict``.


FORMAT = "asyncgrad"
VERSION = 1
_STRUCTURE = "asyncgrad/structure.json"
_DATA = "asyncgrad/data/{}.npy"

FileLike = str | os.PathLike | IO[bytes]


def save(obj: Any, f: FileLike) -> None:
    """Write ``obj`` (a tensor, number, string, None, or lists, tuples and dicts of them, to any
    depth) to a path or a binary file object. Anything else is refused with a ``TypeError``,
    before the file is touched."""
    if not isinstance(f, (str, os.PathLike)) and not hasattr(f, "write"):
        raise TypeError(f"save(): f must be a path or a binary file object opened for writing, not {type(f).__name__}")
    arrays: list[np.ndarray] = []
    ids: dict[int, int] = {}
    root = _encode(obj, arrays, ids, "obj")
    structure = json.dumps({"format": FORMAT, "version": VERSION, "root": root})
    with zipfile.ZipFile(f, "w", compression=zipfile.ZIP_STORED) as archive:
        archive.writestr(_STRUCTURE, structure)
        for index, array in enumerate(arrays):
            buffer = io.BytesIO()
            np.lib.format.write_array(buffer, array, allow_pickle=False)
            archive.writestr(_DATA.format(index), buffer.getvalue())


def load(f: FileLike, map_location: Any = None, weights_only: bool | None = None) -> Any:
    """Read what :func:`save` wrote. ``map_location`` (a device or its name) puts every tensor
    there instead of on the device it was saved from. ``weights_only`` is accepted for torch
    compatibility and changes nothing: the format holds data only. A file that is not an
    asyncgrad save (a torch checkpoint, a truncated or corrupt file) raises ``RuntimeError``
    saying so."""
    if not isinstance(f, (str, os.PathLike)) and not hasattr(f, "read"):
        raise TypeError(f"load(): f must be a path or a binary file object opened for reading, not {type(f).__name__}")
    name = os.fspath(f) if isinstance(f, (str, os.PathLike)) else getattr(f, "name", "the file")
    device = None if map_location is None else as_device(map_location)
    try:
        with zipfile.ZipFile(f, "r") as archive:
            try:
                header = json.loads(archive.read(_STRUCTURE))
            except KeyError:
                raise RuntimeError(_foreign(name, archive.namelist())) from None
            if not isinstance(header, dict) or header.get("format") != FORMAT:
                raise RuntimeError(f"{name} is not an asyncgrad save file (its structure names no asyncgrad format)")
            if header.get("version") != VERSION:
                raise RuntimeError(f"{name} was written by format version {header.get('version')}; this asyncgrad "
                                   f"reads version {VERSION}")
            return _decode(header["root"], archive, device, {})
    except zipfile.BadZipFile as exc:
        raise RuntimeError(f"{name} is not an asyncgrad save file, or it is corrupt: {exc}") from None
    except (ValueError, KeyError, TypeError, EOFError) as exc:
        raise RuntimeError(f"{name} is a damaged asyncgrad save file: {type(exc).__name__}: {exc}") from None


def _foreign(name: str, members: list[str]) -> str:
    if any(member.endswith("data.pkl") for member in members):
        return (f"{name} looks like a torch.save file. asyncgrad does not unpickle (unpickling can run code): "
                "load it with torch.load(..., weights_only=True), convert each tensor with ag.tensor(t.numpy()), "
                "and ag.save the result")
    return f"{name} is a zip archive but not an asyncgrad save file (no {_STRUCTURE})"


def _encode(obj: Any, arrays: list[np.ndarray], ids: dict[int, int], where: str) -> Any:
    """JSON for ``obj``: primitives as themselves, everything else as a one-key tagged object."""
    if isinstance(obj, (np.ndarray, np.generic)):  # first: np.float64 is a float subclass
        arrays.append(_host_array(np.asarray(obj), where))
        return {"ndarray": len(arrays) - 1, "scalar": isinstance(obj, np.generic)}
    if obj is None or isinstance(obj, (bool, int, str)):
        return obj
    if isinstance(obj, float):
        return {"float": repr(obj)} if not np.isfinite(obj) else obj
    if isinstance(obj, Tensor):
        if id(obj) not in ids:  # a tensor saved twice is one array (Note [What a save keeps])
            ids[id(obj)] = len(arrays)
            arrays.append(_host_array(obj.device.to_host(obj.data), where))  # an explicit copy off a device
        return {"tensor": ids[id(obj)], "device": str(obj.device), "requires_grad": obj.requires_grad,
                "parameter": isinstance(obj, Parameter)}
    if isinstance(obj, (list, tuple)):
        items = [_encode(item, arrays, ids, f"{where}[{i}]") for i, item in enumerate(obj)]
        return items if isinstance(obj, list) else {"tuple": items}
    if isinstance(obj, dict):
        pairs = []
        for key, value in obj.items():
            if not (key is None or isinstance(key, (bool, int, float, str))):
                raise TypeError(f"ag.save: the key {key!r} in {where} is a {type(key).__name__}; dict keys must be "
                                "strings, numbers, booleans or None")
            pairs.append([_encode(key, arrays, ids, where), _encode(value, arrays, ids, f"{where}[{key!r}]")])
        return {"ordered_dict" if isinstance(obj, OrderedDict) else "dict": pairs}
    raise TypeError(f"ag.save cannot store {where}, a {type(obj).__name__}: only tensors, numpy arrays, numbers, "
                    "strings, None, and lists, tuples and dicts of them (a format without pickle holds no objects)")


def _host_array(array: np.ndarray, where: str) -> np.ndarray:
    if array.dtype.hasobject or array.dtype.kind in "cVUSM":
        raise TypeError(f"ag.save cannot store {where}: arrays of dtype {array.dtype} are not supported")
    return array


def _decode(node: Any, archive: zipfile.ZipFile, device: Any, tensors: dict[int, Tensor]) -> Any:
    if node is None or isinstance(node, (bool, int, float, str)):
        return node
    if isinstance(node, list):
        return [_decode(item, archive, device, tensors) for item in node]
    if not isinstance(node, dict) or len(node) == 0:
        raise ValueError(f"unexpected node {node!r}")
    if "tensor" in node:
        index = node["tensor"]
        if index not in tensors:
            array = _read_array(archive, index)
            tensor = Tensor(array, device=device if device is not None else node["device"])
            tensors[index] = Parameter(tensor, node["requires_grad"]) if node["parameter"] else \
                tensor.requires_grad_(node["requires_grad"])
        return tensors[index]
    if "ndarray" in node:
        array = _read_array(archive, node["ndarray"])
        return array[()] if node["scalar"] else array
    if "float" in node:
        return float(node["float"])
    if "tuple" in node:
        return tuple(_decode(item, archive, device, tensors) for item in node["tuple"])
    kind = "ordered_dict" if "ordered_dict" in node else "dict"
    result = OrderedDict() if kind == "ordered_dict" else {}
    for key, value in node[kind]:
        result[_decode(key, archive, device, tensors)] = _decode(value, archive, device, tensors)
    return result


def _read_array(archive: zipfile.ZipFile, index: int) -> np.ndarray:
    with archive.open(_DATA.format(int(index))) as member:
        return np.lib.format.read_array(io.BytesIO(member.read()), allow_pickle=False)
