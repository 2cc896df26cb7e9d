"""Array backends: which array library computes on a device, and the few primitives the
Python Array API standard has no word for.
"""

from __future__ import annotations

import functools
import sys
from typing import Any

import numpy as np

from asyncgrad.devices import bessel, gamma, lu, special
from asyncgrad.devices.buffers import CACHE, owns_slab

# Note [One array backend per device]: ops are written against the Array API standard, through
# ``device.backend.xp``; the device, not the op, decides which library that is:
#
# * ``cpu``: numpy itself (numpy 2 implements the standard; using the module directly costs
#   nothing on the per-op path, where a compatibility wrapper would).
# * ``sim:N``: ``array_api_strict``, a deliberately minimal implementation with arrays of its
#   own type on devices of its own. An op that calls numpy on device data, uses a numpy-only
#   method (``a.sum()``, ``a.astype``) or mixes numpy scalars in fails on ``sim`` in CI, exactly
#   where it would break on CuPy, which no CI machine has.
# * ``cuda:N``: CuPy through ``array_api_compat``, inside its own device.
#
# asyncgrad's dtypes stand for numpy dtypes on every device (``Tensor.dtype`` maps the numpy dtype
# a backend gives to its interned asyncgrad dtype: Note [Dtypes are numpy dtypes underneath] in
# dtypes.py); a backend converts them to its library's dtype objects (``native_dtype``) and back to
# numpy's (``dtype``). Host values enter
# and leave a device only through ``from_host`` and ``to_host``: nothing converts silently.
#
# What the standard lacks, each backend supplies in its own library's terms: numpy-style
# indexing (``getitem``/``setitem``: integer arrays mixed with slices, boolean masks),
# scatter-add (``index_add``), and memory: views that share their base's memory (``view``,
# ``broadcast_view``), layout-keeping copies (``copy``), strides and addresses for torch's overlap
# checks and for finding a view's elements in its base (``view_index``). The strict backend
# implements them as the simulated device's own kernels, on the numpy array inside its arrays: the
# one place that may look inside.

# Note [Views share memory on every device]: a torch view and its base are one memory, so an
# in-place write through either is seen by the other. The standard promises no such thing (an
# array_api_strict operation returns a new array, which may or may not share memory), so view ops
# do not use ``xp.reshape``/``xp.permute_dims`` but ``backend.view(array, fn, *args)``: ``fn`` runs
# on the array's native storage (a numpy ndarray on cpu and inside a strict array, a CuPy ndarray
# on cuda) using only what numpy and CuPy ndarrays share (``reshape``, ``transpose``, ``swapaxes``,
# ``T``, basic indexing, the ``shape`` setter), and its result, a numpy/CuPy view, is handed back
# as this device's array over the same memory.


_SPECIAL_CHUNK = 16384
"""Elements per chunk of a special function (Note [Special functions in chunks]): 128 KiB of float64."""

_getrefcount = sys.getrefcount

_SAME_WIDTH_INT = {n: np.dtype(f"i{n}") for n in (1, 2, 4, 8)}
"""The signed integer of each float's width: ``zero_where`` masks a float's bits through it."""

STREAMS_ACTIVE = [False]
"""Whether a stream other than a device's default may be current (``devices/streams.py``'s ``ACTIVE``):
a cuda device sets it, since CuPy's current stream can be changed by CuPy itself."""


_ZERO_ROW = 1024
"""The row length of Note [Maximum against a row of zeros]: long enough that the per-row start is
small beside the row's vector loop, short enough that the zeros stay in the first-level cache."""


@functools.lru_cache(maxsize=None)
def _zero_row(dtype: np.dtype) -> np.ndarray:
    """One read-only row of ``_ZERO_ROW`` zeros of a float dtype (Note [Maximum against a row of zeros])."""
    row = np.zeros(_ZERO_ROW, dtype)
    row.flags.writeable = False
    return row


class ArrayBackend:
    """numpy on the host; the base of the others."""

    name = "numpy"
    xp: Any = np

    into_ufuncs = True
    """Whether ``into`` can write a binary ufunc's result into an existing array (numpy, CuPy: ``out=``)."""

    def into(self, name: str, out: Any, a: Any, b: Any) -> None:
        """``out[...] = name(a, b)`` without a temporary (``name`` a binary ufunc: add, subtract,
        multiply, divide), for in-place arithmetic (Note [In place without a temporary] in
        ops/inplace.py). Only where ``into_ufuncs``."""
        getattr(np, name)(a, b, out=out)

    def quiet(self) -> Any:
        """A context where floating-point exceptions pass silently (inf, NaN, underflow), as torch's
        kernels give them: for ops whose masked branches compute values they then discard."""
        return np.errstate(all="ignore")

    def dtype(self, array: Any) -> np.dtype:
        """asyncgrad's dtype (a numpy dtype) of an array of this backend."""
        return array.dtype

    def native_dtype(self, dtype: Any) -> Any:
        """This library's dtype object for asyncgrad's ``dtype`` (None stays None)."""
        return dtype

    def is_array(self, value: Any) -> bool:
        return isinstance(value, np.ndarray)

    def array(self, value: Any) -> Any:
        """A result kept an array: numpy gives a scalar for a full reduction (``np.sum``) or an
        all-integer index, which the next formula (an index-add, an in-place accumulation) cannot
        take; the standard's other implementations give 0-d arrays."""
        return np.asarray(value) if isinstance(value, np.generic) else value

    def from_host(self, host: Any, dtype: Any = None, copy: bool | None = None) -> Any:
        """``host`` (a numpy array, a number, a nest of numbers) as an array on this device."""
        return np.array(host, dtype=dtype, copy=copy)

    def to_host(self, array: Any) -> np.ndarray:
        """A numpy array with this array's values (the same memory where the device is the host)."""
        return np.asarray(array)

    def astype(self, array: Any, dtype: np.dtype, copy: bool = False) -> Any:
        return array.astype(dtype, copy=copy)

    def zeros(self, shape: tuple[int, ...], dtype: np.dtype) -> Any:
        return np.zeros(shape, dtype=dtype)

    def ones(self, shape: tuple[int, ...], dtype: np.dtype) -> Any:
        return np.ones(shape, dtype=dtype)

    def full(self, shape: tuple[int, ...], value: Any, dtype: np.dtype) -> Any:
        return np.full(shape, value, dtype=dtype)

    def empty(self, shape: tuple[int, ...], dtype: np.dtype) -> Any:
        return np.empty(shape, dtype=dtype)

    def arange(self, stop: int, dtype: np.dtype) -> Any:
        """``0, 1, ..., stop - 1`` on this device (positions, to compare indices with)."""
        return np.arange(stop, dtype=dtype)

    def getitem(self, array: Any, index: Any) -> Any:
        """``array[index]`` with numpy's indexing rules (advanced indices included), kept an array."""
        out = array[index]
        return np.asarray(out) if isinstance(out, np.generic) else out

    def setitem(self, array: Any, index: Any, values: Any) -> None:
        """``array[index] = values`` in place, with numpy's indexing rules."""
        array[index] = values

    def index_add(self, shape: tuple[int, ...], index: Any, basic: bool, values: Any) -> Any:
        """Zeros of ``shape`` with ``values`` added at ``index`` (repeated indices add up)."""
        out = np.zeros(shape, dtype=values.dtype)
        if basic:
            out[index] = values
        else:
            np.add.at(out, index, values)
        return out

    def any_nan(self, array: Any) -> bool:
        return bool(np.isnan(array).any())

    # Note [Reductions without numpy's wrappers]: ``np.sum``, ``np.max`` and ``np.any`` are Python
    # functions (``_wrapreduction``) that end in ``np.add.reduce``, ``np.maximum.reduce`` and
    # ``np.logical_or.reduce`` for an ndarray: calling the ufunc's ``reduce`` directly is the same
    # computation, bit for bit, without the wrapper's Python, which on the small arrays of a loss or
    # a bias gradient is most of the call (``python -m benchmarks.train_loop`` shows the loss phase).
    # The other backends call their namespace's functions.
    def sum(self, array: Any, axis: Any = None, keepdims: bool = False) -> Any:
        """``xp.sum(array, axis=axis, keepdims=keepdims)``."""
        return np.add.reduce(array, axis=axis, keepdims=keepdims)

    def max(self, array: Any, axis: Any = None, keepdims: bool = False) -> Any:
        """``xp.max(array, axis=axis, keepdims=keepdims)``."""
        return np.maximum.reduce(array, axis=axis, keepdims=keepdims)

    def any(self, array: Any) -> bool:
        """``bool(xp.any(array))``."""
        return bool(np.logical_or.reduce(array, axis=None, dtype=bool))

    def relu(self, array: Any) -> Any:
        """``maximum(array, 0)`` (relu's forward; NaN stays NaN), a new array.

        Note [Maximum against a row of zeros]: numpy's ``maximum`` runs its vector loop only where
        both operands step through memory, not against a scalar (an operand of stride 0), where it
        compares one element at a time. So a contiguous float array is taken as rows of
        ``_ZERO_ROW`` elements against one row of zeros, broadcast over the rows (each row steps
        through both), and only the remainder against the scalar. Every element meets the same
        zero either way, so the results are the same, bit for bit."""
        size = array.size
        if array.dtype.kind != "f" or size < _ZERO_ROW or not array.flags.c_contiguous:
            return np.maximum(array, 0)
        flat = array.reshape(-1)
        out = np.empty_like(flat)
        rows = size - size % _ZERO_ROW
        np.maximum(flat[:rows].reshape(-1, _ZERO_ROW), _zero_row(array.dtype), out=out[:rows].reshape(-1, _ZERO_ROW))
        if rows < size:
            np.maximum(flat[rows:], 0, out=out[rows:])
        return out.reshape(array.shape)

    def zero_where(self, cond: Any, array: Any) -> Any:
        """``where(cond, 0, array)`` for a float ``array`` and a same-shaped bool ``cond`` (a new array).

        Note [Branchless zero_where]: numpy's ``where`` branches per element, so on a mask with no
        pattern (relu's on activations, max pooling's argmax) it mispredicts half the time and runs
        far slower than a multiply; ``array * ~cond`` is branchless but turns an inf or NaN
        gradient under a false mask into NaN where torch gives 0. So the float's bits are ANDed
        with a mask of all ones (keep) or all zeros (+0.0): exact, and three branchless passes.
        Other backends use ``xp.where`` (on a GPU it does not branch)."""
        dtype = array.dtype
        if cond.shape != array.shape or dtype.kind != "f" or not cond.ndim:  # 0-d: numpy scalars have no out=
            return np.where(cond, dtype.type(0), array)
        bits = _SAME_WIDTH_INT[dtype.itemsize]
        mask = cond.astype(bits)
        mask -= 1  # cond -> 0, else -1 (all bits set)
        return np.bitwise_and(array.view(bits), mask, out=mask).view(dtype)

    # the special functions and kernels the Array API has no word for
    def erf(self, array: Any) -> Any:
        """The error function, in the array's float dtype (Note [erf to double precision] in special.py;
        Note [erf to single precision] below float64)."""
        return self._special(special.erf if self.dtype(array) == np.float64 else special.erf_single, array)

    def erfc(self, array: Any) -> Any:
        return self._special(special.erfc if self.dtype(array) == np.float64 else special.erfc_single, array)

    def erfinv(self, array: Any) -> Any:
        return self._special(special.erfinv, array)

    # the gamma and Bessel functions (Note [Gamma functions to double precision] in gamma.py, Note
    # [Bessel functions to double precision] in bessel.py), in the array's float dtype
    def lgamma(self, array: Any) -> Any:
        return self._special(gamma.lgamma, array)

    def digamma(self, array: Any) -> Any:
        return self._special(gamma.digamma, array)

    def polygamma(self, n: int, array: Any) -> Any:
        return self._special(lambda xp, a: gamma.polygamma(xp, n, a), array)

    def i0(self, array: Any) -> Any:
        return self._special(bessel.i0, array)

    def i0e(self, array: Any) -> Any:
        return self._special(bessel.i0e, array)

    def i1(self, array: Any) -> Any:
        return self._special(bessel.i1, array)

    def i1e(self, array: Any) -> Any:
        return self._special(bessel.i1e, array)

    def erfcx(self, array: Any) -> Any:
        return self._special(special.erfcx, array)

    def lu_factor(self, array: Any) -> tuple[Any, Any, Any]:
        """(LU, pivots, info) of a batch of matrices, as LAPACK's getrf (Note [LU as LAPACK's getrf gives it]
        in devices/lu.py)."""
        return lu.lu_factor(self, array)

    def lu_permutation(self, pivots: Any, m: int, dtype: np.dtype) -> Any:
        """P of ``A = P L U`` from getrf's pivots, in ``dtype``."""
        return lu.permutation_matrix(self, pivots, m, dtype)

    def _special(self, fn: Any, array: Any) -> Any:
        """``fn(xp, array)`` computed in float64 (the approximations are written for it), cast back;
        a large array chunk by chunk.

        Note [Special functions in chunks]: ``fn`` makes a dozen or more temporaries as large as
        its argument. Past malloc's thresholds (128 KiB) each one is fresh memory from the kernel,
        page-faulted in and given back: on a (512, 256) array that costs more than the arithmetic.
        Chunks of ``_SPECIAL_CHUNK`` elements keep every temporary, the float64 copy included, in
        memory malloc reuses."""
        dtype = self.dtype(array)
        f64 = np.dtype(np.float64)
        xp = self.xp
        with np.errstate(all="ignore"):  # masked branches may overflow; torch warns of nothing
            if array.ndim == 0 or array.size <= _SPECIAL_CHUNK:
                out = fn(xp, self.astype(array, f64))
                return out if dtype == np.float64 else self.astype(out, dtype)
            flat = xp.reshape(array, (-1,))
            out = self.empty(flat.shape, dtype)
            for start in range(0, flat.shape[0], _SPECIAL_CHUNK):
                part = slice(start, start + _SPECIAL_CHUNK)
                self.setitem(out, part, self.astype(fn(xp, self.astype(flat[part], f64)), dtype))
        return xp.reshape(out, array.shape)

    def fmod(self, a: Any, b: Any) -> Any:
        """C's fmod: the remainder of truncated division, with the dividend's sign (the standard's
        ``remainder`` has the divisor's). ``b`` is an array or a Python number."""
        return np.fmod(a, b)

    def solve(self, a: Any, b: Any) -> Any:
        """``a⁻¹ b`` for (batches of) square matrices ``a`` and matrices ``b``, batch dims broadcast as
        torch's: numpy's ``linalg.solve`` broadcasts them, CuPy's wants them equal, so both are
        broadcast first (views, no copy)."""
        xp = self.xp
        a_batch, b_batch = tuple(a.shape[:-2]), tuple(b.shape[:-2])
        if a_batch != b_batch:
            batch = np.broadcast_shapes(a_batch, b_batch)
            a = xp.broadcast_to(a, batch + tuple(a.shape[-2:]))
            b = xp.broadcast_to(b, batch + tuple(b.shape[-2:]))
        return xp.linalg.solve(a, b)

    def einsum(self, equation: str, *arrays: Any) -> Any:
        """``einsum`` with explicit subscripts and output (no ellipsis), kept an array."""
        return self.array(np.einsum(equation, *arrays, optimize=len(arrays) > 2))

    def singular_pivot(self, array: Any) -> tuple[int, int] | None:
        """For a batch of square matrices that LAPACK's LU (getrf) finds singular: (batch element,
        1-based index of the first zero pivot), as torch's linalg errors name them; None if every
        matrix factors. Row-pivoted elimination on the host, on the error path only."""
        host = np.array(self.to_host(array), dtype=np.float64)
        n = host.shape[-1]
        for element, matrix in enumerate(host.reshape((-1, n, n))):
            for k in range(n):
                row = k + int(np.argmax(np.abs(matrix[k:, k])))
                if matrix[row, k] == 0:
                    return element, k + 1
                matrix[[k, row]] = matrix[[row, k]]
                matrix[k + 1:, k:] -= np.outer(matrix[k + 1:, k] / matrix[k, k], matrix[k, k:])
        return None

    def not_positive_definite(self, array: Any) -> tuple[int, int] | None:
        """For a batch of symmetric matrices (their lower triangles) that Cholesky cannot factor:
        (batch element, order of the first leading minor that is not positive-definite), as torch's
        cholesky errors name them; None if every matrix factors. On the host, on the error path only."""
        host = np.array(self.to_host(array), dtype=np.float64)
        n = host.shape[-1]
        for element, matrix in enumerate(host.reshape((-1, n, n))):
            lower = np.tril(matrix)
            full = lower + np.tril(lower, -1).T
            for k in range(1, n + 1):
                try:
                    np.linalg.cholesky(full[:k, :k])
                except np.linalg.LinAlgError:
                    return element, k
        return None

    def eig(self, array: Any) -> tuple[Any, Any]:
        """A real general eigendecomposition in LAPACK's real packing (torch's legacy ``eig``):
        eigenvalues as (..., n, 2) rows of (real, imaginary) parts, eigenvectors real, a complex
        pair's (v, v̄) in two columns (re v, im v). On the host: CuPy has no general ``eig``."""
        host = self.to_host(array)
        w, v = np.linalg.eig(host)
        values = np.stack([w.real, w.imag], axis=-1).astype(host.dtype)
        vectors = np.where((w.imag < 0)[..., None, :], -v.imag, v.real).astype(host.dtype)
        return self.from_host(values), self.from_host(vectors)

    # ---- what the standard lacks for scatter, sorting and unique (numpy's own words)
    def scatter_multiply(self, out: Any, index: Any, values: Any) -> Any:
        """``out`` with its entries at the advanced ``index`` multiplied by ``values`` (repeats multiply
        up), in place."""
        np.multiply.at(out, index, values)
        return out

    def scatter_extreme(self, out: Any, index: Any, values: Any, is_max: bool) -> Any:
        """``out`` with its entries at the advanced ``index`` raised (``is_max``) or lowered to
        ``values`` where those are beyond them (repeats take the extreme; NaN wins), in place."""
        (np.maximum if is_max else np.minimum).at(out, index, values)
        return out

    def argsort(self, array: Any, axis: int, descending: bool) -> Any:
        """Stable argsort along ``axis`` as torch sorts: NaN above every number (last ascending,
        first descending), ties in their original order either way. Descending is the ascending
        stable sort of the reversed array, reversed back, so equal elements keep their order."""
        if not descending:
            return np.argsort(array, axis=axis, kind="stable")
        n = array.shape[axis]
        flipped = np.flip(array, axis=axis)
        return (n - 1) - np.flip(np.argsort(flipped, axis=axis, kind="stable"), axis=axis)

    def unique(self, array: Any) -> tuple[Any, Any, Any]:
        """The sorted distinct values of ``array`` (flattened), each element's position among them, and their counts."""
        values, inverse, counts = np.unique(array.reshape(-1), return_inverse=True, return_counts=True)
        return values, inverse.reshape(array.shape).astype(np.int64), counts.astype(np.int64)

    def owns_memory(self, array: Any) -> bool:
        """Whether ``array``'s memory is its own: no view of another array's (a recycled product's
        slab counts as its own while nothing else sees it: Note [Recycled product buffers] in
        devices/buffers.py), and writable, so an in-place write into it changes no other array.
        Gradient stealing asks this (devices/ownership.py), after checking that nothing else
        references the array object."""
        base = array.base
        return (base is None or owns_slab(base)) and array.flags.writeable

    def matmul(self, a: Any, b: Any) -> Any:
        """``a @ b`` for a gradient formula: on the cpu a large product of two matrices is written
        into a recycled buffer (Note [Recycled product buffers] in devices/buffers.py)."""
        return CACHE.matmul(a, b)

    # numpy views share memory already (Note [Views share memory on every device])
    def view(self, array: Any, fn: Any, *args: Any) -> Any:
        """``fn(native, *args)``, a view of this array's native storage, as an array of this device
        sharing the same memory."""
        return fn(array, *args)

    def broadcast_view(self, array: Any, shape: tuple[int, ...]) -> Any:
        """``array`` broadcast to ``shape`` (strides 0), sharing its memory and writable where it is,
        like torch's expand (in-place ops refuse a real overlap themselves)."""
        out = np.broadcast_to(array, shape)
        if array.flags.writeable:
            out = np.lib.stride_tricks.as_strided(array, out.shape, out.strides)
        return out

    def strided_view(self, array: Any, shape: tuple[int, ...], strides: tuple[int, ...], offset: int) -> Any:
        """A writable view of ``array``'s memory: ``shape`` and ``strides`` (bytes) from ``offset`` bytes past
        its first element (torch's as_strided, diagonal). The caller keeps it inside the memory."""
        return _strided(array, shape, strides, offset)

    def empty_strided(self, shape: tuple[int, ...], strides: tuple[int, ...], dtype: Any) -> Any:
        """A new uninitialised array with these ``strides`` (elements, non-negative): a view of a
        fresh 1-d allocation just large enough (torch's empty_strided; Note [Strides are the
        device memory's] in _layout.py)."""
        itemsize = np.dtype(dtype).itemsize
        size = 0 if 0 in shape else 1 + sum((n - 1) * s for n, s in zip(shape, strides))
        return self.strided_view(self.empty((size,), dtype), shape, tuple(s * itemsize for s in strides), 0)

    def copy_strided(self, array: Any, strides: tuple[int, ...]) -> Any:
        """A copy of ``array`` laid out with these ``strides`` (elements; a dense layout)."""
        out = self.empty_strided(tuple(array.shape), strides, self.dtype(array))
        self.setitem(out, Ellipsis, array)
        return out

    def copy(self, array: Any, order: str = "K") -> Any:
        """A copy in C order (``"C"``) or in the array's own layout (``"K"``, torch's preserve_format)."""
        return array.copy(order=order)

    def recycled_copy(self, array: Any) -> Any:
        """A C-order copy of ``array``; on the cpu a large one is written into a recycled buffer
        (Note [Recycled product buffers] in devices/buffers.py): convolution's columns."""
        return CACHE.copy(array)

    def is_contiguous(self, array: Any) -> bool:
        return array.flags.c_contiguous

    def strides(self, array: Any) -> tuple[int, ...]:
        """The array's strides, in bytes."""
        return array.strides

    def address(self, array: Any) -> int:
        """The address of the array's first element."""
        return array.__array_interface__["data"][0]

    def may_share_memory(self, a: Any, b: Any) -> bool:
        """Whether the two arrays' memory bounds overlap (numpy's ``may_share_memory``)."""
        return bool(np.may_share_memory(a, b))

    def view_index(self, base: Any, view: Any) -> Any:
        """For each element of ``view``, its flat (C-order) position in ``base``, whose memory it
        shares, as an index array of this device (computed from addresses and strides)."""
        itemsize = self.dtype(base).itemsize
        if view.size == 0:
            return self.from_host(np.zeros(view.shape, dtype=np.intp))
        base_at = _addresses(self.address(base), base.shape, self.strides(base))
        view_at = _addresses(self.address(view), view.shape, self.strides(view))
        low = int(base_at.min())
        lookup = np.full((int(base_at.max()) - low) // itemsize + 1, -1, dtype=np.intp)
        lookup[(base_at.reshape(-1) - low) // itemsize] = np.arange(base_at.size)
        offsets = (view_at - low) // itemsize
        if (offsets < 0).any() or (offsets >= lookup.size).any() or (lookup[offsets] < 0).any():
            raise RuntimeError("a view's elements must lie in its base's memory")
        return self.from_host(lookup[offsets])


class _Memory:
    """What ``np.asarray`` reads a strided view from: an array interface, and the array whose memory it is."""

    def __init__(self, interface: dict, base: Any) -> None:
        self.__array_interface__ = interface
        self.base = base


def _strided(array: np.ndarray, shape: tuple[int, ...], strides: tuple[int, ...], offset: int) -> np.ndarray:
    interface = dict(array.__array_interface__)
    interface["data"] = (interface["data"][0] + offset, False)
    interface["shape"], interface["strides"] = tuple(shape), tuple(strides)
    return np.asarray(_Memory(interface, array))


def _addresses(address: int, shape: tuple[int, ...], strides: tuple[int, ...]) -> np.ndarray:
    """The byte address of every element of an array with this layout (host metadata)."""
    at = np.full(shape, address, dtype=np.intp)
    for axis, (n, stride) in enumerate(zip(shape, strides)):
        at += (np.arange(n, dtype=np.intp) * stride).reshape([-1 if i == axis else 1 for i in range(len(shape))])
    return at


def _inner_count(array: Any) -> int:
    """``getrefcount`` of a strict array's numpy array, taken exactly as ``StrictBackend.owns_memory`` takes it."""
    inner = array._array
    return _getrefcount(inner)


class _NamespaceReductions:
    """The reductions of a backend other than numpy's: its namespace's own functions (Note
    [Reductions without numpy's wrappers])."""

    xp: Any

    def sum(self, array: Any, axis: Any = None, keepdims: bool = False) -> Any:
        return self.xp.sum(array, axis=axis, keepdims=keepdims)

    def max(self, array: Any, axis: Any = None, keepdims: bool = False) -> Any:
        return self.xp.max(array, axis=axis, keepdims=keepdims)

    def any(self, array: Any) -> bool:
        return bool(self.xp.any(array))


class StrictBackend(_NamespaceReductions, ArrayBackend):
    """``array_api_strict`` on one of its simulated devices (Note [One array backend per device])."""

    name = "array_api_strict"
    into_ufuncs = False  # the Array API has no ``out=``: in-place ops compute, then write

    def __init__(self, device_name: str) -> None:
        import array_api_strict as xp
        from array_api_strict._array_object import Array

        self.xp = xp
        self.device = xp.Device(device_name)
        self._host = xp.Device("CPU_DEVICE")
        self._array_type = Array
        self._wrap = Array._new
        self._to_native = {np.dtype(name): getattr(xp, name) for name in (
            "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32", "float64")}
        self._to_numpy = {native: dtype for dtype, native in self._to_native.items()}
        self._native_type = type(xp.float32)
        self._inner_unshared = _inner_count(self._wrap(np.empty(1), device=self.device))
        """References to a numpy array held by one strict array only, seen from ``owns_memory``
        (measured, as devices/ownership.py measures its count)."""
        register(Array, self)

    def dtype(self, array: Any) -> np.dtype:
        return self._to_numpy[array.dtype]

    def native_dtype(self, dtype: Any) -> Any:
        # a type test, not ``dtype in self._to_numpy``: that compares numpy dtypes with strict ones, which warns
        if dtype is None or isinstance(dtype, self._native_type):
            return dtype
        native = self._to_native.get(np.dtype(dtype))
        if native is None:
            raise TypeError(f"{np.dtype(dtype).name} is not supported on an array_api_strict (sim) device")
        return native

    def is_array(self, value: Any) -> bool:
        return isinstance(value, self._array_type)

    def from_host(self, host: Any, dtype: Any = None, copy: bool | None = None) -> Any:
        if isinstance(host, self._array_type):
            host = self.to_host(host)
        data = np.array(host, dtype=dtype, copy=True if copy is None else copy)
        return self._wrap(data, device=self.device)

    def to_host(self, array: Any) -> np.ndarray:
        return np.asarray(array.to_device(self._host))

    def astype(self, array: Any, dtype: np.dtype, copy: bool = False) -> Any:
        return self.xp.astype(array, self.native_dtype(dtype), copy=copy)

    def zeros(self, shape: tuple[int, ...], dtype: np.dtype) -> Any:
        return self.xp.zeros(shape, dtype=self.native_dtype(dtype), device=self.device)

    def ones(self, shape: tuple[int, ...], dtype: np.dtype) -> Any:
        return self.xp.ones(shape, dtype=self.native_dtype(dtype), device=self.device)

    def full(self, shape: tuple[int, ...], value: Any, dtype: np.dtype) -> Any:
        return self.xp.full(shape, value, dtype=self.native_dtype(dtype), device=self.device)

    def empty(self, shape: tuple[int, ...], dtype: np.dtype) -> Any:
        return self.xp.empty(shape, dtype=self.native_dtype(dtype), device=self.device)

    def arange(self, stop: int, dtype: np.dtype) -> Any:
        return self.xp.arange(stop, dtype=self.native_dtype(dtype), device=self.device)

    def _index(self, index: Any) -> Any:
        """An index with its arrays (this device's, or host numpy arrays) as numpy arrays."""
        if isinstance(index, tuple):
            return tuple(self._index(i) for i in index)
        if isinstance(index, self._array_type):
            return index._array
        return index

    def getitem(self, array: Any, index: Any) -> Any:
        # the array's own device: every sim:N's arrays are of one type, so backend_of finds the first sim backend
        return self._wrap(np.asarray(array._array[self._index(index)]), device=array.device)

    def setitem(self, array: Any, index: Any, values: Any) -> None:
        if isinstance(values, self._array_type):
            values = values._array
        array._array[self._index(index)] = values

    def index_add(self, shape: tuple[int, ...], index: Any, basic: bool, values: Any) -> Any:
        out = np.zeros(shape, dtype=self.dtype(values))
        if basic:
            out[self._index(index)] = values._array
        else:
            np.add.at(out, self._index(index), values._array)
        return self._wrap(out, device=values.device)

    def any_nan(self, array: Any) -> bool:
        return bool(self.xp.any(self.xp.isnan(array)))

    def zero_where(self, cond: Any, array: Any) -> Any:
        return self.xp.where(cond, self.xp.zeros((), dtype=array.dtype, device=array.device), array)

    def relu(self, array: Any) -> Any:
        return self.xp.maximum(array, 0)

    # the simulated device's kernels for fmod and einsum run numpy's on the memory inside
    def fmod(self, a: Any, b: Any) -> Any:
        return self._wrap(np.fmod(a._array, b._array if isinstance(b, self._array_type) else b), device=a.device)

    def einsum(self, equation: str, *arrays: Any) -> Any:
        out = np.einsum(equation, *(a._array for a in arrays), optimize=len(arrays) > 2)
        return self._wrap(np.asarray(out), device=arrays[0].device)

    # ---- the simulated device's kernels are numpy's, on the arrays inside
    def scatter_multiply(self, out: Any, index: Any, values: Any) -> Any:
        NUMPY.scatter_multiply(out._array, self._index(index), values._array if self.is_array(values) else values)
        return out

    def scatter_extreme(self, out: Any, index: Any, values: Any, is_max: bool) -> Any:
        NUMPY.scatter_extreme(out._array, self._index(index), values._array if self.is_array(values) else values,
                              is_max)
        return out

    def argsort(self, array: Any, axis: int, descending: bool) -> Any:
        return self._wrap(NUMPY.argsort(array._array, axis, descending), device=array.device)

    def unique(self, array: Any) -> tuple[Any, Any, Any]:
        return tuple(self._wrap(np.asarray(a), device=array.device) for a in NUMPY.unique(array._array))  # type: ignore[return-value]

    def matmul(self, a: Any, b: Any) -> Any:
        return self.xp.matmul(a, b)

    def owns_memory(self, array: Any) -> bool:
        # the memory is the numpy array inside: its own (no base, writable), and held by this wrapper
        # alone (``xp.asarray(a)`` makes a second wrapper around the same numpy array)
        inner = array._array
        return inner.base is None and inner.flags.writeable and _getrefcount(inner) <= self._inner_unshared

    # the simulated device's memory is the numpy array inside each of its arrays: a numpy view
    # of it, wrapped, is a strict array over the same memory (Note [Views share memory on every device])
    def view(self, array: Any, fn: Any, *args: Any) -> Any:
        return self._wrap(fn(array._array, *args), device=array.device)

    def broadcast_view(self, array: Any, shape: tuple[int, ...]) -> Any:
        return self._wrap(NUMPY.broadcast_view(array._array, shape), device=array.device)

    def strided_view(self, array: Any, shape: tuple[int, ...], strides: tuple[int, ...], offset: int) -> Any:
        return self._wrap(_strided(array._array, shape, strides, offset), device=array.device)

    def copy(self, array: Any, order: str = "K") -> Any:
        return self._wrap(array._array.copy(order=order), device=array.device)

    def recycled_copy(self, array: Any) -> Any:
        return self.copy(array, "C")

    def is_contiguous(self, array: Any) -> bool:
        return array._array.flags.c_contiguous

    def strides(self, array: Any) -> tuple[int, ...]:
        return array._array.strides

    def address(self, array: Any) -> int:
        return array._array.__array_interface__["data"][0]

    def may_share_memory(self, a: Any, b: Any) -> bool:
        return bool(np.may_share_memory(a._array, b._array))


class CupyBackend(_NamespaceReductions, ArrayBackend):
    """CuPy on one GPU, through ``array_api_compat`` (Note [One array backend per device])."""

    name = "cupy"

    def __init__(self, index: int) -> None:
        try:
            import cupy
            import cupyx
        except ImportError as exc:  # pragma: no cover - depends on the machine
            raise RuntimeError(
                "cuda devices need CuPy: install asyncgrad with the 'cuda' extra (pip install 'asyncgrad[cuda]')"
            ) from exc
        _check_ordinal(cupy, index)
        from array_api_compat import cupy as compat

        STREAMS_ACTIVE[0] = True  # Note [Streams per device]: CuPy's current stream is looked up from now on
        self.cupy = cupy
        self._scatter_add = cupyx.scatter_add
        self.xp = compat
        self.index = index
        register(cupy.ndarray, self)

    def is_array(self, value: Any) -> bool:
        return isinstance(value, self.cupy.ndarray)

    def into(self, name: str, out: Any, a: Any, b: Any) -> None:
        getattr(self.cupy, name)(a, b, out=out)

    def from_host(self, host: Any, dtype: Any = None, copy: bool | None = None) -> Any:
        with self.cupy.cuda.Device(self.index):
            return self.cupy.array(host, dtype=dtype, copy=True if copy is None else copy)

    def to_host(self, array: Any) -> np.ndarray:
        return array.get() if isinstance(array, self.cupy.ndarray) else np.asarray(array)

    def zeros(self, shape: tuple[int, ...], dtype: np.dtype) -> Any:
        with self.cupy.cuda.Device(self.index):
            return self.cupy.zeros(shape, dtype=dtype)

    def ones(self, shape: tuple[int, ...], dtype: np.dtype) -> Any:
        with self.cupy.cuda.Device(self.index):
            return self.cupy.ones(shape, dtype=dtype)

    def full(self, shape: tuple[int, ...], value: Any, dtype: np.dtype) -> Any:
        with self.cupy.cuda.Device(self.index):
            return self.cupy.full(shape, value, dtype=dtype)

    def empty(self, shape: tuple[int, ...], dtype: np.dtype) -> Any:
        with self.cupy.cuda.Device(self.index):
            return self.cupy.empty(shape, dtype=dtype)

    def arange(self, stop: int, dtype: np.dtype) -> Any:
        with self.cupy.cuda.Device(self.index):
            return self.cupy.arange(stop, dtype=dtype)

    def getitem(self, array: Any, index: Any) -> Any:
        return array[index]

    # Note [The array's own GPU]: every cuda:N's arrays are cupy.ndarray, so ``backend_of`` finds the first
    # CupyBackend made, whatever the array's GPU: a primitive that gets an array works on that array's
    # device (``array.device``), not on ``self.index``, or cuda:1's formulas would allocate on GPU 0
    def index_add(self, shape: tuple[int, ...], index: Any, basic: bool, values: Any) -> Any:
        with values.device:
            out = self.cupy.zeros(shape, dtype=values.dtype)
            if basic:
                out[index] = values
            else:
                self._scatter_add(out, index, values)
        return out

    def any_nan(self, array: Any) -> bool:
        with array.device:  # Note [The array's own GPU]
            return bool(self.cupy.isnan(array).any())

    def zero_where(self, cond: Any, array: Any) -> Any:
        with array.device:  # a GPU's where does not branch (Note [Branchless zero_where])
            return self.cupy.where(cond, array.dtype.type(0), array)

    def relu(self, array: Any) -> Any:
        with array.device:  # Note [The array's own GPU]
            return self.cupy.maximum(array, 0)

    # CuPy's own kernels for what the standard lacks
    def erf(self, array: Any) -> Any:
        from cupyx.scipy import special as cupy_special

        return cupy_special.erf(array)

    def erfc(self, array: Any) -> Any:
        from cupyx.scipy import special as cupy_special

        return cupy_special.erfc(array)

    def erfinv(self, array: Any) -> Any:
        from cupyx.scipy import special as cupy_special

        return cupy_special.erfinv(array)

    def _cupyx_special(self, name: str, *args: Any) -> Any:
        from cupyx.scipy import special as cupy_special

        return getattr(cupy_special, name)(*args)

    def lgamma(self, array: Any) -> Any:
        return self._cupyx_special("gammaln", array)

    def digamma(self, array: Any) -> Any:
        return self._cupyx_special("digamma", array)

    def polygamma(self, n: int, array: Any) -> Any:
        # cupyx's polygamma takes the order as an array (it tests ``n == 0`` elementwise), not a Python int
        return self._cupyx_special("polygamma", self.cupy.full(array.shape, n, dtype=array.dtype), array)

    def i0(self, array: Any) -> Any:
        return self._cupyx_special("i0", array)

    def i0e(self, array: Any) -> Any:
        return self._cupyx_special("i0e", array)

    def i1(self, array: Any) -> Any:
        return self._cupyx_special("i1", array)

    def i1e(self, array: Any) -> Any:
        return self._cupyx_special("i1e", array)

    def fmod(self, a: Any, b: Any) -> Any:
        return self.cupy.fmod(a, b)

    def einsum(self, equation: str, *arrays: Any) -> Any:
        return self.cupy.einsum(equation, *arrays)

    def scatter_extreme(self, out: Any, index: Any, values: Any, is_max: bool) -> Any:
        host = self.to_host(out)
        host_index = tuple(self.to_host(i) if self.is_array(i) else i for i in index)
        NUMPY.scatter_extreme(host, host_index, self.to_host(values) if self.is_array(values) else values, is_max)
        with out.device:  # Note [The array's own GPU]
            out[...] = self.cupy.asarray(host)
        return out

    # ---- CuPy's sort is stable (a radix sort); it has no multiply-at, which goes through the host
    def scatter_multiply(self, out: Any, index: Any, values: Any) -> Any:
        host = self.to_host(out)
        host_index = tuple(self.to_host(i) if self.is_array(i) else i for i in index)
        np.multiply.at(host, host_index, self.to_host(values) if self.is_array(values) else values)
        with out.device:  # Note [The array's own GPU]
            out[...] = self.cupy.asarray(host)
        return out

    def argsort(self, array: Any, axis: int, descending: bool) -> Any:
        cupy = self.cupy
        with array.device:  # Note [The array's own GPU]
            if not descending:
                return cupy.argsort(array, axis=axis)
            n = array.shape[axis]
            return (n - 1) - cupy.flip(cupy.argsort(cupy.flip(array, axis=axis), axis=axis), axis=axis)

    def unique(self, array: Any) -> tuple[Any, Any, Any]:
        with array.device:  # Note [The array's own GPU]
            values, inverse, counts = self.cupy.unique(array.reshape(-1), return_inverse=True, return_counts=True)
        return values, inverse.reshape(array.shape).astype(np.int64), counts.astype(np.int64)

    def matmul(self, a: Any, b: Any) -> Any:
        with a.device:  # Note [The array's own GPU]
            return self.xp.matmul(a, b)

    def owns_memory(self, array: Any) -> bool:
        # CuPy arrays have no read-only flag; memory CuPy did not allocate (another library's, through
        # __cuda_array_interface__ or DLPack) is an UnownedMemory, shared with that library
        return array.base is None and not isinstance(array.data.mem, self.cupy.cuda.UnownedMemory)

    # view, is_contiguous and strides are numpy's: CuPy's ndarray views share memory as numpy's do
    def broadcast_view(self, array: Any, shape: tuple[int, ...]) -> Any:
        return self.cupy.broadcast_to(array, shape)  # CuPy arrays have no read-only flag: writable, as torch's

    def strided_view(self, array: Any, shape: tuple[int, ...], strides: tuple[int, ...], offset: int) -> Any:
        # CuPy's strided arrays (and its as_strided) keep no ``base``: ``.view()`` gives one, so that
        # owns_memory never takes this view of another array's memory for memory of its own
        return self.cupy.ndarray(shape, array.dtype, memptr=array.data + offset, strides=strides).view()

    def copy(self, array: Any, order: str = "K") -> Any:
        with array.device:  # Note [The array's own GPU]
            return array.copy(order=order)

    def recycled_copy(self, array: Any) -> Any:
        return self.copy(array, "C")

    def address(self, array: Any) -> int:
        return array.data.ptr

    def may_share_memory(self, a: Any, b: Any) -> bool:
        return bool(self.cupy.may_share_memory(a, b))


def _check_ordinal(cupy: Any, index: int) -> None:
    """torch's errors for a cuda device that this machine does not have (no GPU, or too few)."""
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except cupy.cuda.runtime.CUDARuntimeError:  # no driver, or no device the driver can use
        count = 0
    if count == 0:
        raise RuntimeError("No CUDA GPUs are available")
    if index >= count:
        raise RuntimeError("CUDA error: invalid device ordinal")


NUMPY = ArrayBackend()

_BY_TYPE: dict[type, ArrayBackend] = {np.ndarray: NUMPY}
"""The backend of each array type: formulas that hold only arrays find theirs here (a dict
lookup; ``array_api_compat.array_namespace`` costs microseconds, too much per node)."""


def register(array_type: type, backend: ArrayBackend) -> None:
    _BY_TYPE.setdefault(array_type, backend)


def backend_of(array: Any) -> ArrayBackend:
    """The backend an array belongs to (numpy's for numpy scalars and Python numbers)."""
    return _BY_TYPE.get(array.__class__, NUMPY)
