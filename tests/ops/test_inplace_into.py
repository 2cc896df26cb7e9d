"""In-place arithmetic written straight into the tensor where nothing records (Note [In place
without a temporary] in ops/inplace.py): the same bits as the out-of-place op, the same version
and view semantics, and the general path wherever torch's checks must decide."""

from __future__ import annotations

import numpy as np
import pytest

import asyncgrad as ag

CASES = {
    "add": (lambda t, o: t.add_(o), lambda a, b: a + b),
    "add alpha": (lambda t, o: t.add_(o, alpha=-0.3), lambda a, b: a + b * -0.3),
    "sub": (lambda t, o: t.sub_(o), lambda a, b: a - b),
    "sub alpha": (lambda t, o: t.sub_(o, alpha=2), lambda a, b: a - b * 2),
    "mul": (lambda t, o: t.mul_(o), lambda a, b: a * b),
    "div": (lambda t, o: t.div_(o), lambda a, b: a / b),
    "iadd": (lambda t, o: t.__iadd__(o), lambda a, b: a + b),
    "imul": (lambda t, o: t.__imul__(o), lambda a, b: a * b),
}


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("other", ["same shape", "row", "0-d", "number"])
def test_the_same_bits_as_out_of_place_written_in_place(case, dtype, other, into_calls):
    rng = np.random.default_rng(0)
    a = rng.uniform(0.5, 2.0, (3, 4)).astype(dtype)
    b = {"same shape": rng.uniform(0.5, 2.0, (3, 4)).astype(dtype), "row": rng.uniform(0.5, 2.0, (4,)).astype(dtype),
         "0-d": np.array(1.7, dtype=dtype), "number": 1.7}[other]
    method, reference = CASES[case]
    t = ag.tensor(a.copy())
    before = t.data
    version = t._version
    out = method(t, b if other == "number" else ag.tensor(b))
    assert out is t and t.data is before  # the tensor's own memory
    assert t._version == version + 1
    if other == "number" and "alpha" in case:
        assert into_calls == []  # a number times alpha is rounded by the op itself
    else:
        assert into_calls  # the write took the in-place path
    expected = reference(a, b)
    assert t.dtype == ag.tensor(a).dtype
    np.testing.assert_array_equal(t.numpy(), expected.astype(dtype))


def test_optimizer_updates_write_into_parameters_and_buffers(into_calls):
    w = ag.nn.Parameter(ag.tensor(np.ones((4, 3))))
    opt = ag.optim.SGD([w], lr=0.1, momentum=0.9)
    for _ in range(2):
        w.grad = ag.tensor(np.full((4, 3), 0.5))
        opt.step()
    assert into_calls.count("multiply") == 1 and into_calls.count("add") == 1 and into_calls.count("subtract") == 2
    np.testing.assert_allclose(w.detach().numpy(), 1 - 0.1 * 0.5 - 0.1 * (0.9 * 0.5 + 0.5))


def test_a_saved_tensor_modified_this_way_is_refused_by_its_backward(into_calls):
    x = ag.tensor(np.ones(3), requires_grad=True)
    y = x * 1
    z = (y * y).sum()
    with ag.no_grad():
        y.add_(1.0)
    assert into_calls == ["add"]
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.backward_sync()


def test_views_see_the_write_and_a_leaf_may_be_updated_without_grad(into_calls):
    w = ag.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    v = w[0]
    with ag.no_grad():
        w.mul_(2.0)
        v.add_(ag.tensor(np.ones(3)))
    np.testing.assert_array_equal(w.detach().numpy(), [[1.0, 3.0, 5.0], [6.0, 8.0, 10.0]])
    assert into_calls == ["multiply", "add"]


@pytest.mark.parametrize("why", ["records", "promotes", "integer", "broadcasts out", "strict backend",
                                 "grad-mode view"])
def test_the_general_path_decides_where_it_must(why, into_calls):
    x = ag.tensor(np.ones((2, 3)))
    if why == "records":
        x = ag.tensor(np.ones(3), requires_grad=True) * 1
        x.mul_(ag.tensor(np.full(3, 2.0)))
        assert x.grad_fn.name() == "MulBackward0"
    elif why == "promotes":
        x = ag.tensor(np.ones(3, dtype=np.float32))
        x.add_(ag.tensor(np.ones(3)))  # float64 other: torch keeps float32
        assert x.dtype == ag.float32
    elif why == "integer":
        x = ag.tensor(np.ones(3, dtype=np.int64))
        with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output type Long"):
            x.add_(0.5)
    elif why == "broadcasts out":
        with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
            ag.tensor(np.ones(3)).add_(ag.tensor(np.ones((2, 3))))
    elif why == "strict backend":
        x = ag.tensor(np.ones(3), device="sim:0")
        x.add_(ag.tensor(np.ones(3), device="sim:0"))
        assert x.cpu().tolist() == [2.0, 2.0, 2.0]
    else:
        base = ag.tensor(np.ones(3), requires_grad=True) * 1
        with ag.no_grad():
            v = base[0:2]
        with pytest.raises(RuntimeError, match="A view was created in no_grad mode"):
            v.mul_(2.0)
    assert into_calls == []


def test_overlap_errors_are_torchs():
    x = ag.tensor(np.arange(4.0))
    with pytest.raises(RuntimeError, match="some elements of the input tensor and the written-to tensor"):
        x[1:].add_(x[:3])
    with pytest.raises(RuntimeError, match="unsupported operation: more than one element of the written-to tensor"):
        ag.tensor(np.ones(1)).expand(3).add_(1.0)

