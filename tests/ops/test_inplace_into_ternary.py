"""addcmul/addcdiv and the three-operand in-place ops optimizers step with (``addcmul_``,
``addcdiv_``, ``lerp_``): written into the tensor through one scratch array where nothing records
(Note [In place without a temporary] in ops/inplace.py), bit for bit what the general path (the op
out of place, written back) computes; the ops themselves against finite differences and torch on
``cpu`` and ``sim:0``; torch's errors for bad input."""

from __future__ import annotations

import helpers
import numpy as np
import pytest
from helpers import check_gradgrad, check_op, check_raises, has_torch

import asyncgrad as ag
from asyncgrad.devices.backend import ArrayBackend


@pytest.fixture
def scratch_shapes(monkeypatch):
    """The shapes of the arrays ``backend.empty`` made (the fast path's scratch arrays)."""
    shapes = []
    original = ArrayBackend.empty

    def counted(self, shape, dtype):
        shapes.append(tuple(shape))
        return original(self, shape, dtype)

    monkeypatch.setattr(ArrayBackend, "empty", counted)
    return shapes


def general_path(monkeypatch, fn):
    """``fn()`` with the numpy backend's ``into`` switched off: the op computed out of place and written."""
    with monkeypatch.context() as m:
        m.setattr(ArrayBackend, "into_ufuncs", False)
        return fn()


CASES = {
    "addcmul_": lambda x, a, b: x.addcmul_(a, b),
    "addcmul_ value": lambda x, a, b: x.addcmul_(a, b, value=-0.3),
    "addcmul_ int value": lambda x, a, b: x.addcmul_(a, b, value=3),
    "addcdiv_": lambda x, a, b: x.addcdiv_(a, b),
    "addcdiv_ value": lambda x, a, b: x.addcdiv_(a, b, value=-1e-3),
    "lerp_ small": lambda x, a, b: x.lerp_(a, 0.1),
    "lerp_ large": lambda x, a, b: x.lerp_(a, 0.7),
    "lerp_ one": lambda x, a, b: x.lerp_(a, 1),
}
SHAPES = {"same shape": ((3, 4), (3, 4)), "row": ((4,), (3, 4)), "row and column": ((4,), (3, 1)),
          "0-d": ((), ())}


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("shapes", SHAPES)
def test_the_same_bits_as_the_general_path(case, dtype, shapes, into_calls, scratch_shapes, monkeypatch):
    rng = np.random.default_rng(1)
    s1, s2 = SHAPES[shapes]
    if case.startswith("lerp"):
        s2 = s1  # lerp_'s one tensor operand
    x = rng.uniform(-2.0, 2.0, (3, 4)).astype(dtype)
    a = rng.uniform(-2.0, 2.0, s1).astype(dtype)
    b = rng.uniform(0.5, 2.0, s2).astype(dtype)  # away from 0: addcdiv divides by it
    method = CASES[case]

    t = ag.tensor(x.copy())
    before, version = t.data, t._version
    assert method(t, ag.tensor(a), ag.tensor(b)) is t
    assert t.data is before and t._version == version + 1  # written into the tensor's own memory
    assert into_calls[-1] in ("add", "subtract") and len(into_calls) in (2, 3)
    expected_scratch = (3, 4) if case.startswith("lerp") else np.broadcast_shapes(s1, s2)
    assert scratch_shapes == [expected_scratch]  # one temporary, the size of the operands' product

    calls = len(into_calls)
    general = general_path(monkeypatch, lambda: method(ag.tensor(x.copy()), ag.tensor(a), ag.tensor(b)))
    assert len(into_calls) == calls  # the general path wrote through no ufunc
    np.testing.assert_array_equal(t.numpy(), general.numpy())
    assert t.dtype == general.dtype == np.dtype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_against_torch(torch, dtype):
    """addcdiv_ is torch's bit for bit; torch fuses addcmul's and lerp's last multiply and add (FMA),
    which numpy cannot: those agree to the last bit of the rounding."""
    rng = np.random.default_rng(2)
    x, a, b = (rng.standard_normal(10007).astype(dtype) for _ in range(3))
    b = np.abs(b) + 0.5
    ulp = float(np.finfo(dtype).eps)

    def both(fn):
        ours, theirs = ag.tensor(x.copy()), torch.tensor(x.copy())
        fn(ours, ag.tensor(a), ag.tensor(b))
        fn(theirs, torch.tensor(a), torch.tensor(b))
        return ours.numpy(), theirs.numpy()

    ours, theirs = both(lambda t, u, v: t.addcdiv_(u, v, value=-0.0123))
    np.testing.assert_array_equal(ours, theirs)
    for fn in (lambda t, u, v: t.addcmul_(u, v, value=0.37), lambda t, u, v: t.lerp_(u, 0.1),
               lambda t, u, v: t.lerp_(u, 0.9)):
        ours, theirs = both(fn)
        np.testing.assert_allclose(ours, theirs, rtol=4 * ulp, atol=4 * ulp)


@pytest.mark.parametrize("why", ["records", "promotes", "integer", "number value type", "tensor weight",
                                 "strict backend", "grad-mode view", "inference tensor"])
def test_the_general_path_decides_where_it_must(why, into_calls):
    ones = ag.tensor(np.ones(3))
    if why == "records":
        leaf = ag.tensor(np.full(3, 2.0), requires_grad=True)
        x = ag.tensor(np.ones(3), requires_grad=True) * 1
        x.addcmul_(leaf, ones, value=0.5)
        assert x.grad_fn.name() == "AddcmulBackward0"
        x.sum().backward_sync()
        assert leaf.grad.tolist() == [0.5, 0.5, 0.5]
    elif why == "promotes":
        x = ag.tensor(np.ones(3, dtype=np.float32))
        x.addcdiv_(ones, ones, value=2)  # float64 operands: the result is written back as float32
        assert x.dtype == ag.float32 and x.tolist() == [3.0, 3.0, 3.0]
    elif why == "integer":
        x = ag.tensor(np.ones(3, dtype=np.int64))
        x.addcmul_(ag.tensor(np.full(3, 2)), ag.tensor(np.full(3, 3)), value=2.7)  # torch truncates value to 2
        assert x.dtype == ag.int64 and x.tolist() == [13, 13, 13]
    elif why == "number value type":
        x = ag.tensor(np.ones(3))
        x.addcmul_(ones, ones, value=np.float64(2.0))
        assert x.tolist() == [3.0, 3.0, 3.0]
    elif why == "tensor weight":
        x = ag.tensor(np.zeros(3))
        x.lerp_(ones, ag.tensor(np.full(3, 0.25)))
        assert x.tolist() == [0.25, 0.25, 0.25]
    elif why == "strict backend":
        x = ag.tensor(np.ones(3), device="sim:0")
        y = ag.tensor(np.full(3, 2.0), device="sim:0")
        x.addcmul_(y, y, value=0.5).addcdiv_(y, y).lerp_(y, 0.5)
        assert x.cpu().tolist() == [3.0, 3.0, 3.0]  # 1 + 0.5 * 4 = 3, + 2 / 2 = 4, halfway to 2
    elif why == "grad-mode view":
        base = ag.tensor(np.ones(3), requires_grad=True) * 1
        with ag.no_grad():
            v = base[0:2]
        with pytest.raises(RuntimeError, match="A view was created in no_grad mode"):
            v.addcdiv_(ones[:2], ones[:2])
    else:
        with ag.inference_mode():
            x = ag.tensor(np.ones(3))
        with pytest.raises(RuntimeError, match="Inplace update to inference tensor outside InferenceMode"):
            x.addcmul_(ones, ones)
    assert into_calls == []


def test_views_see_the_write_and_a_saved_tensor_is_refused(into_calls):
    w = ag.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    v = w[1]
    with ag.no_grad():
        v.addcmul_(ag.tensor(np.ones(3)), ag.tensor(np.full(3, 2.0)), value=0.5)
    np.testing.assert_array_equal(w.detach().numpy(), [[0.0, 1.0, 2.0], [4.0, 5.0, 6.0]])
    y = w * 1
    z = (y * y).sum()
    with ag.no_grad():
        y.lerp_(ag.tensor(np.zeros((2, 3))), 0.25)
    assert into_calls == ["multiply", "multiply", "add", "subtract", "multiply", "add"]
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.backward_sync()


def test_an_operand_that_is_the_tensor_itself():
    x = ag.tensor(np.array([1.0, 2.0, 3.0]))
    x.addcmul_(x, x, value=2.0)  # every read happens before the write
    assert x.tolist() == [3.0, 10.0, 21.0]
    x.lerp_(x, 0.3)
    assert x.tolist() == [3.0, 10.0, 21.0]


def test_bad_input_raises_torchs_errors():
    f, d = (lambda lib: lib.ones(3, dtype=lib.float32)), (lambda lib: lib.ones(3, dtype=lib.float64))
    check_raises(lambda lib: f(lib).addcmul_(lib.ones(2, 3), f(lib)), RuntimeError,
                 r"output with shape \[3\] doesn't match the broadcast shape \[2, 3\]")
    check_raises(lambda lib: f(lib).addcmul_(lib.ones(2), f(lib)), RuntimeError,
                 r"The size of tensor a \(3\) must match the size of tensor b \(2\) at non-singleton dimension 0")
    check_raises(lambda lib: f(lib).lerp_(d(lib), 0.5), RuntimeError, "expected dtype float for `end` but got "
                 "dtype double")
    check_raises(lambda lib: lib.ones(3, dtype=lib.int64).addcmul_(f(lib), f(lib)), RuntimeError,
                 "result type Float can't be cast to the desired output type Long")
    check_raises(lambda lib: f(lib).addcdiv_(lib.ones(3, dtype=lib.int64), lib.ones(3, dtype=lib.int64)),
                 RuntimeError, "Integer division with addcdiv is no longer supported")
    check_raises(lambda lib: lib.addcmul(lib.ones(3, dtype=lib.bool), lib.ones(3, dtype=lib.bool),
                                         lib.ones(3, dtype=lib.bool)),
                 NotImplementedError, "\"addcmul_cpu_out\" not implemented for 'Bool'")
    check_raises(lambda lib: f(lib).addcmul_(f(lib), f(lib), value="a"), TypeError,
                 "addcmul_\\(\\): argument 'value' must be Number, not str")
    check_raises(lambda lib: f(lib).addcdiv_(f(lib), [1.0]), TypeError,
                 r"addcdiv_\(\): argument 'tensor2' \(position 2\) must be Tensor, not list")
    check_raises(lambda lib: lib.addcmul(f(lib), f(lib), 2.0), TypeError,
                 r"addcmul\(\): argument 'tensor2' \(position 3\) must be Tensor, not float")
    check_raises(lambda lib: (lambda x: x[1:].addcmul_(x[:3], x[:3]))(lib.arange(4.0)), RuntimeError,
                 "some elements of the input tensor and the written-to tensor refer to a single memory location")
    check_raises(lambda lib: lib.ones(1).expand(3).addcdiv_(f(lib), f(lib)), RuntimeError,
                 "more than one element of the written-to tensor refers to a single memory location")
    check_raises(lambda lib: lib.ones(3, requires_grad=True).addcmul_(f(lib), f(lib)), RuntimeError,
                 "a leaf Variable that requires grad is being used in an in-place operation")


@pytest.mark.parametrize("optimizer,settings", [
    ("Adam", dict(lr=0.05)), ("Adam", dict(lr=0.05, amsgrad=True, weight_decay=0.1, maximize=True)),
    ("Adam", dict(lr=0.05, betas=(0.3, 0.9))), ("AdamW", dict(lr=0.05, amsgrad=True)),
    ("RMSprop", dict(lr=0.01, momentum=0.8)), ("RMSprop", dict(lr=0.01, centered=True, weight_decay=0.1)),
    ("RMSprop", dict(lr=0.01, alpha=0.3, centered=True, momentum=0.5, maximize=True)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.05, weight_decay=0.2)),
])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_optimizer_steps_are_the_general_paths_bit_for_bit(optimizer, settings, dtype, into_calls, monkeypatch):
    def train():
        rng = np.random.default_rng(3)
        params = [ag.nn.Parameter(ag.tensor(rng.standard_normal(shape).astype(dtype))) for shape in ((5, 4), (4,))]
        opt = getattr(ag.optim, optimizer)(params, **settings)
        for _ in range(5):
            for p in params:
                p.grad = ag.tensor(rng.standard_normal(p.shape).astype(dtype))
            opt.step()
        return [p.detach().numpy() for p in params]

    fast = train()
    assert into_calls.count("add") + into_calls.count("subtract") >= 10  # the states and parameters, in place
    for ours, general in zip(fast, general_path(monkeypatch, train)):
        np.testing.assert_array_equal(ours, general)


def test_an_adam_step_makes_two_temporaries_per_parameter_beside_denom(scratch_shapes):
    p = ag.nn.Parameter(ag.tensor(np.ones((4, 3))))
    opt = ag.optim.Adam([p], lr=0.1)
    p.grad = ag.tensor(np.full((4, 3), 0.5))
    opt.step()
    assert scratch_shapes == [(4, 3)] * 3  # lerp_, addcmul_, addcdiv_ (denom is sqrt's result, as torch's)


# --------------------------------------------------------------------------- the ops, on cpu and sim:0
@pytest.fixture(params=["cpu", "sim:0"])
def device(request):
    helpers.DEVICE[0] = request.param
    yield request.param
    helpers.DEVICE[0] = "cpu"


@pytest.mark.parametrize("op", ["addcmul", "addcdiv"])
@pytest.mark.parametrize("value", [1, -0.7])
async def test_the_ops_against_finite_differences_and_torch(device, op, value):
    name = {"addcmul": "AddcmulBackward0", "addcdiv": "AddcdivBackward0"}[op]

    def fn(lib, x, a, b):
        return getattr(lib, op)(x, a, b, value=value)

    await check_op(fn, (2, 3), (3,), (2, 1), name=name, low=0.5, high=2.0)
    await check_gradgrad(fn, (2, 3), (3,), (2, 1), low=0.5, high=2.0)
    await check_op(lambda x, a, b: getattr(x, op)(a, b, value=value), (3,), (2, 3), (3,), requires_grad=[False, True,
                   False], name=name, low=0.5, high=2.0)


@pytest.mark.parametrize("op,name", [("addcmul_", "AddcmulBackward0"), ("addcdiv_", "AddcdivBackward0")])
async def test_in_place_forms_record_as_torch(device, op, name):
    await check_op(lambda x, a, b: getattr(x * 1, op)(a, b, value=0.4), (2, 3), (2, 3), (3,), name=name,
                   low=0.5, high=2.0)
    await check_op(lambda x, a: (x * 1).lerp_(a, 0.3), (2, 3), (2, 3), name="LerpBackward0")


@pytest.mark.skipif(not has_torch(), reason="needs torch")
def test_promotion_and_integer_values_as_torch(device):
    for fn in (lambda lib: lib.addcmul(lib.tensor([1, 2]), lib.tensor([3, 4]), lib.tensor([5, 6]), value=0.5),
               lambda lib: lib.addcmul(lib.tensor([1, 2]), lib.tensor([3, 4]), lib.tensor([5, 6]), value=-2),
               lambda lib: lib.addcmul(lib.tensor([1.0, 2.0]), lib.tensor([3, 4]), lib.tensor([5, 6]), value=0.5),
               lambda lib: lib.addcdiv(lib.tensor([1, 2]), lib.tensor([3.0, 4.0]), lib.tensor([5, 6]), value=2)):
        ours, theirs = fn(helpers.AG), helpers.run_torch(fn)
        assert str(ours.dtype).replace("asyncgrad.", "") == str(theirs.dtype).replace("torch.", "")
        assert ours.tolist() == theirs.tolist()
