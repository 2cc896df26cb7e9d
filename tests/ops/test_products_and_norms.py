"""vdot, trace, addmv, addr, addbmm, dist and renorm: torch's node names and derivatives.yaml
formulas, against torch and finite differences, first and second order, on cpu and sim:0."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import ag_tensor, assert_close, check_gradgrad, check_op, check_raises

import asyncgrad as ag

CASES = {
    "vdot": (lambda lib, a, b: lib.vdot(a, b), [(5,), (5,)], "VdotBackward0"),
    "vdot method": (lambda a, b: a.vdot(b), [(0,), (0,)], "VdotBackward0"),
    "trace": (lambda lib, x: lib.trace(x), [(3, 5)], "TraceBackward0"),
    "trace method": (lambda x: x.trace(), [(4, 2)], "TraceBackward0"),
    "addmv": (lambda lib, x, m, v: lib.addmv(x, m, v), [(3,), (3, 4), (4,)], "AddmvBackward0"),
    "addmv broadcast": (lambda lib, x, m, v: lib.addmv(x, m, v, beta=0.5, alpha=-2), [(), (3, 4), (4,)],
                        "AddmvBackward0"),
    "addmv beta 0": (lambda lib, x, m, v: lib.addmv(x, m, v, beta=0), [(1,), (3, 4), (4,)], "AddmvBackward0"),
    "addr": (lambda lib, x, a, b: lib.addr(x, a, b), [(3, 4), (3,), (4,)], "AddrBackward0"),
    "addr broadcast": (lambda lib, x, a, b: x.addr(a, b, beta=2, alpha=0.5), [(1, 4), (3,), (4,)], "AddrBackward0"),
    "addbmm": (lambda lib, x, a, b: lib.addbmm(x, a, b), [(3, 5), (2, 3, 4), (2, 4, 5)], "AddbmmBackward0"),
    "addbmm broadcast": (lambda lib, x, a, b: lib.addbmm(x, a, b, beta=-1, alpha=3), [(5,), (2, 3, 4), (2, 4, 5)],
                         "AddbmmBackward0"),
    "dist": (lambda lib, a, b: lib.dist(a, b), [(3, 4), (4,)], "DistBackward0"),
    "dist p=1": (lambda lib, a, b: lib.dist(a, b, 1), [(3, 4), (3, 4)], "DistBackward0"),
    "dist p=3": (lambda lib, a, b: a.dist(b, 3), [(2, 3), (2, 1)], "DistBackward0"),
    "dist p=0.5": (lambda lib, a, b: lib.dist(a, b, 0.5), [(4,), (4,)], "DistBackward0"),
    "dist p=inf": (lambda lib, a, b: lib.dist(a, b, math.inf), [(3, 4), ()], "DistBackward0"),
    "renorm": (lambda lib, x: lib.renorm(x, 2, 0, 1.5), [(3, 4)], "RenormBackward0"),
    "renorm p=1 dim=-1": (lambda lib, x: x.renorm(1, -1, 2.0), [(2, 3, 4)], "RenormBackward0"),
    "renorm p=inf": (lambda lib, x: lib.renorm(x, math.inf, 1, 0.8), [(3, 4)], "RenormBackward0"),
}


@pytest.mark.parametrize("case", list(CASES))
async def test_values_and_gradients(case):
    fn, inputs, name = CASES[case]
    await check_op(fn, *inputs, name=name)


@pytest.mark.parametrize("case", ["vdot", "trace", "addmv broadcast", "addr", "addbmm", "dist", "dist p=3",
                                  "renorm", "renorm p=1 dim=-1"])
async def test_second_order(case):
    fn, inputs, _ = CASES[case]
    await check_gradgrad(fn, *inputs, fd_rtol=1e-4)


def test_dist_at_zero_and_empty(torch):
    x = np.array([[1.0, 2.0], [3.0, 4.0]])
    assert ag.dist(ag_tensor(x), ag_tensor(x + 1), 0).item() == 4.0  # torch's p=0 counts (its gradient raises)
    for p in (1, 2, 3, math.inf):
        a, b = ag_tensor(x, requires_grad=True), ag_tensor(x.copy(), requires_grad=True)
        ta, tb = torch.tensor(x, requires_grad=True), torch.tensor(x.copy(), requires_grad=True)
        out, tout = ag.dist(a, b, p), torch.dist(ta, tb, p)
        assert_close(out, tout, 0, 0, f"dist p={p}")
        grads = ag.grad_sync(out, [a, b], allow_unused=True)
        tgrads = torch.autograd.grad(tout, [ta, tb], allow_unused=True)
        for g, tg, t in zip(grads, tgrads, (ta, tb)):
            expected = torch.zeros_like(t) if tg is None else tg
            assert_close(ag.zeros_like(a) if g is None else g, expected, 0, 0, f"dist p={p} gradient at 0")
    assert ag.dist(ag.zeros(0), ag.zeros(0)).item() == 0.0


def test_integer_trace_and_renorm_below_maxnorm(torch):
    assert ag.trace(ag.tensor([[1, 2], [3, 4]])).dtype == ag.int64
    x = np.array([[0.1, 0.2], [0.3, 0.1]])
    assert_close(ag.renorm(ag_tensor(x), 2, 0, 5.0), torch.renorm(torch.tensor(x), 2, 0, 5.0), 0, 0, "unchanged")


def test_inplace_forms(torch):
    x, m, v = np.ones(3), np.arange(6.0).reshape(3, 2), np.array([1.0, -1.0])
    a = ag_tensor(x)
    a.addmv_(ag_tensor(m), ag_tensor(v), alpha=2)
    assert_close(a, torch.tensor(x).addmv_(torch.tensor(m), torch.tensor(v), alpha=2), 0, 0, "addmv_")
    a = ag_tensor(m)
    a.renorm_(2, 0, 1.0)
    assert_close(a, torch.tensor(m).renorm_(2, 0, 1.0), 1e-15, 0, "renorm_")


def test_errors_in_torchs_words():
    cases = [
        (lambda lib: lib.vdot(lib.ones(2, 2), lib.ones(2)), RuntimeError, "1D tensors expected, but got 2D and 1D"),
        (lambda lib: lib.vdot(lib.ones(2), lib.ones(3)), RuntimeError, "inconsistent tensor size"),
        (lambda lib: lib.trace(lib.ones(3)), RuntimeError, "trace: expected a matrix, but got tensor with dim 1"),
        (lambda lib: lib.addmv(lib.ones(3), lib.ones(3), lib.ones(3)), RuntimeError,
         "vector \\+ matrix @ vector expected"),
        (lambda lib: lib.addr(lib.ones(3, 3), lib.ones(3, 1), lib.ones(3)), RuntimeError,
         "addr: Expected 1-D argument vec1, but got 2-D"),
        (lambda lib: lib.addbmm(lib.ones(3, 3), lib.ones(3, 3), lib.ones(1, 3, 3)), RuntimeError,
         "batch1 must be a 3D tensor"),
        (lambda lib: lib.renorm(lib.ones(3), 2, 0, 1.0), RuntimeError, "renorm: input needs at least 2 dimensions"),
    ]
    for fn, exc, match in cases:
        check_raises(fn, exc, match)
