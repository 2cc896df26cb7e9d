"""No numpy call on device data outside the numpy backend (Note [One array backend per device]).

Ops, the engine and everything else compute through ``device.xp`` / ``backend_of(array)``; numpy
is named outside ``asyncgrad/devices/backend.py`` only for what is not device data: dtypes,
shapes, type checks, and host values on their way in or out through the backend. The sim:0 run
of the op suite (array_api_strict) catches what this reading misses at run time.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "asyncgrad"

CHECKED = ("ops", "engine", "variable", "autograd")
"""The layers that compute on device arrays: ops' forwards and formulas, the engine's
accumulation and checks, a tensor's saved variables and gradient sinks, hooks and custom Functions."""

HOST_SIDE = {"autograd/gradcheck.py"}
"""Modules that compute only on host copies taken through the backend (``device.to_host``):
gradcheck's finite differences and Jacobians are float64 numpy arrays on the host, as torch's are
CPU tensors."""

METADATA = {
    # dtypes and their relations: host metadata, never device data
    "dtype", "promote_types", "result_type", "can_cast", "iinfo", "finfo", "issubdtype",
    "bool_", "number", "integer", "floating", "complexfloating", "generic", "ndarray",
    "float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bool",
    "intp", "isscalar",
    # shapes (``np.shape`` reads ``.shape`` of an array, and only converts Python numbers and lists)
    "broadcast_shapes", "prod", "shape", "ndim",
}


def _numpy_uses(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    aliases = {a.asname or a.name for node in ast.walk(tree) if isinstance(node, ast.Import)
               for a in node.names if a.name == "numpy"}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "numpy":
            found += [f"{path.name}:{node.lineno}: from numpy import {a.name}" for a in node.names
                      if a.name not in METADATA]
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases
                and node.attr not in METADATA):
            found.append(f"{path.name}:{node.lineno}: np.{node.attr}")
    return found


def test_no_numpy_on_device_data_outside_the_backend():
    found = []
    for layer in CHECKED:
        for path in sorted((PACKAGE / layer).rglob("*.py")):
            if path.relative_to(PACKAGE).as_posix() in HOST_SIDE:
                continue
            found += [f"{layer}/{use}" for use in _numpy_uses(path)]
    assert not found, "numpy used on what may be device data (use device.xp / the backend):\n" + "\n".join(found)


def test_the_rule_finds_a_numpy_call(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import numpy as np\n\ndef f(x):\n    return np.exp(x) + np.dtype('f4').itemsize\n")
    assert _numpy_uses(bad) == ["bad.py:4: np.exp"]
