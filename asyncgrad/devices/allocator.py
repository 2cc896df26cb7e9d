"""An opt-in policy for the C heap that holds every cpu array: off unless asked for.

Note [Heap trimming and page faults]: numpy takes every cpu array's buffer from glibc's ``malloc``,
which hands the free top of its heap back to the kernel once it passes a trim threshold (by default
twice the largest mmapped buffer freed so far). A step that frees its buffers all at once has them
trimmed, and the next step's buffers fault on each page's first write. Which heap layout a process
settles in is not something an op controls, so asyncgrad keeps its large gradient products' memory
itself (Note [Recycled product buffers] in devices/buffers.py) and offers this process-wide policy:
``set_allocator_policy("retain")`` fixes glibc's thresholds (``mallopt``) at the values its own
dynamic policy reaches at most (mmap threshold 32 MiB, trim threshold 64 MiB). glibc has no call that
restores its dynamic policy, so it lasts for the process: ``"default"`` afterwards is refused.
The reasoning and the measurements: docs/design/cpu-memory.md.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 << 20
"""glibc's ceiling for its dynamic mmap threshold on 64-bit (``DEFAULT_MMAP_THRESHOLD_MAX``)."""
TRIM_THRESHOLD = 2 * MMAP_THRESHOLD
"""Twice the mmap threshold: the trim threshold glibc's dynamic policy pairs with it."""
POLICIES = ("default", "retain")

_policy = "default"


def _mallopt() -> Callable[[int, int], int]:
    """glibc's ``mallopt``, from the symbols the process already has; a clear error elsewhere."""
    try:
        libc = ctypes.CDLL(None)  # the process's global symbols, the C library's among them
    except (OSError, TypeError):  # TypeError: Windows cannot open None
        libc = None
    # gnu_get_libc_version is glibc's own symbol: musl's mallopt ignores these options, macOS has none
    if libc is None or not hasattr(libc, "gnu_get_libc_version") or not hasattr(libc, "mallopt"):
        raise RuntimeError(
            "set_allocator_policy('retain') needs glibc's mallopt, which this platform's C library does not "
            "have")
    mallopt = libc.mallopt
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return mallopt


def set_allocator_policy(policy: str) -> None:
    """Choose how the C heap under cpu arrays keeps freed memory (Note [Heap trimming and page faults]).

    ``"default"`` leaves glibc's dynamic thresholds alone (the state at import: asyncgrad never
    calls ``mallopt`` unless asked). ``"retain"`` fixes the mmap threshold at 32 MiB and the trim
    threshold at 64 MiB for the whole process, for good: a loop that frees and reallocates the same
    buffers every step (fresh parameters per step, gradients set to None) stops paying a page fault
    per 4 KiB page, at the cost of up to 64 MiB kept resident. Calling it again with the policy in
    force does nothing; ``"default"`` after ``"retain"`` raises, since glibc cannot go back.
    """
    global _policy
    if not isinstance(policy, str):
        raise TypeError(f"set_allocator_policy(): argument 'policy' must be str, not {type(policy).__name__}")
    if policy not in POLICIES:
        raise ValueError(f"set_allocator_policy(): expected one of 'default', 'retain', but got {policy!r}")
    if policy == _policy:
        return
    if policy == "default":
        raise RuntimeError(
            "set_allocator_policy('default'): the 'retain' policy lasts for the process; glibc has no call that "
            "restores its dynamic thresholds")
    mallopt = _mallopt()
    # the mmap threshold first: fixing either one freezes the other at its current (dynamic) value
    if not (mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) and mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)):
        raise RuntimeError("set_allocator_policy('retain'): glibc's mallopt refused the thresholds")
    _policy = policy


def get_allocator_policy() -> str:
    """The policy in force: ``"default"`` unless ``set_allocator_policy("retain")`` was called."""
    return _policy
