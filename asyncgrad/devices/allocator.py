"""An opt-in policy for the C heap that holds every cpu array: off unless asked for.

Note [Heap trimming and page faults]: numpy takes every cpu array's buffer from the C library's
``malloc``. glibc hands freed memory at the top of its heap back to the kernel once that free top
reaches its trim threshold, and with its default (dynamic) policy that threshold is only twice the
largest buffer freed so far that it had mmapped: 3.2 MB in W3 (``mp_`` read with gdb: mmap
threshold 1,609,728 bytes, trim threshold 3,219,456, in asyncgrad's process and in torch's alike).
A step that makes fresh parameters, runs the backward and then drops everything (W3's harness:
``ag.tensor(a, requires_grad=True)`` per step, the gradients read, the recording deleted) frees
4.2 MB at the heap top at once, so glibc trims it; the next step's leaves and weight gradients
come from fresh pages, and each page faults on first write. asyncgrad's backward of W3 paid 520
minor faults a step (``ru_minflt`` around each node's ``apply``: all in the two MmBackward0 nodes
that make the 1.6 MB and 512 KB weight gradients, 392 + 128 pages; every other node 0), about
1.1 ms of a 3.0 ms backward; the untimed leaves another 488. The backward allocates no more than
torch's (an ``LD_PRELOAD`` trace of every allocation of 32 KB or more: the same two weight
gradients and the same six 128 KB activation gradients in both). torch's process pays 20-260
faults a step only because its heap settled with something live above the step's buffers, which
leaves them as holes the next step reuses: in asyncgrad's process, one 1 MB buffer left live above
a warm-up step did the same and took every fault away (leaves, forward and backward: 1,107 -> 1).
Which layout a process settles in is not something an op formula controls, so asyncgrad does not
try to steer it; it keeps its large gradient products' memory itself instead (Note [Recycled
product buffers] in devices/buffers.py), which took those 520 faults to 0 under the default policy.
The numbers below were measured before that cache.

``set_allocator_policy("retain")`` fixes glibc's thresholds at the values its own dynamic policy
reaches at most (``mallopt``: mmap threshold 32 MiB, its ceiling, then trim threshold twice that,
64 MiB, its own rule): buffers below 32 MiB come from the heap and up to 64 MiB of free heap top
is kept for reuse. W3, in-process medians of 40 steps: backward 2.97 -> 1.87 ms, 521 -> 1 faults
a step (torch's, with the same thresholds: 1.79-2.41 -> 1.76-1.82 ms, 18-263 -> 0 faults). In the
harness (``python -m benchmarks --only W3``, 3 runs of 7 steps, medians): 4.79-4.88 ms against
torch's 3.63-4.56 (1.07-1.34x) by default; 3.29-3.49 against 3.67-3.97 (0.88-0.91x) with asyncgrad
alone on "retain". ``benchmarks.train_loop`` with SGD faults 0-53 a step either way (1.06-1.11x,
unchanged); with Adam 889 -> 5 (torch 532 -> 0), 1.13x -> 1.09x. The setting is process-wide
(every ``malloc``: numpy, Python's large objects, torch's cpu tensors when torch is loaded), keeps
up to 64 MiB more resident after large frees, and glibc has no call that gives back its dynamic
policy, so it lasts for the process: ``"default"`` afterwards is refused.
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
