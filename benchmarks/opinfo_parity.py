"""asyncgrad against torch's own differentiable-op database (OpInfo), forward and gradient.

    python -m benchmarks.opinfo_parity [--ops add,nn.functional.pad] [--json out.json] [--max-samples N]

Every OpInfo of ``torch.testing._internal.common_methods_invocations.op_db`` that supports autograd
in float64 on the CPU is mapped to its asyncgrad callable (Note [From an OpInfo to asyncgrad]),
and every sample torch's tests give it (``op.sample_inputs("cpu", float64, requires_grad=True)``) is
run in both libraries (Note [What one sample compares]). Each op is then one of:

    agree         every sample agrees, forward and gradient
    wrong         some sample gives a silently different value, shape, dtype or gradient
    raises        asyncgrad raised (or hung) on some sample that torch computes
    missing       asyncgrad has no counterpart
    torch-wrong   differs from torch only where torch's gradient is not the derivative (``TORCH_IS_WRONG``:
                  torch's own gradcheck of it fails; asyncgrad's is checked against finite differences
                  in its tests and said in docs/differences.md)
    out-of-scope  complex-valued, sparse, fft, bfloat16/chalf, aten internals (Note [Out of scope])

The summary line is ``agree N of M in scope (P%)``, followed by the counts of each family; ``--json``
writes the whole classification, with the first failing sample of each op and its error.

Note [From an OpInfo to asyncgrad]
An OpInfo is named by ``op.name`` (``"add"``, ``"nn.functional.pad"``, ``"linalg.qr"``) and, for
variants of one op, ``op.variant_test_name``; the full name is ``name.variant``. The callable is,
in order: the full name's (then the name's) row of ``AG_CALLS``, for the OpInfos whose torch
callable is a lambda that reorders arguments or reaches a method or attribute; a dunder name is the
method of that name on the first input; else the name's path under ``asyncgrad`` (``torch.X`` ->
``ag.X``, ``nn.functional.X`` -> ``ag.nn.functional.X``, likewise ``linalg``, ``special``,
``masked``), when it is a function; else the method of the last name part on the first input, when
torch has a method variant. Nothing found: missing.

Note [What one sample compares]
The sample's tensors become asyncgrad leaves with the same values and ``requires_grad`` (one leaf
per torch tensor object, so an input passed twice stays one input); dtypes, ``torch.Size`` and
devices become asyncgrad's, and a torch module without parameters (a distance function) becomes
asyncgrad's module of that class with the same settings. Both forwards run; a sample torch itself
refuses is skipped. The outputs are flattened (tuples, lists, named tuples) and compared leaf by
leaf: shape, dtype and values (``equal_nan``, float64 tolerances ``rtol=1e-6, atol=1e-7``; after the sample's
``output_process_fn_grad`` when torch's tests apply one, which removes the sign freedom of
decompositions). Then every floating output that requires grad in torch gets one random
``grad_output`` (seeded, the same for both), and the input gradients of ``autograd.grad`` are
compared (``rtol=1e-5, atol=1e-6``; a gradient torch leaves undefined equals zeros). The ops in
``RANDOM`` draw from a generator asyncgrad does not share with torch: only their shapes and dtypes
are compared, forward and gradient. Each sample runs under a time limit (``--timeout``): a hang is
an error, never a stuck run. The ops in ``STORAGE_READERS`` read their input's storage, not only its
values (``as_strided`` of a view reaches the base's elements around it): a sample tensor that is a
view there becomes the same view (shape, strides, offset) of an asyncgrad copy of its whole storage.

Note [Out of scope]
As the issue that asked for this measure says: complex-valued ops (``fft.*``, ``view_as_complex``,
``polar``, ``conj*``, ``real``/``angle``, ``cfloat``...), sparse ops and layouts, bfloat16/chalf
conversions, and aten internals (names starting with ``_`` or ``native_``, ``torch.ops.*``, and
OpInfos whose callable is an aten overload or a ``*_backward`` kernel) are counted apart.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import math
import signal
import sys
import time
import types
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

import asyncgrad as ag

# --------------------------------------------------------------------------- the mapping table
# OpInfo full name (``name`` or ``name.variant``) -> (asyncgrad path, how the sample calls it), for
# the OpInfos whose torch callable is a lambda (Note [From an OpInfo to asyncgrad]). A path
# ``Tensor.X`` is the method or attribute ``X``; the adapter gets the resolved function (for a
# method, the unbound one) and the sample as torch's lambda gets it.
_CALL = lambda f, *args, **kwargs: f(*args, **kwargs)  # noqa: E731
_ATTRIBUTE = lambda f, x: f.__get__(x)  # noqa: E731  (a property's getter)

AG_CALLS: dict[str, tuple[str, Callable[..., Any]]] = {
    # torch's callable is a method lambda (``lambda x, *a, **k: x.contiguous(*a, **k)``)
    **{name: (f"Tensor.{name}", _CALL) for name in (
        "contiguous", "sum_to_size", "expand", "expand_as", "to", "reshape_as", "view", "view_as",
        "double", "float", "half", "unfold", "repeat")},
    "zero_": ("Tensor.zero_", lambda f, x: f(x.clone())),
    # attributes
    **{name: (f"Tensor.{name}", _ATTRIBUTE) for name in ("T", "H", "mT", "mH")},
    # torch's lambdas that reorder the sample's arguments
    **{f"polygamma.polygamma_n_{n}": ("polygamma", lambda f, x, n, **kw: f(n, x, **kw)) for n in range(5)},
    "special.polygamma.special_polygamma_n_0": ("special.polygamma", lambda f, x, n, **kw: f(n, x, **kw)),
    "where": ("where", lambda f, self, condition, other, **kw: f(condition, self, other, **kw)),
    "einsum": ("einsum", lambda f, tensors, equation: f(equation, tensors)),
    "nn.functional.embedding": ("nn.functional.embedding", lambda f, weight, idx, **kw: f(idx, weight, **kw)),
    "nn.functional.embedding_bag": ("nn.functional.embedding_bag",
                                    lambda f, weight, idx, **kw: f(idx, weight, **kw)),
    "normal.number_mean": ("normal", lambda f, std, mean, *args, **kw: f(mean, std, *args, **kw)),
    "svd_lowrank": ("svd_lowrank", lambda f, a, b, **kw: f(a @ b.mT, **kw)),
    "pca_lowrank": ("pca_lowrank", lambda f, a, b, **kw: f(a @ b.mT, **kw)),
    "linalg.lstsq.grad_oriented": ("linalg.lstsq", lambda f, a, b, driver: f(a, b, driver=driver)[:2]),
    "linalg.pinv.singular": ("linalg.pinv", lambda f, a, b: f(a @ b.mT)),
}


def _method(name: str) -> Callable[..., Any]:
    def call(x: Any, *args: Any, **kwargs: Any) -> Any:
        return getattr(x, name)(*args, **kwargs)

    call.__name__ = f"Tensor.{name}"
    return call


RANDOM = frozenset({
    "normal", "normal.number_mean", "bernoulli", "nn.functional.dropout", "nn.functional.dropout2d",
    "nn.functional.dropout3d", "nn.functional.alpha_dropout", "nn.functional.feature_alpha_dropout.with_train",
    "nn.functional.rrelu", "nn.functional.fractional_max_pool2d", "nn.functional.fractional_max_pool3d",
    "svd_lowrank", "pca_lowrank", "nn.functional.multi_head_attention_forward",
    "nn.functional.scaled_dot_product_attention",
})
"""Ops whose values depend on a random generator (Note [What one sample compares])."""

TORCH_IS_WRONG = {
    "as_strided_scatter": "gradient 0",
}
"""Ops whose only difference from torch may be the named input gradient, where torch 2.13's is not the
derivative: as_strided_scatter gives ``input`` the gradient read where ``src`` is written, not the rest
(tests/ops/test_scatters_and_windows.py checks asyncgrad's by finite differences)."""

STORAGE_READERS = frozenset({"as_strided", "as_strided_copy", "as_strided_scatter"})
"""Ops whose result depends on where the input lies in its storage (Note [What one sample compares])."""

_COMPLEX = frozenset({
    "conj", "conj_physical", "resolve_conj", "resolve_neg", "view_as_complex", "complex", "polar", "angle",
    "real", "imag", "cdouble", "cfloat", "chalf", "bfloat16", "to_sparse", "stft", "istft",
    "linalg.eig", "linalg.eigvals",  # complex results: asyncgrad refuses them, by design
})

_ATEN_KERNELS = frozenset({"grid_sampler_2d", "grid_sampler_3d", "constant_pad_nd"})
"""aten kernels that torch exposes under their own names; ``F.grid_sample`` and ``F.pad`` are the API."""

FAMILIES = ("torch", "nn.functional", "linalg", "special", "masked", "copy")


def full_name(op: Any) -> str:
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


def family(op: Any) -> str:
    """The issue's families: ``*_copy`` views apart, else the namespace (``torch`` for top level)."""
    if op.name.endswith("_copy"):
        return "copy"
    head = op.name.split(".")[0]
    if head == "nn":
        return "nn.functional"
    return head if head in ("linalg", "special", "masked", "fft", "sparse") else "torch"


def out_of_scope(op: Any) -> str | None:
    """Why ``op`` is out of scope (Note [Out of scope]), or None."""
    import torch

    name = op.name
    if name.startswith(("fft.", "sparse.")):
        return name.split(".")[0]
    if name in _COMPLEX:
        return "complex, sparse or reduced-precision dtype"
    if (name.startswith("_") and not name.startswith("__")) or name.startswith(("native_", "torch.ops.")):
        return "aten internal"
    if isinstance(op.op, torch._ops.OpOverload) or name in _ATEN_KERNELS:
        return "aten internal"
    if name.endswith("_backward"):
        return "aten internal"
    return None


def _resolve(path: str) -> Any:
    obj: Any = ag
    for part in path.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def ag_callable(op: Any) -> Callable[..., Any] | None:
    """Note [From an OpInfo to asyncgrad]."""
    row = AG_CALLS.get(full_name(op)) or AG_CALLS.get(op.name)
    if row is not None:
        path, adapter = row
        target = getattr(ag.Tensor, path[len("Tensor."):], None) if path.startswith("Tensor.") else _resolve(path)
        if target is None:
            return None
        return lambda *args, **kwargs: adapter(target, *args, **kwargs)
    last = op.name.split(".")[-1]
    if last.startswith("__"):
        return _method(last) if hasattr(ag.Tensor, last) else None
    found = _resolve(op.name)
    if callable(found) and not isinstance(found, (type, ag.dtype, types.ModuleType)):
        return found
    if op.method_variant is not None and hasattr(ag.Tensor, last):
        return _method(last)
    return None


# --------------------------------------------------------------------------- converting samples
class _Converter:
    """torch values -> asyncgrad values, one asyncgrad leaf per torch tensor object."""

    def __init__(self, storage: bool = False) -> None:
        self.leaves: dict[int, tuple[Any, Any]] = {}  # id(torch tensor) -> (torch tensor, ag tensor)
        self.storage = storage  # keep a view's storage around it (Note [What one sample compares])

    def __call__(self, value: Any) -> Any:
        import torch

        if isinstance(value, torch.Tensor):
            if id(value) in self.leaves:
                return self.leaves[id(value)][1]
            if value.is_complex() or value.layout != torch.strided:
                raise _Unconvertible(f"a {value.dtype} {value.layout} tensor")
            out = self._storage_view(value) if self.storage and value._base is not None else \
                ag.tensor(value.detach().cpu().numpy().copy(), requires_grad=value.requires_grad)
            self.leaves[id(value)] = (value, out)
            return out
        if isinstance(value, torch.Size):
            return ag.Size(value)
        if isinstance(value, torch.dtype):
            converted = getattr(ag, str(value).split(".")[-1], None)
            if converted is None:
                raise _Unconvertible(f"dtype {value}")
            return converted
        if isinstance(value, torch.device):
            return ag.device(str(value))
        if isinstance(value, (torch.memory_format, torch.layout)):
            converted = getattr(ag, str(value).split(".")[-1], None)
            if converted is None:
                raise _Unconvertible(f"{value}")
            return converted
        if isinstance(value, torch.nn.Module):
            return self._module(value)
        if isinstance(value, tuple) and hasattr(value, "_fields"):
            return type(value)(*(self(v) for v in value))
        if isinstance(value, (list, tuple)):
            return type(value)(self(v) for v in value)
        if isinstance(value, dict):
            return {k: self(v) for k, v in value.items()}
        return value

    @staticmethod
    def _storage_view(value: Any) -> Any:
        """A view in torch as the same view of an asyncgrad tensor holding its whole storage."""
        import torch

        with torch.no_grad():
            whole = value.detach().as_strided((value.untyped_storage().nbytes() // value.element_size(),), (1,), 0)
        base = ag.tensor(whole.cpu().numpy().copy())
        view = ag.as_strided(base, tuple(value.shape), tuple(value.stride()), value.storage_offset())
        return view.requires_grad_() if value.requires_grad else view

    def _module(self, value: Any) -> Any:
        """A torch module without parameters or buffers (a sample's ``distance_function``) as asyncgrad's
        module of the same class name, with the same settings (its public attributes)."""
        cls = getattr(ag.nn, type(value).__name__, None)
        if cls is None or next(value.parameters(), None) is not None or next(value.buffers(), None) is not None:
            raise _Unconvertible(f"the module {type(value).__name__}")
        module = cls()
        for name, setting in vars(value).items():
            if not name.startswith("_") and name in vars(module):
                setattr(module, name, self(setting))
        return module

    def grad_inputs(self) -> tuple[list[Any], list[Any]]:
        """The floating tensors that require grad, torch's and asyncgrad's, in the same order."""
        pairs = [(t, a) for t, a in self.leaves.values() if t.requires_grad and t.is_floating_point()]
        return [t for t, _ in pairs], [a for _, a in pairs]


class _Unconvertible(Exception):
    """A sample value asyncgrad has no counterpart for (a complex or sparse tensor)."""


def _flatten(value: Any) -> list[Any]:
    if isinstance(value, (list, tuple)):
        return [leaf for item in value for leaf in _flatten(item)]
    return [value]


# --------------------------------------------------------------------------- one sample
class _Mismatch(Exception):
    """A silent difference: the op computed something other than torch."""


class _SampleTimeout(Exception):
    pass


@contextlib.contextmanager
def _time_limit(seconds: float):
    """Raises ``_SampleTimeout`` in the main thread after ``seconds`` (a hang is an error)."""
    if seconds <= 0 or not hasattr(signal, "SIGALRM"):
        yield
        return

    def alarm(signum: int, frame: Any) -> None:
        raise _SampleTimeout(f"no result after {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


FORWARD_TOL = dict(rtol=1e-6, atol=1e-7)
GRAD_TOL = dict(rtol=1e-5, atol=1e-6)


def _compare(where: str, t_value: Any, a_value: Any, tol: dict, values: bool = True) -> None:
    import torch

    if isinstance(t_value, torch.Tensor):
        if not isinstance(a_value, ag.Tensor):
            raise _Mismatch(f"{where}: torch gives a tensor, asyncgrad {type(a_value).__name__}")
        if tuple(t_value.shape) != tuple(a_value.shape):
            raise _Mismatch(f"{where}: shape {tuple(a_value.shape)}, torch {tuple(t_value.shape)}")
        t_dtype = str(t_value.dtype).split(".")[-1]
        a_dtype = str(a_value.dtype).split(".")[-1]
        if t_dtype != a_dtype:
            raise _Mismatch(f"{where}: dtype {a_dtype}, torch {t_dtype}")
        if not values:
            return
        if t_value._is_zerotensor():  # torch's formulas may return its lazy zeros (sgn's, on real input)
            t_value = torch.zeros(t_value.shape, dtype=t_value.dtype)
        expected = t_value.detach().cpu().resolve_conj().resolve_neg().numpy()
        got = np.asarray(a_value.detach().cpu().numpy())
        if expected.dtype == np.bool_ or np.issubdtype(expected.dtype, np.integer):
            ok = np.array_equal(expected, got)
        else:
            ok = np.allclose(got, expected, equal_nan=True, **tol)
        if not ok:
            with np.errstate(all="ignore"):
                diff = np.nanmax(np.abs(got.astype(np.float64) - expected.astype(np.float64))) if got.size else 0
            raise _Mismatch(f"{where}: values differ (max abs difference {diff:.3g})")
        return
    if isinstance(t_value, (bool, int, float)) and not isinstance(a_value, ag.Tensor):
        if values and not (t_value == a_value or (isinstance(t_value, float) and math.isnan(t_value)
                                                  and isinstance(a_value, float) and math.isnan(a_value))):
            raise _Mismatch(f"{where}: {a_value!r}, torch {t_value!r}")
        return
    if values and type(t_value) is not type(a_value):
        raise _Mismatch(f"{where}: asyncgrad gives {type(a_value).__name__}, torch {type(t_value).__name__}")


def _rebind(fn: Callable[..., Any]) -> Callable[..., Any]:
    """torch's ``output_process_fn_grad`` for asyncgrad outputs: the same code with ``torch`` meaning asyncgrad."""
    if not isinstance(fn, types.FunctionType) or "torch" not in fn.__code__.co_names:
        return fn
    return types.FunctionType(fn.__code__, {**fn.__globals__, "torch": ag}, fn.__name__, fn.__defaults__,
                              fn.__closure__)


def run_sample(op: Any, call: Callable[..., Any], sample: Any, index: int, loop: asyncio.AbstractEventLoop,
               random: bool, timeout: float) -> None:
    """Note [What one sample compares]: returns when the sample agrees; raises ``_Mismatch`` or the error."""
    import torch

    convert = _Converter(storage=op.name in STORAGE_READERS)
    t_input, t_args, t_kwargs = sample.input, sample.args, sample.kwargs
    a_input, a_args, a_kwargs = convert(t_input), convert(tuple(t_args)), convert(dict(t_kwargs))
    torch.default_generator.manual_seed(index)  # torch.manual_seed also formats a stack per call
    try:
        t_out = op.op(t_input, *t_args, **t_kwargs)
    except Exception:
        raise _TorchRefuses from None
    with _time_limit(timeout):
        a_out = call(a_input, *a_args, **a_kwargs)
    t_leaves, a_leaves = _flatten(t_out), _flatten(a_out)
    if len(t_leaves) != len(a_leaves):
        raise _Mismatch(f"{len(a_leaves)} outputs, torch {len(t_leaves)}")
    for i, (t_leaf, a_leaf) in enumerate(zip(t_leaves, a_leaves)):
        _compare(f"output {i}", t_leaf, a_leaf, FORWARD_TOL, values=False)
    process = sample.output_process_fn_grad
    t_processed = _flatten(process(t_out))
    with _time_limit(timeout):
        a_processed = _flatten(_rebind(process)(a_out))
    if len(t_processed) != len(a_processed):
        raise _Mismatch(f"{len(a_processed)} processed outputs, torch {len(t_processed)}")
    for i, (t_leaf, a_leaf) in enumerate(zip(t_processed, a_processed)):
        _compare(f"output {i}", t_leaf, a_leaf, FORWARD_TOL, values=not random)

    t_inputs, a_inputs = convert.grad_inputs()
    pairs = [(t, a) for t, a in zip(t_processed, a_processed)
             if isinstance(t, torch.Tensor) and t.requires_grad and t.is_floating_point()]
    if not t_inputs or not pairs:
        return
    for i, (_t, a) in enumerate(pairs):
        if not isinstance(a, ag.Tensor) or not a.requires_grad:
            raise _Mismatch(f"differentiable output {i} does not require grad in asyncgrad")
    generator = torch.Generator().manual_seed(1000 + index)
    t_grads_out = [torch.randn(t.shape, dtype=t.dtype, generator=generator) for t, _ in pairs]
    a_grads_out = [ag.tensor(g.numpy().copy()) for g in t_grads_out]
    t_grads = torch.autograd.grad([t for t, _ in pairs], t_inputs, t_grads_out, allow_unused=True)

    async def backward() -> Any:
        return await asyncio.wait_for(
            ag.grad([a for _, a in pairs], a_inputs, a_grads_out, allow_unused=True), timeout)

    with _time_limit(timeout + 1):
        a_grads = loop.run_until_complete(backward())
    for i, (t_grad, a_grad, t_in) in enumerate(zip(t_grads, a_grads, t_inputs)):
        if t_grad is None:
            t_grad = torch.zeros_like(t_in)
        if a_grad is None:
            a_grad = ag.zeros(tuple(t_in.shape), dtype=getattr(ag, str(t_in.dtype).split(".")[-1]))
        _compare(f"gradient {i}", t_grad, a_grad, GRAD_TOL, values=not random)


class _TorchRefuses(Exception):
    """torch itself raised on the sample: it says nothing about asyncgrad."""


# --------------------------------------------------------------------------- one op, all ops
@dataclass
class OpResult:
    name: str
    family: str
    status: str
    samples: int = 0
    agreed: int = 0
    reason: str = ""
    sample: str = ""
    seconds: float = 0.0
    random: bool = False
    failures: list[str] = field(default_factory=list)


def _describe(sample: Any) -> str:
    def short(v: Any) -> str:
        import torch

        if isinstance(v, torch.Tensor):
            return f"Tensor{tuple(v.shape)}"
        if isinstance(v, (list, tuple)):
            inner = ", ".join(short(x) for x in v[:6]) + (", ..." if len(v) > 6 else "")
            return f"[{inner}]" if isinstance(v, list) else f"({inner})"
        return repr(v)

    parts = [short(sample.input)] + [short(a) for a in sample.args]
    parts += [f"{k}={short(v)}" for k, v in sample.kwargs.items()]
    return ", ".join(parts)


def run_op(op: Any, loop: asyncio.AbstractEventLoop, timeout: float, max_samples: int | None) -> OpResult:
    import torch

    name = full_name(op)
    result = OpResult(name, family(op), "agree", random=name in RANDOM)
    why = out_of_scope(op)
    if why is not None:
        result.status, result.reason = "out-of-scope", why
        return result
    call = ag_callable(op)
    if call is None:
        result.status, result.reason = "missing", "no asyncgrad counterpart"
        return result
    started = time.perf_counter()
    try:
        samples = list(op.sample_inputs("cpu", torch.float64, requires_grad=True))
    except Exception as exc:  # torch's own generator failing is not asyncgrad's fault
        result.status, result.reason = "out-of-scope", f"torch's sample_inputs raised {type(exc).__name__}: {exc}"
        return result
    if max_samples is not None:
        samples = samples[:max_samples]
    errors: list[tuple[str, str]] = []
    mismatches: list[tuple[str, str]] = []
    for index, sample in enumerate(samples):
        try:
            run_sample(op, call, sample, index, loop, result.random, timeout)
        except _TorchRefuses:
            continue
        except _Unconvertible as exc:
            result.samples += 1
            errors.append((_describe(sample), f"sample not convertible: {exc}"))
        except _Mismatch as exc:
            result.samples += 1
            mismatches.append((_describe(sample), str(exc)))
        except (Exception, _SampleTimeout) as exc:  # noqa: BLE001 - every error is a finding
            result.samples += 1
            text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            errors.append((_describe(sample), f"{type(exc).__name__}: {text}"[:300]))
            if isinstance(exc, (_SampleTimeout, asyncio.TimeoutError)):
                loop.close()
                loop = asyncio.new_event_loop()
                asyncio.set_event_loop(loop)
                _LOOP[0] = loop
        else:
            result.samples += 1
            result.agreed += 1
    result.seconds = time.perf_counter() - started
    if errors:
        result.status = "raises"
        result.sample, result.reason = errors[0]
    elif mismatches:
        known = TORCH_IS_WRONG.get(name)
        torch_wrong = known is not None and all(reason.startswith(known + ":") for _, reason in mismatches)
        result.status = "torch-wrong" if torch_wrong else "wrong"
        result.sample, result.reason = mismatches[0]
    result.failures = [f"{s} -> {r}" for s, r in (errors + mismatches)[:5]]
    return result


_LOOP: list[asyncio.AbstractEventLoop] = []


@contextlib.contextmanager
def _outside_a_test_case():
    """torch's sample iterators look for the unittest test running them by walking the stack with
    source context (``extract_test_fn``), which costs most of a sample's time; outside a
    ``unittest.TestCase`` the walk finds nothing, so its answer, None, is given directly."""
    from torch.testing._internal import common_utils
    from torch.testing._internal.opinfo import core

    saved = common_utils.extract_test_fn, core.extract_test_fn
    common_utils.extract_test_fn = core.extract_test_fn = lambda: None
    try:
        yield
    finally:
        common_utils.extract_test_fn, core.extract_test_fn = saved


def load_op_db() -> list[Any]:
    """torch's OpInfos that support autograd in float64 on the CPU."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import torch
        from torch.testing._internal.common_methods_invocations import op_db
    return [op for op in op_db if op.supports_autograd and torch.float64 in op.supported_dtypes("cpu")]


def run(ops: list[str] | None = None, timeout: float = 20.0, max_samples: int | None = None,
        progress: Callable[[OpResult], None] | None = None) -> list[OpResult]:
    """Classify the OpInfos named in ``ops`` (all when None): a full name (``div.trunc_rounding``,
    ``as_strided``) selects that OpInfo, a name that is no OpInfo's full name (``polygamma``) all its variants."""
    database = load_op_db()
    if ops is not None:
        wanted = set(ops)
        known = {full_name(op) for op in database} | {op.name for op in database}
        unknown = sorted(wanted - known)
        if unknown:
            raise ValueError(f"not differentiable OpInfos in torch's op_db: {', '.join(unknown)}")
        full = {full_name(op) for op in database}  # a plain name that is no full name: all its variants
        database = [op for op in database if full_name(op) in wanted or (op.name in wanted and op.name not in full)]
    loop = asyncio.new_event_loop()
    _LOOP[:] = [loop]
    results = []
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"), _outside_a_test_case():
            warnings.simplefilter("ignore")
            for op in database:
                result = run_op(op, _LOOP[0], timeout, max_samples)
                results.append(result)
                if progress is not None:
                    progress(result)
    finally:
        _LOOP[0].close()
    return results


STATUSES = ("agree", "wrong", "raises", "missing", "torch-wrong", "out-of-scope")


def summary(results: list[OpResult]) -> dict[str, Any]:
    in_scope = [r for r in results if r.status != "out-of-scope"]
    agree = sum(r.status == "agree" for r in in_scope)
    by_family: dict[str, collections.Counter] = {}
    for r in results:
        by_family.setdefault(r.family, collections.Counter())[r.status] += 1
    return {
        "total": len(results),
        "in_scope": len(in_scope),
        "agree": agree,
        "percent": round(100 * agree / len(in_scope), 1) if in_scope else 0.0,
        "counts": dict(collections.Counter(r.status for r in results)),
        "families": {f: dict(c) for f, c in sorted(by_family.items())},
    }


def report(results: list[OpResult]) -> str:
    s = summary(results)
    lines = [f"agree {s['agree']} of {s['in_scope']} in scope ({s['percent']}%)"
             f"; {s['total']} OpInfos, " + ", ".join(f"{s['counts'].get(k, 0)} {k}" for k in STATUSES)]
    lines.append(f"{'family':<14}" + "".join(f"{k:>14}" for k in STATUSES))
    for fam, counts in s["families"].items():
        lines.append(f"{fam:<14}" + "".join(f"{counts.get(k, 0):>14}" for k in STATUSES))
    for status in ("wrong", "raises", "torch-wrong"):
        for r in results:
            if r.status == status:
                lines.append(f"{status:>7} {r.name}: {r.reason}  [{r.sample}]"[:400])
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.opinfo_parity", description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", help="comma-separated OpInfo names (name or name.variant); all by default")
    parser.add_argument("--json", help="write the classification of every op to this file")
    parser.add_argument("--timeout", type=float, default=20.0, help="seconds per sample before it counts as a hang")
    parser.add_argument("--max-samples", type=int, help="only the first N samples of each op")
    parser.add_argument("--missing", action="store_true", help="list the missing ops too")
    parser.add_argument("-v", "--verbose", action="store_true", help="one line per op as it finishes")
    args = parser.parse_args(argv)
    ops = [n.strip() for n in args.ops.split(",") if n.strip()] if args.ops else None

    def progress(r: OpResult) -> None:
        if args.verbose:
            print(f"{r.status:>12} {r.name} ({r.agreed}/{r.samples}, {r.seconds:.1f} s) {r.reason[:150]}",
                  file=sys.stderr, flush=True)

    started = time.perf_counter()
    results = run(ops, timeout=args.timeout, max_samples=args.max_samples, progress=progress)
    print(report(results))
    if args.missing:
        print("missing: " + ", ".join(r.name for r in results if r.status == "missing"))
    print(f"({time.perf_counter() - started:.0f} s)")
    if args.json:
        import torch

        data = {"torch": torch.__version__, "summary": summary(results),
                "ops": {r.name: {k: v for k, v in vars(r).items() if k != "name"} for r in results}}
        with open(args.json, "w") as fh:
            json.dump(data, fh, indent=1, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
