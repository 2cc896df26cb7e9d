"""Strides and memory formats as torch has them: host metadata only (shapes and strides in
elements, never device data), so every layer may use it, AccumulateGrad included.

Note [Strides are the device memory's]: a tensor's strides are those of the memory its array
lies in, in elements: numpy's on ``cpu``, CuPy's on ``cuda:N``, and on ``sim:N`` those of the
simulated device's memory, the numpy array inside each ``array_api_strict`` array (the one place
the strict backend looks inside, Note [Views share memory on every device]). The Array API
standard has no strides, so ``sim`` does not invent a layout: it reports the one its kernels
really wrote, as a GPU does, and ``stride()``, ``is_contiguous()``, views and the layout
contract behave alike on every device. Where asyncgrad chooses a layout (``clone``,
``contiguous``, ``to``, the ``*_like`` factories, ``empty_strided``, a new ``.grad``) it
follows torch's rules below exactly; elsewhere a result's strides are its backend's (numpy's
ufuncs keep their inputs' order as torch's TensorIterator does; numpy gives an empty tensor
strides 0 where torch counts an empty dimension as 1).
"""

from __future__ import annotations

from typing import Any


class memory_format:
    """torch.memory_format: how a dense tensor's elements are ordered in memory (printed as
    ``asyncgrad.channels_last``; one object per format, compared by identity)."""

    __slots__ = ("name",)
    __module__ = "asyncgrad"

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"asyncgrad.{self.name}"

    def __reduce__(self) -> str:
        return self.name  # pickled as the module-level object of that name


contiguous_format = memory_format("contiguous_format")
channels_last = memory_format("channels_last")
channels_last_3d = memory_format("channels_last_3d")
preserve_format = memory_format("preserve_format")

class layout:
    """torch.layout: how a tensor's elements are stored. asyncgrad's tensors are dense, so ``strided``
    is its one layout; factories take ``layout=strided`` (or None) as torch's do."""

    __slots__ = ("name",)
    __module__ = "asyncgrad"

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"asyncgrad.{self.name}"

    def __reduce__(self) -> str:
        return self.name


strided = layout("strided")


def layout_arg(value: Any, fn: str) -> None:
    """A factory's ``layout=``: None or ``strided``; any other layout is refused."""
    if value is None or value is strided:
        return
    if isinstance(value, layout):
        raise RuntimeError(f"{fn}(): asyncgrad has only the strided layout, got {value!r}")
    raise TypeError(f"{fn}(): argument 'layout' must be torch.layout, not {type(value).__name__}")


_CHANNELS_LAST_ORDER = {channels_last: (4, (1, 3, 2, 0)), channels_last_3d: (5, (1, 4, 3, 2, 0))}
"""For each channels-last format: its rank and its dims from the innermost (torch's loops)."""


def format_arg(value: Any, fn: str) -> memory_format:
    """A ``memory_format=`` argument, refused with torch's words when it is no memory format."""
    if not isinstance(value, memory_format):
        raise TypeError(f"{fn}(): argument 'memory_format' must be torch.memory_format, not {type(value).__name__}")
    return value


def element_strides(byte_strides: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    """Strides in elements, as torch counts them (Note [Strides are the device memory's])."""
    return tuple(s // itemsize for s in byte_strides)


def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Row-major strides, an empty or size-1 dimension counted as 1 (torch's)."""
    out = [1] * len(shape)
    for d in range(len(shape) - 2, -1, -1):
        out[d] = out[d + 1] * max(shape[d + 1], 1)
    return tuple(out)


def format_strides(shape: tuple[int, ...], fmt: memory_format) -> tuple[int, ...]:
    """The strides of a new tensor of ``shape`` in ``fmt`` (contiguous or channels-last;
    torch's get_channels_last_strides_2d/3d), refusing a rank the format does not have."""
    if fmt is contiguous_format:
        return contiguous_strides(shape)
    rank, order = _CHANNELS_LAST_ORDER[fmt]
    if len(shape) != rank:
        raise RuntimeError(f"required rank {rank} tensor to use {fmt.name} format")
    out = [0] * rank
    expected = 1
    for d in order:
        out[d] = expected
        expected *= max(shape[d], 1)
    return tuple(out)


def is_contiguous_as(shape: tuple[int, ...], strides: tuple[int, ...], fmt: memory_format) -> bool:
    """torch's ``is_contiguous(memory_format=fmt)``: the dims of size 1 are free, an empty tensor
    is contiguous; channels-last only for its rank; preserve_format as contiguous."""
    if fmt is contiguous_format or fmt is preserve_format:
        order: tuple[int, ...] = tuple(range(len(shape) - 1, -1, -1))
        if 0 in shape:
            return True
    else:
        rank, order = _CHANNELS_LAST_ORDER[fmt]
        if len(shape) != rank:
            return False
    expected = 1
    for d in order:
        if shape[d] != 1:
            if strides[d] != expected:
                return False
            expected *= shape[d]
    return True


def non_overlapping_and_dense(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    """torch's ``is_non_overlapping_and_dense``: some permutation of the dims is contiguous."""
    if len(shape) == 1:
        return shape[0] < 2 or strides[0] == 1
    require = 1
    for d in sorted(range(len(shape)), key=lambda d: (shape[d] < 2, strides[d])):
        if shape[d] < 2:
            return True
        if strides[d] != require:
            return False
        require *= shape[d]
    return True


def suggest_memory_format(shape: tuple[int, ...], strides: tuple[int, ...]) -> memory_format:
    """torch's ``suggest_memory_format``: channels-last where the strides are ordered as it
    (is_channels_last_strides_2d/3d), else contiguous."""
    for fmt, (rank, order) in _CHANNELS_LAST_ORDER.items():
        if len(shape) == rank and _strides_like(shape, strides, order):
            return fmt
    return contiguous_format


def _strides_like(shape: tuple[int, ...], strides: tuple[int, ...], order: tuple[int, ...]) -> bool:
    if strides[1] == 0:
        return False
    least = 0
    for d in order:
        if shape[d] == 0 or strides[d] < least:
            return False
        if d == 0 and least == strides[1]:
            return False  # ambiguous (N111, or an N11W slice): torch falls back to contiguous
        least = strides[d] * (shape[d] if shape[d] > 1 else 1)
    return True


def infer_dense_strides(shape: tuple[int, ...], strides: tuple[int, ...]) -> tuple[int, ...]:
    """Dense strides that keep the order of ``strides`` (torch's infer_dense_strides: TensorIterator's
    stable insertion sort, dims of stride 0 kept in place, equal strides broken by size)."""
    ndim = len(shape)
    perm = list(range(ndim - 1, -1, -1))

    def should_swap(a: int, b: int) -> int:
        sa, sb = strides[a], strides[b]
        if sa == 0 or sb == 0:
            return 0
        if sa != sb:
            return 1 if sa > sb else -1
        return 1 if shape[a] > shape[b] else 0

    for i in range(1, ndim):
        d1 = i
        for j in range(1, i + 1):
            d0 = i - j
            comparison = should_swap(perm[d0], perm[d1])
            if comparison > 0:
                perm[d0], perm[d1] = perm[d1], perm[d0]
                d1 = d0
            elif comparison < 0:
                break
    out = [0] * ndim
    step = 1
    for d in perm:
        out[d] = step
        if shape[d] > 1:
            step *= shape[d]
    return tuple(out)


def strides_for(shape: tuple[int, ...], strides: tuple[int, ...], fmt: memory_format) -> tuple[int, ...]:
    """The strides of a new tensor like one of ``shape``/``strides`` in ``fmt`` (torch's empty_like):
    preserve_format keeps a dense layout exactly and a strided one's order."""
    if fmt is preserve_format:
        if non_overlapping_and_dense(shape, strides):
            return strides
        return infer_dense_strides(shape, strides)
    return format_strides(shape, fmt)


def obeys_layout_contract(shape: tuple[int, ...], grad_strides: tuple[int, ...],
                          variable_strides: tuple[int, ...]) -> bool:
    """torch's ``obeys_layout_contract`` (Note [The gradient layout contract] in
    variable/accumulate.py): a dense variable's grad has its strides (a dim of size 1 is free,
    unless its grad stride is 0: a view), any other variable's grad is row-major."""
    if not non_overlapping_and_dense(shape, variable_strides):
        return is_contiguous_as(shape, grad_strides, contiguous_format)
    for n, g, v in zip(shape, grad_strides, variable_strides):
        if g != v if n != 1 else g == 0:
            return False
    return True


def contract_strides(shape: tuple[int, ...], variable_strides: tuple[int, ...]) -> tuple[int, ...]:
    """The strides of a new grad for a variable with these strides (torch's clone_obey_contract)."""
    if non_overlapping_and_dense(shape, variable_strides):
        return variable_strides
    return contiguous_strides(shape)
