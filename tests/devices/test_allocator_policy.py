"""``ag.set_allocator_policy`` (Note [Heap trimming and page faults] in devices/allocator.py): off by
default, validated, and the same gradients under either policy.

The ``"retain"`` policy is process-wide and cannot be undone, so every test that turns it on runs in
a fresh interpreter; the ones here in pytest's process only ever look, or get refused.
"""

from __future__ import annotations

import ctypes
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import asyncgrad as ag
from asyncgrad.devices import allocator

try:
    import torch
except ImportError:  # pragma: no cover - depends on the environment
    torch = None

ROOT = Path(__file__).resolve().parents[2]
BIG = 24 << 20  # below the policy's 32 MiB mmap threshold, above glibc's default (dynamic) one
GLIBC = sys.platform.startswith("linux") and hasattr(ctypes.CDLL(None), "mallinfo2")

# glibc's mallinfo2(): hblkhd is the bytes mmapped, arena the bytes of the brk heap
MALLINFO = """
MI_FIELDS = "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()
class MI(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in MI_FIELDS]
libc = ctypes.CDLL(None)
libc.mallinfo2.restype = MI
"""

# One MLP step as W3 runs it (784-256-256-10 shrunk: same ops), its gradients as JSON.
MLP = """
import asyncio, json, sys
import numpy as np
import asyncgrad as ag
if sys.argv[1] == "retain":
    ag.set_allocator_policy("retain")
rng = np.random.default_rng(3)
shapes = [(20, 16), (16,), (16, 16), (16,), (16, 5), (5,)]
params = [ag.tensor(rng.standard_normal(s) * 0.3, requires_grad=True) for s in shapes]
x = ag.from_numpy(rng.standard_normal((8, 20)))
target = ag.from_numpy(rng.integers(0, 5, 8))

def loss_of(w1, b1, w2, b2, w3, b3):
    h = (x @ w1 + b1).relu()
    h = (h @ w2 + b2).relu()
    return ag.nn.functional.cross_entropy(h @ w3 + b3, target)

async def main():
    await loss_of(*params).backward()
    return await ag.gradcheck(loss_of, params)

ok = asyncio.run(main())
print(json.dumps({"policy": ag.get_allocator_policy(), "gradcheck": bool(ok),
                  "grads": [p.grad.numpy().tolist() for p in params]}))
"""


def _python(code: str, *args: str) -> str:
    out = subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().splitlines()[-1]


def test_off_by_default() -> None:
    """Importing asyncgrad and running a backward calls no mallopt: glibc still mmaps a 24 MiB buffer
    (its default threshold is 128 KiB, raised only to the largest mmapped buffer freed so far)."""
    code = """
import asyncio, ctypes, json
import numpy as np
import asyncgrad as ag
%sx = ag.randn(64, 64, requires_grad=True)
asyncio.run((x @ x).relu().sum().backward())
before = libc.mallinfo2().hblkhd
a = np.ones(%d // 8)
print(json.dumps({"policy": ag.get_allocator_policy(), "mmapped": libc.mallinfo2().hblkhd - before}))
""" % (MALLINFO, BIG)
    if not GLIBC:
        pytest.skip("needs glibc's mallinfo2")
    out = json.loads(_python(code))
    assert out["policy"] == "default"
    assert out["mmapped"] >= BIG  # the default policy: a buffer this large is mmapped


def test_retain_keeps_the_heap_top() -> None:
    """Under "retain" the same buffer comes from the heap, and once freed stays there (not trimmed)."""
    code = """
import ctypes, json
import numpy as np
import asyncgrad as ag
%sag.set_allocator_policy("retain")
ag.set_allocator_policy("retain")  # again: nothing to do
before = libc.mallinfo2()
a = np.ones(%d // 8)
live = libc.mallinfo2()
del a
after = libc.mallinfo2()
try:
    ag.set_allocator_policy("default")
    refused = ""
except RuntimeError as exc:
    refused = str(exc)
print(json.dumps({"policy": ag.get_allocator_policy(), "mmapped": live.hblkhd - before.hblkhd,
                  "trimmed": live.arena - after.arena, "free": after.fordblks, "refused": refused}))
""" % (MALLINFO, BIG)
    if not GLIBC:
        pytest.skip("needs glibc's mallopt and mallinfo2")
    out = json.loads(_python(code))
    assert out["policy"] == "retain"
    assert out["mmapped"] < BIG  # from the heap, not mmapped
    # freed at the top and kept, below the 64 MiB trim threshold: the heap did not shrink and holds
    # the buffer as free memory (how much the heap grew for it depends on what was free before)
    assert out["trimmed"] == 0 and out["free"] >= BIG
    assert "lasts for the process" in out["refused"]


@pytest.mark.skipif(not GLIBC, reason="needs glibc's mallopt")
def test_same_gradients_under_either_policy() -> None:
    """The policy moves where buffers live, never a number: W3's step gives the same bits, passes
    gradcheck (central finite differences, float64) under both, and matches torch."""
    default = json.loads(_python(MLP, "default"))
    retain = json.loads(_python(MLP, "retain"))
    assert (default["policy"], retain["policy"]) == ("default", "retain")
    assert default["gradcheck"] and retain["gradcheck"]
    for a, b in zip(default["grads"], retain["grads"], strict=True):
        assert np.array_equal(np.asarray(a), np.asarray(b))
    if torch is None:
        return
    rng = np.random.default_rng(3)
    shapes = [(20, 16), (16,), (16, 16), (16,), (16, 5), (5,)]
    params = [torch.tensor(rng.standard_normal(s) * 0.3, requires_grad=True) for s in shapes]
    x = torch.from_numpy(rng.standard_normal((8, 20)))
    target = torch.from_numpy(rng.integers(0, 5, 8))
    w1, b1, w2, b2, w3, b3 = params
    h = (x @ w1 + b1).relu()
    h = (h @ w2 + b2).relu()
    torch.nn.functional.cross_entropy(h @ w3 + b3, target).backward()
    for p, g in zip(params, retain["grads"], strict=True):
        np.testing.assert_allclose(np.asarray(g), p.grad.numpy(), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("bad", [1, None, b"retain", ["retain"]])
def test_policy_must_be_a_str(bad: object) -> None:
    with pytest.raises(TypeError, match=f"argument 'policy' must be str, not {type(bad).__name__}"):
        ag.set_allocator_policy(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", ["", "Retain", "keep", "default "])
def test_unknown_policy(bad: str) -> None:
    with pytest.raises(ValueError, match="expected one of 'default', 'retain', but got"):
        ag.set_allocator_policy(bad)


def test_default_when_in_force_does_nothing() -> None:
    assert ag.get_allocator_policy() == "default"  # nothing in the suite turns it on in this process
    ag.set_allocator_policy("default")
    assert ag.get_allocator_policy() == "default"


def test_without_glibc(monkeypatch: pytest.MonkeyPatch) -> None:
    """A C library without glibc's symbols (musl, macOS) gets a clear error, and the policy stays."""

    class NotGlibc:
        def mallopt(self, *args: int) -> int:  # pragma: no cover - never reached
            raise AssertionError("mallopt called on a C library that is not glibc")

    monkeypatch.setattr(allocator.ctypes, "CDLL", lambda name: NotGlibc())
    with pytest.raises(RuntimeError, match="needs glibc's mallopt"):
        ag.set_allocator_policy("retain")
    assert ag.get_allocator_policy() == "default"
