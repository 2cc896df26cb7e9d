"""Tensor: a device array plus the autograd state torch keeps beside it.

This module holds the state, the metadata and the autograd entry points; the operators, math
methods, ``data`` and ``backward`` are declared and installed by ``asyncgrad/_surface.py`` (Note
[One declaration of Tensor's surface]).
"""

from __future__ import annotations

import threading
import warnings
import weakref
from typing import Any, Callable, NamedTuple

import numpy as np

from asyncgrad import _tensor_str, _validate, dtypes
from asyncgrad._convert import to_array
from asyncgrad._validate import normalize_dim
from asyncgrad.devices import Device
from asyncgrad.devices import device as as_device
from asyncgrad.graph import awaitable
from asyncgrad.graph.grad_mode import (
    INFERENCE_ACTIVE,
    InferenceVersion,
    fresh_version,
    grad_enabled,
    inference_enabled,
)
from asyncgrad.graph.node import Node, RemovableHandle, add_hook

creation_lock = threading.Lock()
"""Guards the lazy creation of a leaf's extras and AccumulateGrad against threads racing."""

_TYPE_NAMES = {
    "float16": "HalfTensor", "float32": "FloatTensor", "float64": "DoubleTensor", "int8": "CharTensor",
    "int16": "ShortTensor", "int32": "IntTensor", "int64": "LongTensor", "uint8": "ByteTensor",
    "bool": "BoolTensor",
}


def type_name(dtype: np.dtype) -> str:
    """torch's legacy type name (``FloatTensor``), which its error messages use."""
    return "asyncgrad." + _TYPE_NAMES.get(np.dtype(dtype).name, f"{np.dtype(dtype).name}Tensor")


def scalar_type_name(dtype: np.dtype) -> str:
    """torch's ScalarType name (``Float``, ``Double``, ``Long``), which its dtype errors use."""
    name = np.dtype(dtype).name
    return _TYPE_NAMES[name][:-len("Tensor")] if name in _TYPE_NAMES else name.capitalize()


class Size(tuple):
    """torch.Size: a tuple of ints (what ``Tensor.shape`` and ``Tensor.size()`` return) that
    prints as ``asyncgrad.Size([2, 3])``, compares equal to the tuple of the same ints, and
    stays a Size when sliced or added to."""

    __slots__ = ()
    __module__ = "asyncgrad"  # printed and pickled as asyncgrad.Size, where it is exported

    def __new__(cls, sizes: Any = ()) -> Size:
        items = tuple(sizes)
        for i, n in enumerate(items):
            if not isinstance(n, (int, np.integer)):
                raise TypeError(f"asyncgrad.Size() takes an iterable of 'int' (item {i} is "
                                f"'{type(n).__name__}')")
        return _tuple_new(cls, (int(n) for n in items))

    def __repr__(self) -> str:
        return f"asyncgrad.Size({list(self)})"

    __str__ = __repr__

    def __getitem__(self, index: Any) -> Any:
        item = tuple.__getitem__(self, index)
        return _tuple_new(Size, item) if isinstance(index, slice) else item

    def __add__(self, other: Any) -> Size:
        if not isinstance(other, tuple):
            return NotImplemented
        return _tuple_new(Size, tuple.__add__(self, other))

    def __radd__(self, other: Any) -> Size:
        if not isinstance(other, tuple):
            return NotImplemented
        return _tuple_new(Size, tuple.__add__(other, self))

    def numel(self) -> int:
        """The number of elements a tensor of this shape holds (1 for ``Size([])``)."""
        count = 1
        for n in self:
            count *= n
        return count


_tuple_new = tuple.__new__


NO_GRAD_VIEW = "no_grad"
INFERENCE_MODE_VIEW = "inference_mode"
MULTI_OUTPUT_VIEW = "multi_output"
IN_CUSTOM_FUNCTION = "custom_function"
"""The kinds of ``_Extra.creation``: a view made in no_grad mode, one made in inference mode (of a
normal tensor), one of several views one op (or custom Function) returned, a view a custom Function
returned (Note [View creation] in ops/_node.py, Note [Views a Function returns] in
autograd/function.py)."""


class _Extra:
    """Rarely used per-tensor state, kept out of the hot slots."""

    __slots__ = ("hooks", "post_accumulate_hooks", "retains_grad", "grad_accumulator", "base", "views", "name",
                 "creation", "detached_from", "detached")

    def __init__(self) -> None:
        self.hooks: dict | None = None
        self.post_accumulate_hooks: dict | None = None
        self.retains_grad = False
        self.grad_accumulator: weakref.ref | None = None
        self.base: Tensor | None = None
        self.views: weakref.WeakSet | None = None
        self.name: str | None = None
        self.creation: tuple | None = None
        """How a view was made, when in-place ops through it are refused (Note [View creation] in ops/_node.py)."""
        self.detached_from: weakref.ref | None = None
        """A ``detach()``'s autograd root, weakly (a saved-tensor pack hook keeps detach()es): whose
        views an in-place op through it moves (Note [Views after an untracked in-place] in ops/inplace.py)."""
        self.detached: weakref.WeakSet | None = None
        """A root's ``detach()``es (the other way of ``detached_from``)."""


def _rebuild_tensor(cls: type, array: np.ndarray, device: str, requires_grad: bool) -> Tensor:
    """Unpickling's half of ``Tensor.__reduce_ex__``."""
    t = Tensor(array, device=device)
    if cls is not Tensor:  # a subclass (Parameter) over the same fields, without running its __init__
        new = cls.__new__(cls)
        for name in ("_data", "device", "_requires_grad", "grad_fn", "output_nr", "_grad", "_vc", "_extra"):
            setattr(new, name, getattr(t, name))
        t = new
    return t.requires_grad_(requires_grad)


class Tensor:
    """An n-dimensional array on a device, with torch's autograd state.

    Made by ``ag.tensor(...)``, the factories and the ops, not by calling ``Tensor`` directly.
    It holds its device's array (numpy on ``cpu``), ``requires_grad``, ``grad``, ``grad_fn`` (the
    ``Node`` that made it) and a version counter for in-place checks. Its operators and methods are
    torch's; the ones that run the engine, ``backward`` first, return awaitables:
    ``await loss.backward()``. The methods the ops, the factories and the front door provide are
    installed by asyncgrad/_surface.py (Note [One declaration of Tensor's surface])."""

    __slots__ = ("_data", "device", "_requires_grad", "grad_fn", "output_nr", "_grad", "_counter", "_extra",
                 "__weakref__")
    __array_priority__ = 1000
    __hash__ = object.__hash__

    def __init__(self, data: Any, dtype=None, device: str | Device | None = None, requires_grad: bool = False):
        dev = as_device(device)
        self._data = to_array(data, dtype, dev)
        self.device = dev
        self._requires_grad = False
        self.grad_fn = None
        self.output_nr = 0
        self._grad = None
        self._counter = fresh_version()  # Note [Inference tensors] in graph/grad_mode.py
        self._extra = None
        if requires_grad:
            self.requires_grad_(True)

    @staticmethod
    def _make(data: Any, device: Device, requires_grad: bool, grad_fn: Node | None, output_nr: int,
              vc: list) -> Tensor:
        """The fast constructor every op uses: no copies, and the one check that numpy's 0-d
        results (scalars) become 0-d arrays, which in-place ops can write into."""
        if data.__class__ is not _ndarray and isinstance(data, np.generic):
            data = np.asarray(data)
        t = _new(Tensor)
        t._data = data  # the slot itself (Note [The data slot])
        t.device = device
        t._requires_grad = requires_grad
        t.grad_fn = grad_fn
        t.output_nr = output_nr
        t._grad = None
        # Note [Inference tensors] in graph/grad_mode.py: under inference_mode() a new counter (a new
        # tensor's, version 0) becomes an inference one; callers that share one (views, detach) put theirs back
        t._counter = vc if not INFERENCE_ACTIVE[0] or vc.__class__ is not list or vc[0] or not inference_enabled.get() \
            else InferenceVersion(vc)
        t._extra = None
        return t

    @property
    def _vc(self) -> list:
        """The version counter, which views, ``detach()``es and saved tensors share.

        Note [A version counter made when first asked for]: a result ``record`` makes starts with no
        counter (``_counter`` None): most results of a long chain are only ever read by the next op,
        and a list per result was a fourth object per node for Python's cyclic collector to track.
        Every reader of the counter goes through this property,
        which makes it then (``[0]``, a plain one: the recorded result's, inference or not, as
        ``record`` stored before) and keeps it, so it is the same object from then on, shared by
        whatever asked: a view, a detach, a saved tensor, an in-place op's bump. Nothing can have
        bumped or shared a counter nobody has asked for, so it is at version 0, as a fresh one is.
        Only ``record``, ``Tensor._make`` and ``__init__`` write ``_counter``; everything else
        reads and writes ``_vc`` (W1's forward shows the per-node cost: ``python -m benchmarks
        --only W1``). A result that keeps its own counter (tanh's, saved in its node) still
        makes one."""
        vc = self._counter
        if vc is None:
            vc = self._counter = [0]
        return vc

    @_vc.setter
    def _vc(self, vc: list) -> None:
        self._counter = vc

    # ----------------------------------------------------------------- metadata
    @property
    def shape(self) -> Size:
        return _tuple_new(Size, self._data.shape)

    @property
    def ndim(self) -> int:
        return self._data.ndim

    def dim(self) -> int:
        return self._data.ndim

    @property
    def dtype(self) -> dtypes.dtype:
        """The interned asyncgrad dtype on every device (Note [Dtypes are numpy dtypes underneath] in
        dtypes.py): the array's dtype looked up, a backend's own dtype converted to numpy's first."""
        dtype = self._data.dtype
        if dtype.__class__ in _NUMPY_DTYPE_CLASSES:  # Note [Is it a numpy dtype]: a strict dtype hashes as numpy's
            found = _BY_NUMPY.get(dtype)  # but warns when compared with it, so it never meets this dict
            return found if found is not None else dtypes.intern(dtype)
        return dtypes.intern(self.device.backend.dtype(self._data))

    def size(self, dim: int | None = None):
        if dim is None:
            return _tuple_new(Size, self._data.shape)
        dim = _validate.int_arg(dim, "size")
        if self._data.ndim == 0:
            raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
        return self._data.shape[normalize_dim(dim, self._data.ndim)]

    def numel(self) -> int:
        return int(self._data.size)

    def __len__(self) -> int:
        if self._data.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self._data.shape[0]

    def is_floating_point(self) -> bool:
        return self.dtype.is_floating_point

    def is_complex(self) -> bool:
        """Always False: asyncgrad holds no complex data (Note [Complex numbers are refused] in _validate.py)."""
        return self.dtype.is_complex

    @property
    def is_cuda(self) -> bool:
        return self.device.type == "cuda"

    @property
    def _version(self) -> int:
        if self._vc.__class__ is InferenceVersion:
            raise RuntimeError("Inference tensors do not track version counter.")
        return self._vc[0]

    def is_inference(self) -> bool:
        """Whether this tensor was made under ``inference_mode()`` (Note [Inference tensors])."""
        return self._vc.__class__ is InferenceVersion

    # ----------------------------------------------------------------- autograd state
    @property
    def requires_grad(self) -> bool:
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        if not isinstance(value, (bool, np.bool_)):
            raise RuntimeError("requires_grad must be a bool")
        self.requires_grad_(value)

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        if requires_grad.__class__ is not bool:
            requires_grad = _validate.bool_arg(requires_grad, "requires_grad_", "requires_grad", 1)
        if self.grad_fn is not None:
            if not requires_grad:
                raise RuntimeError(
                    "you can only change requires_grad flags of leaf variables. If you want to use a "
                    "computed variable in a subgraph that doesn't require differentiation use "
                    "var_no_grad = var.detach()."
                )
            return self
        if requires_grad and not dtypes.is_floating_point(self.dtype):
            # torch 2.13's words for requires_grad_(); its factories still say "and complex dtype"
            raise RuntimeError("only Tensors of floating point dtype can require gradients")
        if requires_grad and self._vc.__class__ is InferenceVersion and not inference_enabled.get():
            # Note [Inference tensors] in graph/grad_mode.py
            raise RuntimeError("Setting requires_grad=True on inference tensor outside InferenceMode is not allowed.")
        self._requires_grad = bool(requires_grad)
        return self

    @requires_grad.deleter
    def requires_grad(self) -> None:
        raise RuntimeError("requires_grad must be a bool")  # torch's setter, given no value

    @property
    def _grad_fn(self) -> Node | None:
        """torch's alias of ``grad_fn``; set to None it detaches the tensor in place, and it cannot be deleted."""
        return self.grad_fn

    @_grad_fn.setter
    def _grad_fn(self, value: None) -> None:
        if value is not None:
            raise RuntimeError("_grad_fn can be only set to None")
        self.detach_()

    @_grad_fn.deleter
    def _grad_fn(self) -> None:
        raise RuntimeError("Deletion of _grad_fn not allowed. Detach tensor instead!")

    @property
    def is_leaf(self) -> bool:
        return self.grad_fn is None

    @property
    def grad(self) -> Tensor | None:
        if _pending:  # a backward()/grad() called without await (Note [Await or not])
            awaitable.check("reading .grad")
        if self.grad_fn is not None and not self.retains_grad and self._grad is None:
            warnings.warn(
                "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. Its .grad "
                "attribute won't be populated during autograd.backward(). If you indeed want the .grad "
                "field to be populated for a non-leaf Tensor, use .retain_grad() on the non-leaf Tensor.",
                UserWarning,
                stacklevel=2,
            )
        return self._grad

    @grad.setter
    def grad(self, value: Tensor | None) -> None:
        if value is not None:
            if not isinstance(value, Tensor):
                raise TypeError("assigned grad expected to be a Tensor or None but got grad of type "
                                f"{_validate.type_label(value)}")
            if value is self:
                raise RuntimeError("can't assign Variable as its own grad")
            if value.shape != self.shape:
                raise RuntimeError(f"attempting to assign a gradient of size '{list(value.shape)}' to a tensor of size "
                                   f"'{list(self.shape)}'. Please ensure that the gradient and the tensor are the same "
                                   "size")
            if value.dtype != self.dtype:
                raise RuntimeError("attempting to assign a gradient with dtype "
                                   f"'{scalar_type_name(value.dtype).lower()}' to a tensor with grad_dtype "
                                   f"'{scalar_type_name(self.dtype)}'. The gradient must "
                                   "match the tensor's dtype.")
            if value.device is not self.device:
                raise RuntimeError(f"attempting to assign a gradient with device type '{value.device.type}' to a "
                                   f"tensor with device type '{self.device.type}'. Please ensure that the gradient and "
                                   "the tensor are on the same device")
        self._grad = value

    @grad.deleter
    def grad(self) -> None:
        """``del t.grad``, as torch: the gradient becomes None."""
        self._grad = None

    def __deepcopy__(self, memo: dict) -> Tensor:
        """torch's: a leaf's value, ``requires_grad`` and a copy of its ``.grad``; never its hooks,
        views or place in a graph (a non-leaf refuses, with torch's words)."""
        if self.grad_fn is not None:
            raise RuntimeError(
                "Only Tensors created explicitly by the user (graph leaves) support the deepcopy protocol at the "
                "moment.  If you were attempting to deepcopy a module, this may be because of a "
                "torch.nn.utils.weight_norm usage, see https://github.com/pytorch/pytorch/pull/103001")
        if id(self) in memo:
            return memo[id(self)]
        new = Tensor._make(self.device.backend.copy(self._data, "C"), self.device, False, None, 0, [0])
        memo[id(self)] = new
        if self._requires_grad:
            new.requires_grad_(True)
        if self._grad is not None:
            new._grad = self._grad.__deepcopy__(memo)
        return new

    def __reduce_ex__(self, protocol: int) -> tuple:
        """Pickle as torch does, under every protocol: the value (a host copy, rebuilt on the same
        device), the class and ``requires_grad``; never ``.grad``, hooks or a place in a graph (a
        non-leaf comes back as a leaf). Protocols 0 and 1 cannot pickle ``__slots__`` by
        themselves, so the reduction is spelled out; a subclass's ``__dict__`` travels as state."""
        state = getattr(self, "__dict__", None) or None
        return (_rebuild_tensor, (type(self), self.device.to_host(self._data), str(self.device), self._requires_grad),
                state)

    def _extras(self) -> _Extra:
        if self._extra is None:
            with creation_lock:  # Note [One writer per leaf]: one _Extra even if threads race here
                if self._extra is None:
                    self._extra = _Extra()
        return self._extra

    @property
    def retains_grad(self) -> bool:
        return self._extra is not None and self._extra.retains_grad

    def retain_grad(self) -> None:
        """Keep ``.grad`` of a non-leaf after backward, through a hook on its grad_fn."""
        if not self._requires_grad:
            raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
        if self.grad_fn is None or self.retains_grad:
            return
        self._extras().retains_grad = True
        ref = weakref.ref(self)

        def retain(grad: Tensor) -> None:
            tensor = ref()
            if tensor is None:
                return
            if tensor._grad is None:
                tensor._grad = grad.detach().clone() if not grad.requires_grad else grad
            else:
                tensor._grad = tensor._grad + grad

        self.grad_fn._hook_store().retains_grad[self.output_nr] = retain

    def register_hook(self, hook: Callable[[Tensor], Tensor | None]) -> RemovableHandle:
        """``hook(grad)`` runs when the gradient for this tensor is computed; may return a new one."""
        if not self._requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        if self.grad_fn is not None:
            return add_hook(self.grad_fn._tensor_prehooks(self.output_nr), hook)
        extra = self._extras()
        if extra.hooks is None:
            extra.hooks = {}
            acc = extra.grad_accumulator() if extra.grad_accumulator is not None else None
            if acc is not None:
                acc._register_hook_dict(extra.hooks)
        return add_hook(extra.hooks, hook)

    def register_post_accumulate_grad_hook(self, hook: Callable[[Tensor], None]) -> RemovableHandle:
        if not self._requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        if self.grad_fn is not None:
            raise RuntimeError("post accumulate grad hooks cannot be registered on non-leaf tensors")
        extra = self._extras()
        if extra.post_accumulate_hooks is None:
            extra.post_accumulate_hooks = {}
        return add_hook(extra.post_accumulate_hooks, hook)

    # torch port, items 121-180: torch's settable ``_backward_hooks`` (test_requires_grad)
    @property
    def _backward_hooks(self) -> dict | None:
        """The dict of this tensor's hooks (``register_hook``'s, called with the gradient in its
        order), None before any, as torch's; for a non-leaf it lives on its grad_fn's slot."""
        if self.grad_fn is not None:
            return self.grad_fn._hook_store().tensor_pre.get(self.output_nr)
        return self._extra.hooks if self._extra is not None else None

    @_backward_hooks.setter
    def _backward_hooks(self, hooks: dict | None) -> None:
        if self.grad_fn is not None:
            store = self.grad_fn._hook_store().tensor_pre
            if hooks is None:
                store.pop(self.output_nr, None)
            else:
                store[self.output_nr] = hooks
            return
        extra = self._extras()
        extra.hooks = hooks
        acc = extra.grad_accumulator() if extra.grad_accumulator is not None else None
        if acc is not None:
            if hooks is None:
                acc._hook_store().tensor_pre.pop(0, None)
            else:
                acc._register_hook_dict(hooks)

    @_backward_hooks.deleter
    def _backward_hooks(self) -> None:
        raise RuntimeError("Deletion of _backwards_hooks not allowed!")

    def detach(self) -> Tensor:
        """A new leaf sharing memory and the version counter, cut off from the graph."""
        t = Tensor._make(self._data, self.device, False, None, 0, self._vc)
        if INFERENCE_ACTIVE[0]:
            t._vc = self._vc  # a view: inference only when this tensor is (Note [Inference tensors])
        extra = self._extra
        if self._requires_grad or extra is not None and extra.detached_from is not None:
            # Note [Views after an untracked in-place] in ops/inplace.py
            root = (self if extra is None else extra.detached_from() if extra.detached_from is not None
                    else extra.base if extra.base is not None else self)
            if root is None:  # the root is gone: nothing has views to regenerate
                return t
            t._extras().detached_from = weakref.ref(root)
            root_extra = root._extras()
            if root_extra.detached is None:
                root_extra.detached = weakref.WeakSet()
            root_extra.detached.add(t)
        return t

    def detach_(self) -> Tensor:
        if self._extra is not None and self._extra.base is not None:
            raise RuntimeError(
                "Can't detach views in-place. Use detach() instead. If you are using DistributedDataParallel "
                "(DDP) for training, and gradient_as_bucket_view is set as True, gradients are views of DDP "
                "buckets, and hence detach_() cannot be called on these gradients. To fix this error, please refer to "
                "the Optimizer.zero_grad() function in asyncgrad/optim/optimizer.py as the solution."
            )
        self.grad_fn = None
        self.output_nr = 0
        self._requires_grad = False
        return self

    # ----------------------------------------------------------------- host values
    def _host_only(self) -> None:
        """torch's refusal to hand an accelerator's memory to numpy: ``.cpu()`` is explicit."""
        if not self.device.is_cpu:
            raise TypeError(
                f"can't convert {self.device} device type tensor to numpy. Use Tensor.cpu() to copy the tensor "
                "to host memory first."
            )

    def numpy(self) -> np.ndarray:
        self._host_only()  # first, as torch checks the device before requires_grad
        if self._requires_grad and grad_enabled.get():  # torch allows it under no_grad
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.")
        return self._data

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        self._host_only()
        return np.asarray(self._data, dtype=dtype) if copy is not True else np.array(self._data, dtype=dtype)

    def item(self) -> Any:
        if self._data.size != 1:
            raise RuntimeError(f"a Tensor with {self._data.size} elements cannot be converted to Scalar")
        return self.device.to_host(self._data).reshape(()).item()

    def tolist(self) -> Any:
        return self.device.to_host(self._data).tolist()

    def __bool__(self) -> bool:
        if self._data.size != 1:
            raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
        return bool(self.item())

    def __float__(self) -> float:
        if self._data.size != 1:
            raise ValueError("only one element tensors can be converted to Python scalars")
        return float(self.item())

    def __int__(self) -> int:
        if self._data.size != 1:
            raise ValueError("only one element tensors can be converted to Python scalars")
        return int(self.item())

    def __index__(self) -> int:
        if self.dtype.kind not in "iub" or self._data.size != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self.item())

    def __repr__(self) -> str:
        """torch's repr (Note [Printing as torch prints] in _tensor_str.py)."""
        host = np.asarray(self.device.to_host(self._data))
        prefix = "tensor("
        suffixes = []
        if not self.device.is_cpu:
            suffixes.append(f"device='{self.device}'")
        if host.size == 0:
            if host.ndim != 1:
                suffixes.append(f"size={tuple(host.shape)}")
            if host.dtype != dtypes.get_default_dtype():
                suffixes.append(f"dtype=asyncgrad.{host.dtype.name}")
        elif host.dtype not in (dtypes.get_default_dtype(), dtypes.int64, dtypes.bool):
            suffixes.append(f"dtype=asyncgrad.{host.dtype.name}")
        if self.grad_fn is not None:  # a node torch cannot read prints as torch prints it (``printed_name``)
            suffixes.append(f"grad_fn=<{getattr(self.grad_fn, 'printed_name', None) or self.grad_fn.name()}>")
        elif self._requires_grad:
            suffixes.append("requires_grad=True")
        return _tensor_str.add_suffixes(prefix + _tensor_str.tensor_str(host, len(prefix)), suffixes, len(prefix))


_new = object.__new__
_data_slot = Tensor.__dict__["_data"]


def _set_data(tensor: Tensor, value: Any) -> None:
    """``t.data = other``: torch's checks on another tensor, whose array (not the Tensor) goes in
    the slot; a device array is stored as it is (the ops' own writes).

    Note [The data slot]: the slot ``_data`` holds the device array; ``data`` is a property over
    it whose getter is the slot's C getter (``member_descriptor.__get__``), so only assignments pay
    for a Python call. A read through the property still costs more than a read of the slot
    (Python 3.11 specializes a slot read, not a property), so this module and the hottest op paths
    (the number fast paths of ops/elementwise.py, the unary ops) read ``_data``: ``t * 2.0`` reads
    it twice. Writes, likewise, assign the slot (``t._data = x``), not the property nor the slot
    descriptor's ``__set__`` called from Python, since every op's result is made so
    (W1: ``python -m benchmarks --only W1``)."""
    if isinstance(value, Tensor):
        if value.device is not tensor.device:
            raise RuntimeError("Attempted to call `variable.set_data(tensor)`, but `variable` and `tensor` have "
                               "incompatible tensor type.")
        if tensor._requires_grad and not dtypes.is_floating_point(value.dtype):
            raise RuntimeError("data set to a tensor that requires gradients must be floating point or complex dtype")
        value = value.data
    elif value.__class__ in _PYTHON_VALUES:
        raise TypeError(f"Variable data has to be a tensor, but got {type(value).__name__}")
    tensor._data = value


def _delete_data(tensor: Tensor) -> None:
    raise RuntimeError("Deleting tensor data is not allowed. Delete tensor instead!")


_PYTHON_VALUES = (int, float, bool, complex, list, tuple, str, type(None))
_data_property = property(_data_slot.__get__, _set_data, _delete_data,
                          doc="The device array (``t.data = other`` takes another tensor's array, torch's checks).")
_ndarray = np.ndarray
_BY_NUMPY = dtypes._BY_NUMPY
_NUMPY_DTYPE_CLASSES = dtypes.NUMPY_DTYPE_CLASSES
_pending = awaitable.pending


# --------------------------------------------------------------------------- torch.return_types
# The named tuples that ops return (max/min/sort/topk, the linalg decompositions) hold Tensors and
# live beside them, below the ops that make them and the stub that names them.

class ReductionResult(NamedTuple):
    """``(values, indices)`` of max/min along a dim, as torch.return_types."""

    values: Tensor
    indices: Tensor


class SlogdetResult(NamedTuple):
    """torch's ``linalg_slogdet`` return type."""

    sign: Tensor
    logabsdet: Tensor


class EighResult(NamedTuple):
    """torch's ``linalg_eigh`` return type."""

    eigenvalues: Tensor
    eigenvectors: Tensor


class EigResult(NamedTuple):
    """torch's legacy ``eig`` return type."""

    eigenvalues: Tensor
    eigenvectors: Tensor


class TriangularSolveResult(NamedTuple):
    """torch's ``triangular_solve`` return type."""

    solution: Tensor
    cloned_coefficient: Tensor


class SvdResult(NamedTuple):
    """torch's ``linalg_svd`` return type."""

    U: Tensor
    S: Tensor
    Vh: Tensor


class LegacySvdResult(NamedTuple):
    """torch's legacy ``svd`` return type (V, not Vᴴ)."""

    U: Tensor
    S: Tensor
    V: Tensor


class QrResult(NamedTuple):
    """torch's ``linalg_qr`` return type."""

    Q: Tensor
    R: Tensor
