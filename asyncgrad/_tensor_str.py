"""torch's tensor printing (``torch/_tensor_str.py``) on host numpy arrays.

Note [Printing as torch prints]: a tensor's repr is torch's, character for character, with
``asyncgrad`` for ``torch`` where a name is printed (``dtype=asyncgrad.float64``,
``asyncgrad.Size([0, 3])`` is not printed by torch, which writes ``size=(0, 3)``). One formatter
per tensor decides from its nonzero finite values: integers print as ``1.``, ratios above 1000
or magnitudes above 1e8 or below 1e-4 in scientific notation, anything else with 4 decimals;
every element is right-aligned to the widest. Above 1000 elements the middle of each dimension
is summarized as ``...`` (3 edge items). Lines wrap at 80 characters.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

PRECISION = 4
THRESHOLD = 1000
EDGEITEMS = 3
LINEWIDTH = 80


class _Formatter:
    """torch's ``_Formatter``: one width and one mode for every element of a tensor."""

    def __init__(self, values: np.ndarray) -> None:
        self.floating = values.dtype.kind == "f"
        self.int_mode = True
        self.sci_mode = False
        self.max_width = 1
        flat = values.reshape(-1)
        if not self.floating:
            for value in flat.tolist():
                self.max_width = max(self.max_width, len(f"{value}"))
            return
        finite = flat[np.isfinite(flat) & (flat != 0)]
        if finite.size == 0:
            return
        magnitudes = np.abs(finite.astype(np.float64))
        low, high = magnitudes.min(), magnitudes.max()
        self.int_mode = bool(np.all(finite == np.ceil(finite)))
        self.sci_mode = bool(high / low > 1000.0 or high > 1.0e8 or low < 1.0e-4)
        for value in finite.tolist():
            if self.sci_mode:
                width = len(f"{value:.{PRECISION}e}")
            elif self.int_mode:
                width = len(f"{value:.0f}") + 1
            else:
                width = len(f"{value:.{PRECISION}f}")
            self.max_width = max(self.max_width, width)

    def format(self, value: Any) -> str:
        if self.floating:
            if self.sci_mode:
                text = f"{value:{self.max_width}.{PRECISION}e}"
            elif self.int_mode:
                text = f"{value:.0f}"
                if not (math.isinf(value) or math.isnan(value)):
                    text += "."
            else:
                text = f"{value:.{PRECISION}f}"
        else:
            text = f"{value}"
        return (self.max_width - len(text)) * " " + text


def _summarized(values: np.ndarray) -> np.ndarray:
    """The elements a summarized print shows (torch's ``get_summarized_data``), for the formatter."""
    if values.ndim == 0:
        return values
    if values.ndim == 1:
        if values.shape[0] > 2 * EDGEITEMS:
            return np.concatenate((values[:EDGEITEMS], values[-EDGEITEMS:]))
        return values
    rows = list(range(values.shape[0]))
    if values.shape[0] > 2 * EDGEITEMS:
        rows = rows[:EDGEITEMS] + rows[-EDGEITEMS:]
    return np.stack([_summarized(values[i]) for i in rows])


def _vector(values: np.ndarray, indent: int, summarize: bool, formatter: _Formatter) -> str:
    per_line = max(1, math.floor((LINEWIDTH - indent) / (formatter.max_width + 2)))
    if summarize and values.shape[0] > 2 * EDGEITEMS:
        data = ([formatter.format(v) for v in values[:EDGEITEMS].tolist()] + [" ..."]
                + [formatter.format(v) for v in values[-EDGEITEMS:].tolist()])
    else:
        data = [formatter.format(v) for v in values.tolist()]
    lines = [", ".join(data[i:i + per_line]) for i in range(0, len(data), per_line)]
    return "[" + ("," + "\n" + " " * (indent + 1)).join(lines) + "]"


def _nested(values: np.ndarray, indent: int, summarize: bool, formatter: _Formatter) -> str:
    if values.ndim == 0:
        return formatter.format(values.item())
    if values.ndim == 1:
        return _vector(values, indent, summarize, formatter)
    rows = values.shape[0]
    if summarize and rows > 2 * EDGEITEMS:
        slices = ([_nested(values[i], indent + 1, summarize, formatter) for i in range(EDGEITEMS)] + ["..."]
                  + [_nested(values[i], indent + 1, summarize, formatter) for i in range(rows - EDGEITEMS, rows)])
    else:
        slices = [_nested(values[i], indent + 1, summarize, formatter) for i in range(rows)]
    return "[" + ("," + "\n" * (values.ndim - 1) + " " * (indent + 1)).join(slices) + "]"


def tensor_str(values: np.ndarray, indent: int) -> str:
    """The bracketed values, as torch's ``_tensor_str``."""
    if values.size == 0:
        return "[]"
    summarize = values.size > THRESHOLD
    formatter = _Formatter(_summarized(values) if summarize else values)
    return _nested(values, indent, summarize, formatter)


def add_suffixes(text: str, suffixes: list[str], indent: int) -> str:
    """``, dtype=...`` and the rest, wrapped to a new line where the line would pass 80 characters."""
    parts = [text]
    last_line = len(text) - text.rfind("\n") + 1
    for suffix in suffixes:
        if last_line + len(suffix) + 2 > LINEWIDTH:
            parts.append(",\n" + " " * indent + suffix)
            last_line = indent + len(suffix)
        else:
            parts.append(", " + suffix)
            last_line += len(suffix) + 2
    parts.append(")")
    return "".join(parts)
