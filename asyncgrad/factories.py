"""Tensor factories, in torch's argument order, and the random samplers.

Every sampler takes ``generator=`` (an ``ag.Generator`` or a numpy Generator; default: the
global one, asyncgrad/random.py).

Note [Random numbers come from the host]: on every device the numbers are drawn by that numpy
Generator on the host and the sample is transferred with ``dev.asarray``, so one seed gives the
same values on cpu, sim:N and cuda:N (a CuPy device draws on the host too: one stream per
ag.Generator, whichever device consumes it, at the price of a host-to-device copy). The in-place
samplers (``uniform_``, ``normal_``, ``bernoulli_``) go through ``apply_inplace`` like every
in-place op, so they bump the version counter and rebase a non-leaf's grad_fn (Note [Random ops
and autograd]).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from asyncgrad import _layout, _validate, dtypes, random
from asyncgrad._convert import to_array
from asyncgrad.devices import Device
from asyncgrad.devices import device as as_device
from asyncgrad.graph.recorder import PROFILING, note_factory
from asyncgrad.ops._node import ArrayMath, OpNode, plain, record, same_device
from asyncgrad.ops.elementwise import broadcast_error
from asyncgrad.ops.inplace import apply_inplace
from asyncgrad.random import manual_seed, numpy_generator  # noqa: F401  (manual_seed: re-exported)
from asyncgrad.tensor import Tensor, scalar_type_name

# the default generator's numpy Generator, for code that holds it (Note [One numpy Generator per ag.Generator])
_rng = [random.default_generator.numpy]


def _leaf(array: Any, dev: Device, requires_grad: Any, fn: str) -> Tensor:
    """The new leaf; ``requires_grad=None`` passes as False, as torch's factories (not ``tensor``) take it."""
    t = plain(array, dev)
    if PROFILING:  # Note [Forward ops reach the profiler through record] in graph/recorder.py
        note_factory(fn, t)
    if requires_grad is not False and requires_grad is not None:
        if not _validate.bool_arg(requires_grad, fn, "requires_grad"):
            return t
        if t.dtype.kind != "f":
            # torch words the factories' refusal apart from requires_grad_()'s
            raise RuntimeError("Only Tensors of floating point and complex dtype can require gradients")
        t.requires_grad_(True)
    return t


def tensor(data: Any, dtype=None, device: str | Device | None = None, requires_grad: bool = False) -> Tensor:
    """A new leaf; the data is always copied."""
    if requires_grad is None:
        raise TypeError("tensor(): argument 'requires_grad' must be bool, not NoneType")
    dev = as_device(device)
    return _leaf(to_array(data, dtype, dev), dev, requires_grad, "tensor")


def from_numpy(array: np.ndarray) -> Tensor:
    """A leaf sharing memory with ``array``."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(array).__name__})")
    _validate.check_array_dtype(array)
    return plain(array, as_device("cpu"))


def _filled(fill: str, size: tuple, dtype, device, requires_grad: bool, value: Any = None,
            fn: str | None = None) -> Tensor:
    fn = fn or fill
    shape = _validate.new_shape(size, fn)
    dtype = _validate.dtype_arg(dtype, fn) or dtypes.get_default_dtype()
    dev = as_device(device)
    if fill == "full":
        array = dev.backend.full(shape, value, dtype)
    else:
        array = getattr(dev.backend, fill)(shape, dtype)
    return _leaf(array, dev, requires_grad, fn)


def zeros(*size, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A tensor of zeros of the given size (``zeros(2, 3)`` or ``zeros((2, 3))``), as torch's."""
    return _filled("zeros", size, dtype, device, requires_grad)


def ones(*size, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A tensor of ones of the given size (``ones(2, 3)`` or ``ones((2, 3))``), as torch's."""
    return _filled("ones", size, dtype, device, requires_grad)


def empty(*size, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """An uninitialised tensor of the given size, as torch's (its values are whatever the memory held)."""
    return _filled("empty", size, dtype, device, requires_grad)


def _fill_dtype(fill_value: Any) -> np.dtype:
    """torch's dtype for a fill value: bool, int64 for integers, else the default float."""
    if isinstance(fill_value, (bool, np.bool_)):
        return dtypes.bool
    if isinstance(fill_value, (int, np.integer)):
        return dtypes.int64
    return dtypes.get_default_dtype()


def full(size, fill_value, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A plain int ``size`` is taken as ``(size,)`` (torch insists on a tuple)."""
    _validate.number_arg(fill_value, "full", "fill_value", 2)
    if dtype is None:
        dtype = _fill_dtype(fill_value)
    return _filled("full", (size,), dtype, device, requires_grad, fill_value)


# eye, arange and linspace compute their values with numpy on the host and transfer them
# (``dev.asarray``): numpy's values are the ones the tests check against torch's, so every device
# gets exactly those, at the price of one host-to-device copy (as for random numbers).
def eye(n: int, m: int | None = None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """The ``n`` x ``m`` identity matrix (``m`` defaults to ``n``), as torch's."""
    n = _validate.int_arg(n, "eye", "n", 1)
    if n < 0:
        raise RuntimeError(f"n must be greater or equal to 0, got {n}")
    if m is not None:
        m = _validate.int_arg(m, "eye", "m", 2)
        if m < 0:
            raise RuntimeError(f"m must be greater or equal to 0, got {m}")
    dtype = _validate.dtype_arg(dtype, "eye") or dtypes.get_default_dtype()
    dev = as_device(device)
    return _leaf(dev.asarray(np.eye(n, m, dtype=dtype)), dev, requires_grad, "eye")


def _triangle_indices(fn: str, row: int, col: int, offset: int, dtype: Any, device: Any, upper: bool) -> Tensor:
    row = _validate.int_arg(row, fn, "row", 1)
    col = _validate.int_arg(col, fn, "col", 2)
    offset = _validate.int_arg(offset, fn, "offset", 3)
    if row < 0:
        raise RuntimeError(f"row must be non-negative, got{row}")  # torch's words, its missing space included
    if col < 0:
        raise RuntimeError(f"col must be non-negative, got{col}")
    dtype = _validate.dtype_arg(dtype, fn) or dtypes.int64
    if dtype.kind not in "iu":
        raise RuntimeError(f'"{fn}" not implemented for \'{scalar_type_name(dtype)}\'')
    pick = np.triu_indices if upper else np.tril_indices
    indices = np.stack(pick(row, offset, col)).astype(dtype) if row and col else np.zeros((2, 0), dtype)
    dev = as_device(device)
    return _leaf(dev.asarray(indices), dev, False, fn)


def triu_indices(row: int, col: int, offset: int = 0, *, dtype=None, device=None) -> Tensor:
    """torch's ``triu_indices``: the (row, column) coordinates of the upper triangle of a ``row`` x
    ``col`` matrix, on and above diagonal ``offset``, as a ``2 x N`` tensor in row-major order (int64
    unless ``dtype`` says another integer type)."""
    return _triangle_indices("triu_indices", row, col, offset, dtype, device, True)


def tril_indices(row: int, col: int, offset: int = 0, *, dtype=None, device=None) -> Tensor:
    """torch's ``tril_indices``: the (row, column) coordinates of the lower triangle of a ``row`` x
    ``col`` matrix, on and below diagonal ``offset``, as a ``2 x N`` tensor in row-major order (int64
    unless ``dtype`` says another integer type)."""
    return _triangle_indices("tril_indices", row, col, offset, dtype, device, False)


def arange(start, end=None, step=1, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """``arange(end)`` or ``arange(start, end, step=1)``: values from ``start`` up to, not including,
    ``end``; integers give ``int64``, any float the default float dtype, as torch's."""
    if end is None:
        start, end = 0, start
        _validate.number_arg(end, "arange", "end", 1)
    else:
        _validate.number_arg(start, "arange", "start", 1)
        _validate.number_arg(end, "arange", "end", 2)
    _validate.number_arg(step, "arange", "step", 3)
    if not (np.isfinite(start) and np.isfinite(end)):
        raise RuntimeError(f"unsupported range: {start} -> {end}")
    if step == 0:
        raise RuntimeError("step must be nonzero")
    if (end - start) * step < 0:
        raise RuntimeError("upper bound and lower bound inconsistent with step sign")
    if dtype is None:
        is_float = any(isinstance(v, (float, np.floating)) for v in (start, end, step))
        dtype = dtypes.get_default_dtype() if is_float else dtypes.int64
    dtype = _validate.dtype_arg(dtype, "arange")
    dev = as_device(device)
    return _leaf(dev.asarray(np.arange(start, end, step, dtype=dtype)), dev, requires_grad, "arange")


def linspace(start, end, steps: int, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """``steps`` values evenly spaced from ``start`` to ``end``, both included, as torch's."""
    _validate.number_arg(start, "linspace", "start", 1)
    _validate.number_arg(end, "linspace", "end", 2)
    steps = _validate.int_arg(steps, "linspace", "steps", 3)
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    dtype = _validate.dtype_arg(dtype, "linspace") or dtypes.get_default_dtype()
    dev = as_device(device)
    return _leaf(dev.asarray(np.linspace(start, end, steps, dtype=dtype)), dev, requires_grad, "linspace")


# Note [Random ops and autograd]: as in torch, a random op whose inputs require grad records a
# node (NormalBackward, BernoulliBackward, UniformBackward0 for the in-place fills) whose
# gradients are zeros of each input's shape: the samples are not reparameterised, so the
# gradient with respect to mean, std or p is zero, not the pathwise derivative.
def _float_kind(dtype: np.dtype, kernel: str) -> None:
    """torch's refusal to draw floats into an integer or bool tensor."""
    if np.dtype(dtype).kind != "f":
        raise NotImplementedError(f'"{kernel}" not implemented for \'{scalar_type_name(dtype)}\'')


def _random(kind: str, size: tuple, dtype, device, requires_grad: bool, fn: str | None = None,
            generator: Any = None) -> Tensor:
    fn = fn or kind
    shape = _validate.new_shape(size, fn)
    dtype = _validate.dtype_arg(dtype, fn) or dtypes.get_default_dtype()
    _float_kind(dtype, "normal_kernel_cpu" if kind == "randn" else "check_uniform_bounds")
    dev = as_device(device)
    if requires_grad is not False and requires_grad is not None:
        _validate.bool_arg(requires_grad, fn, "requires_grad")
    rng = numpy_generator(generator, fn)
    host = rng.standard_normal(shape) if kind == "randn" else rng.random(shape)
    return _leaf(dev.asarray(host, dtype=dtype), dev, requires_grad, fn)


def randn(*size, generator=None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """Samples of the standard normal distribution, of the given size; ``generator=`` draws from an
    ``ag.Generator`` instead of the default one. The numbers are numpy's, not torch's, for one seed."""
    return _random("randn", size, dtype, device, requires_grad, generator=generator)


def rand(*size, generator=None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """Samples of the uniform distribution on [0, 1), of the given size; ``generator=`` as ``randn``."""
    return _random("rand", size, dtype, device, requires_grad, generator=generator)


def randint(low: int, high: int | None = None, size: tuple | None = None, *, generator=None, dtype=None,
            device=None, requires_grad: bool = False) -> Tensor:
    """``randint(high, size)`` or ``randint(low, high, size)``: the size is required, as torch's; a
    plain int ``size`` is taken as ``(size,)`` (torch insists on a tuple)."""
    if isinstance(high, (tuple, list)) and size is None:
        high, size = None, high
    if size is None and high is not None:  # torch reads randint(a, b) as (high, size)
        raise TypeError(f"randint(): argument 'size' (position 2) must be tuple of ints, not "
                        f"{_validate.type_label(high)}")
    if size is None:
        raise TypeError(f"randint() received an invalid combination of arguments - got "
                        f"({_validate.type_label(low)}), but expected one "
                        "of:\n * (int high, tuple of ints size, *, Generator generator, dtype dtype, device device, "
                        "bool requires_grad)\n * (int low, int high, tuple of ints size, *, Generator generator, "
                        "dtype dtype, device device, bool requires_grad)")
    if high is None:
        low, high = 0, _validate.int_arg(low, "randint", "high", 1)
    else:
        low, high = _validate.int_arg(low, "randint", "low", 1), _validate.int_arg(high, "randint", "high", 2)
    shape = _validate.new_shape((size,), "randint")
    return _integers(low, high, shape, dtype or dtypes.int64, device, requires_grad, generator, "randint")


def _integers(low: int, high: int, shape: tuple, dtype, device, requires_grad: Any, generator: Any,
              fn: str) -> Tensor:
    if low >= high:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={low} >= to={high}")
    dtype = _validate.dtype_arg(dtype, fn)
    dev = as_device(device)
    host = numpy_generator(generator, fn).integers(low, high, size=shape)
    return _leaf(dev.asarray(host, dtype=dtype), dev, requires_grad, fn)


def randperm(n: int, *, generator=None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A random permutation of ``0 .. n-1`` (int64 unless ``dtype`` says otherwise)."""
    n = _validate.int_arg(n, "randperm", "n", 1)
    if n < 0:
        raise RuntimeError(f"Trying to create tensor with negative dimension {n}: [{n}]")
    dtype = _validate.dtype_arg(dtype, "randperm") or dtypes.int64
    if np.dtype(dtype).kind in "iu" and n > 0 and n - 1 > np.iinfo(dtype).max:
        raise RuntimeError(f"value cannot be converted to type {np.dtype(dtype).name}_t without overflow")
    dev = as_device(device)
    host = numpy_generator(generator, "randperm").permutation(n)
    return _leaf(dev.asarray(host, dtype=dtype), dev, requires_grad, "randperm")


class _ZeroGradNode(OpNode):
    """Zeros of each input's shape, in the gradient's dtype and on its device, for every input
    (Note [Random ops and autograd]). Each subclass declares the one field, ``shapes`` (the
    inputs' shapes), which ``record`` fills."""

    __slots__ = ()

    def backward(self, F, g):
        backend = self._input_meta[0][2].backend  # the output's device: the gradient's, where the zeros go
        dtype = backend.dtype(g if F is ArrayMath else g.data)
        return tuple(F.constant(backend.zeros(shape, dtype), g) if self.needs(i) else None
                     for i, shape in enumerate(self.shapes))


class NormalBackward1(_ZeroGradNode):  # normal(Tensor mean, float std)
    __slots__ = ("shapes",)


class NormalBackward2(_ZeroGradNode):  # normal(float mean, Tensor std)
    __slots__ = ("shapes",)


class NormalBackward3(_ZeroGradNode):  # normal(Tensor mean, Tensor std)
    __slots__ = ("shapes",)


class BernoulliBackward0(_ZeroGradNode):  # bernoulli(Tensor p)
    __slots__ = ("shapes",)


def _sampled(cls: type, inputs: tuple, out: Any, dev: Device) -> Tensor:
    """The sample, with a zero-gradient node when an input requires grad (Note [Random ops and autograd])."""
    return record(cls, inputs, out, dev, tuple(t.shape for t in inputs))


def _host(t: Tensor) -> np.ndarray:
    return np.asarray(t.device.to_host(t.data))


def normal(mean: Any, std: Any = 1.0, size: Any = None, *, generator=None, dtype=None, device=None,
           requires_grad: bool = False, layout: Any = None, pin_memory: bool = False) -> Tensor:
    """``normal(mean, std)`` with a tensor mean and/or std (broadcast together), or
    ``normal(mean, std, size)`` with two floats (and torch's factory keywords)."""
    _layout.layout_arg(layout, "normal")
    rng = numpy_generator(generator, "normal")
    mean_t, std_t = isinstance(mean, Tensor), isinstance(std, Tensor)
    if not mean_t and not std_t:
        if size is None:
            raise TypeError("normal() received an invalid combination of arguments - got (float, float), but "
                            "expected (float mean, float std, tuple of ints size)")
        _validate.number_arg(mean, "normal", "mean", 1)
        _validate.number_arg(std, "normal", "std", 2)
        if std < 0:
            raise RuntimeError(f"normal expects std >= 0.0, but found std {std:g}")
        shape = _validate.new_shape((size,), "normal")
        dtype = _validate.dtype_arg(dtype, "normal") or dtypes.get_default_dtype()
        _float_kind(dtype, "normal_kernel_cpu")
        dev = as_device(device)
        return _leaf(dev.asarray(rng.normal(mean, std, shape), dtype=dtype), dev, requires_grad, "normal")
    if size is not None:
        raise TypeError("normal() received an invalid combination of arguments: size is taken only with a float "
                        "mean and a float std")
    tensors = tuple(t for t in (mean, std) if isinstance(t, Tensor))
    for t in tensors:
        _float_kind(t.dtype, "normal_kernel_cpu")
    if std_t:
        if (_host(std) < 0).any():
            raise RuntimeError("normal expects all elements of std >= 0.0")
    else:
        _validate.number_arg(std, "normal", "std", 2)
        if std < 0:
            raise RuntimeError(f"normal expects std >= 0.0, but found std {std:g}")
    if mean_t and std_t:
        dev = same_device(mean, std)
        try:
            shape = np.broadcast_shapes(mean.shape, std.shape)
        except ValueError:
            raise broadcast_error(mean.shape, std.shape) from None
        out_dtype = np.result_type(mean.dtype, std.dtype)
    else:
        dev, shape, out_dtype = tensors[0].device, tensors[0].shape, tensors[0].dtype
    m = _host(mean) if mean_t else mean
    s = _host(std) if std_t else std
    out = dev.asarray(rng.standard_normal(shape) * s + m, dtype=out_dtype)
    cls = NormalBackward3 if mean_t and std_t else NormalBackward1 if mean_t else NormalBackward2
    return _sampled(cls, tensors, out, dev)


def _check_p(p: Any, fn: str = "bernoulli_") -> None:
    if not 0 <= p <= 1:
        raise RuntimeError(f"{fn} expects p to be in [0, 1], but got p={p:g}")


_P_IN = ("Expected p_in >= 0 && p_in <= 1 to be true, but got false.  (Could this error message be improved?  If so, "
         "please report an enhancement request to PyTorch.)")


def bernoulli(input: Tensor, p: float | None = None, *, generator=None) -> Tensor:
    """0/1 samples in ``input``'s dtype, each 1 with probability ``input`` (or ``p``, when given)."""
    _validate.tensor_arg(input, "bernoulli")
    rng = numpy_generator(generator, "bernoulli")
    if p is not None:
        _validate.number_arg(p, "bernoulli", "p", 2)
        _check_p(p)
        probs: Any = p
    else:
        _float_kind(input.dtype, "bernoulli_tensor_cpu_p_")
        probs = _host(input)
        if not ((probs >= 0) & (probs <= 1)).all():
            raise RuntimeError(_P_IN)
    out = input.device.asarray(rng.random(input.shape) < probs, dtype=input.dtype)
    return _sampled(BernoulliBackward0, (input,), out, input.device)


def multinomial(input: Tensor, num_samples: int, replacement: bool = False, *, generator=None) -> Tensor:
    """Category indices drawn from the rows of ``input`` (weights, not necessarily normalised)."""
    _validate.tensor_arg(input, "multinomial")
    num_samples = _validate.int_arg(num_samples, "multinomial", "num_samples", 2)
    if input.dtype.kind != "f":
        raise RuntimeError(f"multinomial only supports floating-point dtypes for input, got: "
                           f"{scalar_type_name(input.dtype)}")
    if input.ndim not in (1, 2):
        raise RuntimeError("prob_dist must be 1 or 2 dim")
    categories = input.shape[-1]
    if num_samples <= 0:
        raise RuntimeError("cannot sample n_sample <= 0 samples")
    if not replacement and num_samples > categories:
        raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without replacement")
    if categories > 1 << 24:
        raise RuntimeError("number of categories cannot exceed 2^24")
    weights = _host(input).astype(np.float64).reshape(-1, categories)
    if not (np.isfinite(weights) & (weights >= 0)).all():
        raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
    totals = weights.sum(axis=1)
    if (totals <= 0).any():
        raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
    rng = numpy_generator(generator, "multinomial")
    rows = []
    for row, total in zip(weights, totals):
        if replacement:
            rows.append(rng.choice(categories, num_samples, replace=True, p=row / total))
        else:
            rows.append(_without_replacement(rng, row, num_samples))
    out = np.stack(rows).reshape(input.shape[:-1] + (num_samples,))
    return plain(input.device.asarray(out, dtype=dtypes.int64), input.device)


def _without_replacement(rng: np.random.Generator, weights: np.ndarray, k: int) -> np.ndarray:
    """Successive draws without replacement (the Gumbel top-k trick, as torch's CPU kernel does
    with exponential keys): categories of weight zero come last, in random order, as in torch
    when fewer than ``k`` categories have weight."""
    with np.errstate(divide="ignore"):
        keys = np.log(weights) - np.log(rng.exponential(size=weights.shape))
    order = np.lexsort((rng.random(weights.shape), -keys))
    return order[:k]


def _like(t: Tensor, dtype, device, fn: str) -> tuple:
    _validate.tensor_arg(t, fn)
    dtype = _validate.dtype_arg(dtype, fn)
    return t.shape, dtype if dtype is not None else t.dtype, device if device is not None else t.device


def _laid_out(out: Tensor, t: Tensor, memory_format: _layout.memory_format, fn: str) -> Tensor:
    """The new tensor ``out`` of a ``*_like(t)`` in ``t``'s layout for ``memory_format`` (torch's
    empty_like: preserve_format, the default, keeps a dense layout and a strided one's order).
    ``out`` is a fresh row-major leaf that nothing else holds, so its array is replaced."""
    if memory_format is not _layout.preserve_format:
        _layout.format_arg(memory_format, fn)
    elif t.device.backend.is_contiguous(t.data):
        return out
    src = t.data
    shape = tuple(src.shape)
    strides = _layout.strides_for(shape, _layout.element_strides(t.device.backend.strides(src), t.dtype.itemsize),
                                  memory_format)
    if strides != _layout.contiguous_strides(shape):
        out._data = out.device.backend.copy_strided(out.data, strides)
    return out


_PRESERVE = _layout.preserve_format


def zeros_like(t: Tensor, dtype=None, device=None, requires_grad: bool = False, *,
               memory_format=_PRESERVE) -> Tensor:
    """Zeros of ``t``'s shape, dtype and device (each may be overridden), as torch's."""
    shape, dtype, device = _like(t, dtype, device, "zeros_like")
    out = _filled("zeros", shape, dtype, device, requires_grad, fn="zeros_like")
    return _laid_out(out, t, memory_format, "zeros_like")


def ones_like(t: Tensor, dtype=None, device=None, requires_grad: bool = False, *, memory_format=_PRESERVE) -> Tensor:
    """Ones of ``t``'s shape, dtype and device (each may be overridden), as torch's."""
    shape, dtype, device = _like(t, dtype, device, "ones_like")
    return _laid_out(_filled("ones", shape, dtype, device, requires_grad, fn="ones_like"), t, memory_format,
                     "ones_like")


def full_like(t: Tensor, fill_value, dtype=None, device=None, requires_grad: bool = False, *,
              memory_format=_PRESERVE) -> Tensor:
    """``fill_value`` in ``t``'s shape, dtype and device (each may be overridden), as torch's."""
    shape, dtype, device = _like(t, dtype, device, "full_like")
    _validate.number_arg(fill_value, "full_like", "fill_value", 2)
    out = _filled("full", shape, dtype, device, requires_grad, fill_value, fn="full_like")
    return _laid_out(out, t, memory_format, "full_like")


def empty_like(t: Tensor, dtype=None, device=None, requires_grad: bool = False, *,
               memory_format=_PRESERVE) -> Tensor:
    """An uninitialised tensor of ``t``'s shape, dtype and device, as torch's."""
    shape, dtype, device = _like(t, dtype, device, "empty_like")
    out = _filled("empty", shape, dtype, device, requires_grad, fn="empty_like")
    return _laid_out(out, t, memory_format, "empty_like")


def empty_strided(size, stride, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """torch's empty_strided: an uninitialised tensor with these strides (elements), which may
    overlap (a stride 0) or leave gaps; its memory is just large enough."""
    shape = _validate.new_shape((size,), "empty_strided")
    strides = _validate.int_list((stride,), "empty_strided", "stride")
    if len(shape) != len(strides):
        raise RuntimeError(f"dimensionality of sizes ({len(shape)}) must match dimensionality of strides "
                           f"({len(strides)})")
    if any(s < 0 for s in strides):
        raise RuntimeError(f"Storage size calculation overflowed with sizes={list(shape)} and strides={list(strides)}")
    dtype = _validate.dtype_arg(dtype, "empty_strided") or dtypes.get_default_dtype()
    dev = as_device(device)
    return _leaf(dev.backend.empty_strided(shape, strides, dtype), dev, requires_grad, "empty_strided")


def randn_like(t: Tensor, dtype=None, device=None, requires_grad: bool = False, *, generator=None,
               memory_format=_PRESERVE) -> Tensor:
    """Standard normal samples of ``t``'s shape, dtype and device, as torch's."""
    shape, dtype, device = _like(t, dtype, device, "randn_like")
    out = _random("randn", shape, dtype, device, requires_grad, "randn_like", generator)
    return _laid_out(out, t, memory_format, "randn_like")


def rand_like(t: Tensor, dtype=None, device=None, requires_grad: bool = False, *, generator=None,
              memory_format=_PRESERVE) -> Tensor:
    """Uniform [0, 1) samples of ``t``'s shape, dtype and device, as torch's."""
    shape, dtype, device = _like(t, dtype, device, "rand_like")
    out = _random("rand", shape, dtype, device, requires_grad, "rand_like", generator)
    return _laid_out(out, t, memory_format, "rand_like")


def randint_like(t: Tensor, low: int = 0, high: int | None = None, *, generator=None, dtype=None, device=None,
                 requires_grad: bool = False, memory_format=_PRESERVE) -> Tensor:
    """``randint_like(t, high)`` or ``randint_like(t, low, high)``: ``t``'s shape and dtype."""
    if high is None:
        low, high = 0, _validate.int_arg(low, "randint_like", "high", 2)
    else:
        low, high = (_validate.int_arg(low, "randint_like", "low", 2),
                     _validate.int_arg(high, "randint_like", "high", 3))
    shape, dtype, device = _like(t, dtype, device, "randint_like")
    out = _integers(low, high, shape, dtype, device, requires_grad, generator, "randint_like")
    return _laid_out(out, t, memory_format, "randint_like")


class UniformBackward0(_ZeroGradNode):  # uniform_
    __slots__ = ("shapes",)


class NormalBackward0(_ZeroGradNode):  # normal_
    __slots__ = ("shapes",)


class BernoulliBackward1(_ZeroGradNode):  # bernoulli_(Tensor p)
    __slots__ = ("shapes",)


class BernoulliBackward2(_ZeroGradNode):  # bernoulli_(float p)
    __slots__ = ("shapes",)


def _refill(cls: type, x: Tensor, host: np.ndarray, others: tuple = ()) -> Tensor:
    """The out-of-place value of an in-place sampler, which apply_inplace writes into ``x``."""
    return _sampled(cls, (x,) + others, x.device.asarray(host, dtype=x.dtype), x.device)


_C_TYPES = {"float16": "c10::Half", "float32": "float", "float64": "double"}  # as torch's bounds check names them


def uniform_(self: Tensor, from_: float = 0.0, to: float = 1.0, *, generator=None) -> Tensor:
    """Fill with U(from, to), in place (a new version, as every in-place op)."""
    rng = numpy_generator(generator, "uniform_")
    _float_kind(self.dtype, "check_uniform_bounds")
    if from_ > to:
        raise RuntimeError(f"uniform_ expects to return a [from, to) range, but found from={from_:g} > to={to:g}")
    info = np.finfo(self.dtype)
    for name, bound in (("from", from_), ("to", to)):
        if not float(info.min) <= bound <= float(info.max):
            raise RuntimeError(f"{name} is out of bounds for {_C_TYPES[np.dtype(self.dtype).name]}")
    return apply_inplace(self, lambda x: _refill(UniformBackward0, x, rng.uniform(from_, to, x.shape)))


def normal_(self: Tensor, mean: float = 0.0, std: float = 1.0, *, generator=None) -> Tensor:
    """Fill with N(mean, std^2), in place."""
    rng = numpy_generator(generator, "normal_")
    _float_kind(self.dtype, "normal_kernel_cpu")
    if std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std:g}")
    return apply_inplace(self, lambda x: _refill(NormalBackward0, x, rng.normal(mean, std, x.shape)))


def bernoulli_(self: Tensor, p: Any = 0.5, *, generator=None) -> Tensor:
    """Fill with 0/1, 1 with probability ``p`` (a number, or a tensor broadcast to ``self``), in place."""
    rng = numpy_generator(generator, "bernoulli_")
    if isinstance(p, Tensor):
        probs = _host(p)
        if not ((probs >= 0) & (probs <= 1)).all():
            raise RuntimeError(_P_IN)
        try:
            probs = np.broadcast_to(probs, self.shape)
        except ValueError:
            raise broadcast_error(self.shape, p.shape) from None
        return apply_inplace(self, lambda x, q: _refill(BernoulliBackward1, x, rng.random(x.shape) < probs, (q,)), p)
    _validate.number_arg(p, "bernoulli_", "p", 1)
    _check_p(p)
    return apply_inplace(self, lambda x: _refill(BernoulliBackward2, x, rng.random(x.shape) < p))

