"""``ag.Generator`` and the global generator: seeded, independent random streams, as torch's.

A Generator wraps one ``numpy.random.Generator`` (PCG64). Every random factory, ``nn.init``
function and ``DataLoader`` takes ``generator=`` (an ``ag.Generator`` or a numpy Generator);
without one they draw from the default generator, which ``ag.manual_seed`` reseeds and returns.
The numbers differ from torch's (another bit generator); seeding, independence of streams and
state save/restore behave as torch's do. Every generator draws on the host, whatever the device
of the sample (Note [Random numbers come from the host] in factories.py).

Note [One numpy Generator per ag.Generator]: reseeding replaces the bit generator's *state*,
never the numpy Generator object, so code that holds ``default_generator.numpy`` (checkpoint's
saved RNG state, ``factories._rng``) keeps drawing from the reseeded stream.
``manual_seed(s)`` gives the same stream as ``numpy.random.default_rng(s)``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from asyncgrad.devices import device as as_device
from asyncgrad.tensor import Tensor

_MASK = (1 << 64) - 1
_DEFAULT_SEED = 67280421310721  # torch's seed of a new torch.Generator()
_STATE_BYTES = 16 + 16 + 1 + 4 + 8  # PCG64 state, increment, has_uint32, uinteger, initial seed

__all__ = ["Generator", "default_generator", "get_rng_state", "initial_seed", "manual_seed", "seed",
           "set_rng_state"]


class Generator:
    """torch.Generator on the CPU: ``manual_seed`` (returns ``self``), ``seed``, ``initial_seed``,
    ``get_state``/``set_state`` (a uint8 tensor), ``device``. A new one starts from torch's
    default seed, so two fresh Generators give the same numbers, as torch's do."""

    def __init__(self, device: Any = "cpu") -> None:
        self.device = as_device(device)
        self.numpy = np.random.Generator(np.random.PCG64(_DEFAULT_SEED))
        self._initial_seed = _DEFAULT_SEED

    def manual_seed(self, seed: Any) -> Generator:
        """Reseed (Note [One numpy Generator per ag.Generator]); negative seeds wrap to uint64 as torch's."""
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
            raise RuntimeError(f"manual_seed expected a long, but got {type(seed).__name__}")
        seed = int(seed)
        if not -(1 << 63) <= seed <= _MASK:
            raise ValueError("Overflow when unpacking long long")
        self._initial_seed = seed & _MASK
        self.numpy.bit_generator.state = np.random.PCG64(self._initial_seed).state
        return self

    def seed(self) -> int:
        """Reseed from the OS's entropy and return the new seed."""
        new = int(np.random.SeedSequence().entropy) & _MASK
        self.manual_seed(new)
        return new

    def initial_seed(self) -> int:
        return self._initial_seed

    def get_state(self) -> Tensor:
        """The state as a uint8 CPU tensor, as torch's for any device (a copy: drawing afterwards
        does not change it)."""
        inner = self.numpy.bit_generator.state
        raw = b"".join([inner["state"]["state"].to_bytes(16, "little"), inner["state"]["inc"].to_bytes(16, "little"),
                        bytes([inner["has_uint32"]]), int(inner["uinteger"]).to_bytes(4, "little"),
                        self._initial_seed.to_bytes(8, "little")])
        return Tensor._make(np.frombuffer(raw, dtype=np.uint8).copy(), as_device("cpu"), False, None, 0, [0])

    def set_state(self, new_state: Any) -> Generator:
        if not isinstance(new_state, Tensor):
            raise TypeError(f"expected a torch.ByteTensor, but got {type(new_state).__name__}")
        if new_state.dtype != np.uint8:
            raise TypeError("RNG state must be a torch.ByteTensor")
        raw = new_state.device.to_host(new_state.data).reshape(-1).tobytes()
        if len(raw) != _STATE_BYTES:
            raise RuntimeError(f"Expected an RNG state of size {_STATE_BYTES} but found the input RNG state size to "
                               f"be {len(raw)}")
        self.numpy.bit_generator.state = {
            "bit_generator": "PCG64",
            "state": {"state": int.from_bytes(raw[0:16], "little"), "inc": int.from_bytes(raw[16:32], "little")},
            "has_uint32": raw[32], "uinteger": int.from_bytes(raw[33:37], "little")}
        self._initial_seed = int.from_bytes(raw[37:45], "little")
        return self

    def __repr__(self) -> str:
        return f"<asyncgrad.Generator device={self.device} initial_seed={self._initial_seed}>"


def _entropy_seeded() -> Generator:
    """The default generator starts from fresh entropy (asyncgrad always has: runs differ
    until ``ag.manual_seed``)."""
    generator = Generator()
    generator.seed()
    return generator


default_generator = _entropy_seeded()


def manual_seed(seed: Any) -> Generator:
    """Seed the default generator and return it, as ``torch.manual_seed``: the seed goes through
    ``int()`` first, so ``1.5`` seeds with 1 and ``"a"``/``None`` fail as in torch."""
    return default_generator.manual_seed(int(seed))


def seed() -> int:
    """Seed the default generator from the operating system's entropy; returns the seed, as torch's."""
    return default_generator.seed()


def initial_seed() -> int:
    """The seed the default generator was last seeded with, as torch's."""
    return default_generator.initial_seed()


def get_rng_state() -> Tensor:
    """The default generator's state, as a ``uint8`` tensor, as torch's (numpy's generator state inside)."""
    return default_generator.get_state()


def set_rng_state(new_state: Tensor) -> None:
    """Restore the default generator's state from ``get_rng_state()``'s tensor, as torch's."""
    default_generator.set_state(new_state)


def numpy_generator(generator: Any, fn: str) -> np.random.Generator:
    """The numpy Generator behind ``generator=`` (an ag.Generator, a numpy Generator, or None for
    the default); anything else is torch's argument error."""
    if generator is None:
        return default_generator.numpy
    if isinstance(generator, Generator):
        return generator.numpy
    if isinstance(generator, np.random.Generator):
        return generator
    raise TypeError(f"{fn}(): argument 'generator' must be torch.Generator, not {type(generator).__name__}")
