"""``asyncgrad.utils.data``: Dataset, TensorDataset, Subset, random_split and DataLoader, as torch's.

A DataLoader is iterated with ``for`` (each batch made when asked, in the caller's thread)
or with ``async for``, where the next batch is made in a worker thread while the caller
works on the current one: awaiting ``loss.backward()`` on batch k lets batch k+1 be
indexed and collated meanwhile (Note [Prefetch]).

Note [Prefetch]: one batch ahead, one thread per ``async for``. The batch order (the
shuffle) is drawn on the caller's thread when iteration starts, as torch's sampler does,
so the result is the same with ``for`` and ``async for``. The thread runs the dataset's
``__getitem__`` and the collate function in a copy of the caller's context variables (grad
mode included). Only one batch is made at a time, so a dataset need not be thread-safe, only
usable from a thread other than the one that created it.
"""

from __future__ import annotations

import asyncio
import collections.abc
import contextvars
import copy
import math
import re
import warnings
from concurrent.futures import ThreadPoolExecutor
from typing import Any, AsyncIterator, Callable, Generic, Iterator, Sequence, TypeVar

import numpy as np

from asyncgrad.factories import tensor as new_tensor
from asyncgrad.ops.shape import stack
from asyncgrad.random import Generator, numpy_generator
from asyncgrad.tensor import Tensor

__all__ = ["DataLoader", "Dataset", "Subset", "TensorDataset", "default_collate", "random_split"]

T_co = TypeVar("T_co", covariant=True)
GeneratorLike = Generator | np.random.Generator | int | None


class Dataset(Generic[T_co]):
    """A map-style dataset: ``dataset[i]`` for ``0 <= i < len(dataset)``."""

    def __getitem__(self, index: int) -> T_co:
        raise NotImplementedError("Subclasses of Dataset should implement __getitem__.")


class TensorDataset(Dataset[tuple[Tensor, ...]]):
    """Samples are ``tuple(t[i] for t in tensors)``; every tensor has the same first dimension."""

    def __init__(self, *tensors: Tensor) -> None:
        if not all(isinstance(t, Tensor) for t in tensors):
            raise TypeError("TensorDataset takes tensors")
        if not tensors or not all(tensors[0].size(0) == t.size(0) for t in tensors):
            raise AssertionError("Size mismatch between tensors")
        self.tensors = tensors

    def __getitem__(self, index: Any) -> tuple[Tensor, ...]:
        return tuple(t[index] for t in self.tensors)

    def __len__(self) -> int:
        return self.tensors[0].size(0)


class Subset(Dataset[T_co]):
    """The samples of ``dataset`` at ``indices``, in that order."""

    def __init__(self, dataset: Dataset[T_co], indices: Sequence[int]) -> None:
        self.dataset = dataset
        self.indices = indices

    def __getitem__(self, index: int) -> T_co:
        return self.dataset[self.indices[index]]

    def __len__(self) -> int:
        return len(self.indices)


def _numpy_generator(generator: GeneratorLike) -> np.random.Generator:
    """The numpy stream behind ``generator``; an ``ag.Generator`` is used live (not copied),
    so reseeding it between epochs reseeds the shuffle, as with torch."""
    if isinstance(generator, int) and not isinstance(generator, bool):
        return np.random.default_rng(generator)  # the stream of Generator().manual_seed(generator)
    if generator is not None and not isinstance(generator, (Generator, np.random.Generator)):
        raise TypeError("generator must be an asyncgrad.Generator, a numpy.random.Generator, an int seed or None, "
                        f"not {type(generator).__name__}")
    return numpy_generator(generator, "DataLoader")


def random_split(dataset: Dataset[T_co], lengths: Sequence[int | float],
                 generator: GeneratorLike = None) -> list[Subset[T_co]]:
    """Disjoint random subsets of the given lengths, or of fractions of ``len(dataset)`` (floored,
    the remainder dealt out one by one from the first), as torch computes them."""
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        sizes = []
        for i, frac in enumerate(lengths):
            if frac < 0 or frac > 1:
                raise ValueError(f"Fraction at index {i} is not between 0 and 1")
            sizes.append(math.floor(len(dataset) * frac))
        for i in range(len(dataset) - sum(sizes)):
            sizes[i % len(sizes)] += 1
        lengths = sizes
        for i, length in enumerate(lengths):
            if length == 0:
                warnings.warn(f"Length of split at index {i} is 0. This might result in an empty dataset.",
                              stacklevel=2)
    if sum(lengths) != len(dataset):
        raise ValueError("Sum of input lengths does not equal the length of the input dataset!")
    indices = _numpy_generator(generator).permutation(sum(lengths)).tolist()
    offsets = np.cumsum([0, *lengths]).tolist()
    return [Subset(dataset, indices[start:end]) for start, end in zip(offsets[:-1], offsets[1:])]


# ---------------------------------------------------------------- collation
_NOT_NUMERIC = re.compile(r"[SaUO]")
_COLLATE_ERROR = "default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; found {}"


def default_collate(batch: list[Any]) -> Any:
    """torch's default_collate: tensors and numpy arrays are stacked along a new first dim,
    Python floats become a float64 tensor and ints an int64 one, strings stay a list, and
    dicts, tuples and lists are collated field by field (a tuple of fields gives a list)."""
    elem = batch[0]
    if isinstance(elem, Tensor):
        return stack(batch, 0)
    if type(elem).__module__ == "numpy" and type(elem).__name__ not in ("str_", "string_"):
        if isinstance(elem, np.ndarray):
            if _NOT_NUMERIC.search(elem.dtype.str) is not None:
                raise TypeError(_COLLATE_ERROR.format(elem.dtype))
            return default_collate([new_tensor(b) for b in batch])
        return new_tensor(np.asarray(batch))
    if isinstance(elem, float):
        return new_tensor(batch, dtype=np.float64)
    if isinstance(elem, int):
        return new_tensor(batch)
    if isinstance(elem, (str, bytes)):
        return batch
    if isinstance(elem, collections.abc.Mapping):
        collated = {key: default_collate([d[key] for d in batch]) for key in elem}
        if isinstance(elem, collections.abc.MutableMapping):
            clone = copy.copy(elem)
            clone.update(collated)
            return clone
        return collated
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # a namedtuple keeps its type
        return type(elem)(*(default_collate(list(samples)) for samples in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        size = len(elem)
        if not all(len(item) == size for item in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        return [default_collate(list(samples)) for samples in zip(*batch)]
    raise TypeError(_COLLATE_ERROR.format(type(elem)))


def default_convert(data: Any) -> Any:
    """Without batching (torch's default_convert): numpy arrays and scalars become tensors,
    containers are converted element by element, and a plain tuple becomes a list."""
    if type(data).__module__ == "numpy" and type(data).__name__ not in ("str_", "string_"):
        if isinstance(data, np.ndarray) and _NOT_NUMERIC.search(data.dtype.str) is not None:
            return data
        return new_tensor(np.asarray(data))
    if isinstance(data, collections.abc.Mapping):
        return {key: default_convert(value) for key, value in data.items()}
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, (tuple, list)):
        return [default_convert(d) for d in data]
    return data


# ---------------------------------------------------------------- the loader
class DataLoader(Generic[T_co]):
    """Batches of ``dataset``: ``for batch in loader`` or ``async for batch in loader``.

    ``shuffle`` draws a new order every epoch from ``generator`` (an ``ag.Generator``, a numpy
    Generator, or an int seed for an ``ag.Generator`` made once here; default: asyncgrad's global generator, which
    ``ag.manual_seed`` seeds). ``batch_size=None`` turns batching off: each sample is
    converted (numpy arrays to tensors) and yielded alone. For a ``TensorDataset`` with the
    default collate, a batch is one fancy-indexing per tensor instead of a stack of samples.
    ``num_workers`` and ``pin_memory`` are accepted so that torch scripts port unchanged, and
    ignored: there are no worker processes (``async for`` overlaps loading with training in a
    thread instead) and no pinned host memory.
    """

    def __init__(self, dataset: Dataset[T_co], batch_size: int | None = 1, shuffle: bool | None = None,
                 num_workers: int = 0, collate_fn: Callable[[list[Any]], Any] | None = None,
                 pin_memory: bool = False, drop_last: bool = False, generator: GeneratorLike = None) -> None:
        if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(batch_size, int)
                                       or batch_size <= 0):
            raise ValueError(f"batch_size should be a positive integer value, but got batch_size={batch_size}")
        if not isinstance(drop_last, bool):
            raise ValueError(f"drop_last should be a boolean value, but got drop_last={drop_last}")
        if batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually exclusive with drop_last")
        if num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 to disable multiprocessing.")
        self.dataset = dataset
        self.batch_size = batch_size
        self.shuffle = bool(shuffle)
        self.drop_last = drop_last
        self.collate_fn = collate_fn if collate_fn is not None else (
            default_collate if batch_size is not None else default_convert)
        if isinstance(generator, int) and not isinstance(generator, bool):
            generator = Generator().manual_seed(generator)  # made once: each epoch draws a new order
        _numpy_generator(generator)  # refuse a wrong type now, not at the first epoch
        self.generator = generator

    def __len__(self) -> int:
        n = len(self.dataset)
        if self.batch_size is None:
            return n
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def _index_batches(self) -> list[Any]:
        """This epoch's batches of indices, drawn now (on the caller's thread)."""
        n = len(self.dataset)
        order = _numpy_generator(self.generator).permutation(n) if self.shuffle else np.arange(n)
        if self.batch_size is None:
            return [int(i) for i in order]
        stop = n - n % self.batch_size if self.drop_last else n
        return [order[start:start + self.batch_size] for start in range(0, stop, self.batch_size)]

    def _fetch(self, indices: Any) -> Any:
        if self.batch_size is None:
            return self.collate_fn(self.dataset[indices])
        if isinstance(self.dataset, TensorDataset) and self.collate_fn is default_collate:
            return list(self.dataset[indices])  # one gather per tensor, what the stack would give
        return self.collate_fn([self.dataset[int(i)] for i in indices])

    def __iter__(self) -> Iterator[Any]:
        for indices in self._index_batches():
            yield self._fetch(indices)

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._prefetching(self._index_batches())

    async def _prefetching(self, batches: list[Any]) -> AsyncIterator[Any]:
        """Yield batch k while batch k+1 is made in this iteration's thread (Note [Prefetch])."""
        if not batches:
            return
        loop = asyncio.get_running_loop()
        context = contextvars.copy_context()
        executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="asyncgrad-dataloader")
        try:
            pending = loop.run_in_executor(executor, context.run, self._fetch, batches[0])
            for following in batches[1:]:
                batch = await pending
                pending = loop.run_in_executor(executor, context.run, self._fetch, following)
                yield batch
            yield await pending
        finally:
            executor.shutdown(wait=False, cancel_futures=True)
