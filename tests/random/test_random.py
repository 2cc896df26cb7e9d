"""ag.Generator, the random factories and the in-place samplers against torch: seeding and
independence of streams, statistics of the samples (the numbers are numpy's, not torch's),
shapes, dtypes, autograd behaviour (zero gradients, Note [Random ops and autograd]) and
torch's error wording."""

from __future__ import annotations

import numpy as np
import pytest

import asyncgrad as ag
from asyncgrad.nn import init
from asyncgrad.utils.data import DataLoader, TensorDataset

torch = pytest.importorskip("torch")


def _draws(g):
    return [ag.rand(5, generator=g), ag.randn(4, generator=g), ag.randint(0, 100, (6,), generator=g),
            ag.randperm(7, generator=g), ag.normal(ag.zeros(3), 1.0, generator=g),
            ag.bernoulli(ag.full((5,), 0.5), generator=g), ag.multinomial(ag.ones(6), 3, generator=g)]


def _same(a, b):
    return all(np.array_equal(x.numpy(), y.numpy()) for x, y in zip(a, b))


# ---------------------------------------------------------------- generators
def test_generator_seeding_returns_itself_and_repeats():
    g = ag.Generator()
    assert g.manual_seed(7) is g and g.initial_seed() == 7
    first = _draws(g)
    g.manual_seed(7)
    assert _same(first, _draws(g))
    assert not _same(first, _draws(g))  # the stream moved on
    assert _same(_draws(ag.Generator()), _draws(ag.Generator()))  # a new one starts from torch's fixed seed
    assert ag.Generator().initial_seed() == torch.Generator().initial_seed()


def test_streams_are_independent():
    a, b = ag.Generator().manual_seed(1), ag.Generator().manual_seed(1)
    ag.manual_seed(1)
    reference = _draws(ag.Generator().manual_seed(1))
    _draws(None)  # the default generator
    ag.randn(100, generator=ag.Generator().manual_seed(2))
    assert _same(reference, _draws(a))
    ag.rand(3)
    assert _same(reference, _draws(b))


def test_global_seed_returns_default_generator():
    g = ag.manual_seed(11)
    assert g is ag.default_generator and ag.initial_seed() == 11
    assert isinstance(torch.manual_seed(11), torch.Generator)
    first = _draws(None)
    ag.manual_seed(11)
    assert _same(first, _draws(None))
    assert _same(first, _draws(ag.Generator().manual_seed(11)))
    assert ag.seed() == ag.initial_seed()


def test_state_round_trip():
    g = ag.Generator().manual_seed(3)
    ag.randn(5, generator=g)
    state = g.get_state()
    assert state.dtype == ag.uint8 and state.ndim == 1
    later = _draws(g)
    other = ag.Generator().set_state(state)
    assert _same(later, _draws(other)) and other.initial_seed() == 3
    g.set_state(state)
    assert _same(later, _draws(g))
    saved = ag.get_rng_state()
    x = ag.randn(4)
    ag.set_rng_state(saved)
    np.testing.assert_array_equal(x.numpy(), ag.randn(4).numpy())


def test_seeds_wrap_as_torchs():
    for seed in (-1, 2**63, -(2**63), 2**64 - 1, 0):
        assert ag.Generator().manual_seed(seed).initial_seed() == torch.Generator().manual_seed(seed).initial_seed()
    assert ag.manual_seed(2.9).initial_seed() == 2


def _same_error(torch_call, ours_call):
    with pytest.raises(Exception) as theirs:
        torch_call()
    with pytest.raises(type(theirs.value)) as ours:
        ours_call()
    assert str(ours.value) == str(theirs.value)


ERRORS = {
    "manual_seed str": lambda lib: lib.manual_seed("a"),
    "manual_seed None": lambda lib: lib.manual_seed(None),
    "manual_seed too big": lambda lib: lib.manual_seed(2**64),
    "Generator.manual_seed float": lambda lib: lib.Generator().manual_seed(1.5),
    "Generator.manual_seed bool": lambda lib: lib.Generator().manual_seed(True),
    "set_state int": lambda lib: lib.Generator().set_state(5),
    "set_state float tensor": lambda lib: lib.Generator().set_state(lib.zeros(3)),
    "rand int64": lambda lib: lib.rand(3, dtype=lib.int64),
    "randn int64": lambda lib: lib.randn(3, dtype=lib.int64),
    "rand_like int": lambda lib: lib.rand_like(lib.zeros(2, dtype=lib.int64)),
    "randperm negative": lambda lib: lib.randperm(-1),
    "randperm float": lambda lib: lib.randperm(2.5),
    "randperm int8 overflow": lambda lib: lib.randperm(300, dtype=lib.int8),
    "randperm requires_grad int": lambda lib: lib.randperm(3, requires_grad=True),
    "randint empty range": lambda lib: lib.randint(5, 5, (2,)),
    "normal negative float std": lambda lib: lib.normal(lib.zeros(3), -1.0),
    "normal negative tensor std": lambda lib: lib.normal(lib.zeros(3), -lib.ones(3)),
    "normal negative std with size": lambda lib: lib.normal(0.0, -1.0, (2,)),
    "normal mismatched shapes": lambda lib: lib.normal(lib.zeros(3), lib.ones(4)),
    "normal integer mean": lambda lib: lib.normal(lib.zeros(3, dtype=lib.int64), 1.0),
    "normal_ generator int": lambda lib: lib.zeros(2).normal_(generator=5),
    "bernoulli p > 1": lambda lib: lib.bernoulli(lib.full((4,), 1.5)),
    "bernoulli p < 0": lambda lib: lib.bernoulli(lib.full((4,), -0.5)),
    "bernoulli nan": lambda lib: lib.bernoulli(lib.full((4,), float("nan"))),
    "bernoulli int": lambda lib: lib.bernoulli(lib.ones(4, dtype=lib.int64)),
    "bernoulli float p": lambda lib: lib.bernoulli(lib.zeros(4), p=1.5),
    "multinomial too many": lambda lib: lib.multinomial(lib.tensor([0.1, 0.2, 0.7]), 4),
    "multinomial zero": lambda lib: lib.multinomial(lib.tensor([0.1, 0.2, 0.7]), 0),
    "multinomial negative weight": lambda lib: lib.multinomial(lib.tensor([-0.1, 1.0]), 1),
    "multinomial zero sum": lambda lib: lib.multinomial(lib.zeros(3), 1),
    "multinomial inf": lambda lib: lib.multinomial(lib.tensor([float("inf"), 1.0]), 1),
    "multinomial 3-d": lambda lib: lib.multinomial(lib.ones(2, 2, 2), 1),
    "multinomial 0-d": lambda lib: lib.multinomial(lib.tensor(1.0), 1),
    "multinomial int": lambda lib: lib.multinomial(lib.ones(3, dtype=lib.int64), 1),
    "multinomial no categories": lambda lib: lib.multinomial(lib.ones(2, 0), 1),
    "multinomial float count": lambda lib: lib.multinomial(lib.ones(3), 1.5),
    "uniform_ reversed": lambda lib: lib.zeros(3).uniform_(3, 2),
    "uniform_ int": lambda lib: lib.zeros(3, dtype=lib.int64).uniform_(),
    "uniform_ float inf": lambda lib: lib.zeros(3, dtype=lib.float32).uniform_(0, float("inf")),
    "uniform_ double inf": lambda lib: lib.zeros(3, dtype=lib.float64).uniform_(0, float("inf")),
    "uniform_ half from": lambda lib: lib.zeros(3, dtype=lib.float16).uniform_(-1e300, 0),
    "uniform_ leaf": lambda lib: lib.zeros(3, requires_grad=True).uniform_(),
    "normal_ negative std": lambda lib: lib.zeros(3).normal_(0, -1),
    "normal_ int": lambda lib: lib.zeros(3, dtype=lib.int64).normal_(),
    "bernoulli_ p > 1": lambda lib: lib.zeros(3).bernoulli_(1.3),
    "bernoulli_ tensor p > 1": lambda lib: lib.zeros(2).bernoulli_(lib.tensor([1.5, 0.0])),
}


@pytest.mark.parametrize("label", list(ERRORS))
def test_errors_use_torchs_words(label):
    _same_error(lambda: ERRORS[label](torch), lambda: ERRORS[label](ag))


# ---------------------------------------------------------------- samples
def test_shapes_dtypes_and_ranges():
    g = ag.Generator().manual_seed(0)
    u = ag.rand(2000, generator=g)
    assert u.dtype == ag.float32 and 0 <= u.min().item() and u.max().item() < 1
    assert abs(u.numpy().mean() - 0.5) < 0.03
    n = ag.randn(4000, dtype=ag.float64, generator=g).numpy()
    assert abs(n.mean()) < 0.06 and abs(n.std() - 1) < 0.05
    r = ag.randint(3, 8, (1000,), generator=g)
    assert r.dtype == ag.int64 and set(r.tolist()) == {3, 4, 5, 6, 7}
    assert ag.randint(5, (2, 3)).shape == (2, 3)
    p = ag.randperm(50, generator=g)
    assert p.dtype == ag.int64 and sorted(p.tolist()) == list(range(50))
    assert ag.randperm(4, dtype=ag.float64).dtype == ag.float64 and ag.randperm(0).shape == (0,)
    like = ag.randint_like(ag.zeros(2, 3), 3, 10, generator=g)
    assert like.dtype == ag.float32 and like.shape == (2, 3) and like.min().item() >= 3
    assert ag.randn_like(ag.zeros(2, dtype=ag.float64), generator=g).dtype == ag.float64
    assert ag.rand_like(ag.zeros(3, 1), generator=g).shape == (3, 1)


def test_normal_forms():
    g = ag.Generator().manual_seed(1)
    both = ag.normal(ag.full((4000,), 3.0, dtype=ag.float64), ag.full((4000,), 2.0, dtype=ag.float64), generator=g)
    assert both.dtype == ag.float64
    assert abs(both.numpy().mean() - 3) < 0.15 and abs(both.numpy().std() - 2) < 0.1
    assert ag.normal(ag.zeros(3, 1), ag.ones(4)).shape == torch.normal(torch.zeros(3, 1), torch.ones(4)).shape
    assert ag.normal(1.0, ag.ones(3)).shape == (3,)
    floats = ag.normal(5.0, 0.5, (3000,), generator=g).numpy()
    assert floats.dtype == np.float32 and abs(floats.mean() - 5) < 0.05 and abs(floats.std() - 0.5) < 0.03
    assert ag.normal(0.0, 1.0, (2,), dtype=ag.float64).dtype == ag.float64
    zero_std = ag.normal(ag.tensor([1.0, -2.0]), 0.0)
    assert zero_std.tolist() == [1.0, -2.0]


def test_bernoulli_and_multinomial_frequencies():
    g = ag.Generator().manual_seed(2)
    p = ag.tensor([0.0, 0.2, 0.9, 1.0], dtype=ag.float64).expand(5000, 4)
    b = ag.bernoulli(p, generator=g).numpy()
    assert b.dtype == np.float64 and set(np.unique(b)) <= {0.0, 1.0}
    np.testing.assert_allclose(b.mean(axis=0), [0.0, 0.2, 0.9, 1.0], atol=0.03)
    assert ag.bernoulli(ag.zeros(3000), 0.3, generator=g).numpy().mean() == pytest.approx(0.3, abs=0.03)
    weights = ag.tensor([1.0, 2.0, 0.0, 7.0])
    draws = ag.multinomial(weights, 5000, replacement=True, generator=g)
    assert draws.dtype == ag.int64 and draws.shape == (5000,)
    np.testing.assert_allclose(np.bincount(draws.numpy(), minlength=4) / 5000, [0.1, 0.2, 0.0, 0.7], atol=0.03)
    rows = ag.multinomial(ag.ones(3, 5), 5, generator=g)
    assert rows.shape == (3, 5) and all(sorted(r) == list(range(5)) for r in rows.tolist())
    # without replacement, zero-weight categories come only after every weighted one
    sparse = ag.multinomial(ag.tensor([0.0, 1.0, 0.0, 3.0]), 3, generator=g).tolist()
    assert set(sparse[:2]) == {1, 3} and sparse[2] in (0, 2)
    # the first draw without replacement follows the weights
    firsts = [ag.multinomial(weights, 2, generator=g)[0].item() for _ in range(2000)]
    np.testing.assert_allclose(np.bincount(firsts, minlength=4) / 2000, [0.1, 0.2, 0.0, 0.7], atol=0.04)
    assert ag.ones(3).multinomial(2).shape == (2,) and ag.full((3,), 0.5).bernoulli().shape == (3,)


# ---------------------------------------------------------------- in place
def test_inplace_samplers_fill_and_bump_the_version():
    g = ag.Generator().manual_seed(4)
    x = ag.zeros(3000, dtype=ag.float64)
    view = x[:10]
    v0 = x._version
    assert x.uniform_(2.0, 3.0, generator=g) is x and x._version == v0 + 1 and view._version == v0 + 1
    assert 2.0 <= x.min().item() and x.max().item() < 3.0
    x.normal_(1.0, 0.5, generator=g)
    assert x._version == v0 + 2 and abs(x.numpy().mean() - 1) < 0.05 and abs(x.numpy().std() - 0.5) < 0.03
    x.bernoulli_(0.25, generator=g)
    assert x._version == v0 + 3 and set(np.unique(x.numpy())) <= {0.0, 1.0}
    assert x.numpy().mean() == pytest.approx(0.25, abs=0.03)
    ints = ag.zeros(4, dtype=ag.int64).bernoulli_(ag.tensor([0.0, 1.0, 0.0, 1.0]))
    assert ints.tolist() == [0, 1, 0, 1] and ints.dtype == ag.int64
    first = ag.zeros(5).uniform_(generator=ag.Generator().manual_seed(9))
    np.testing.assert_array_equal(first.numpy(), ag.zeros(5).uniform_(generator=ag.Generator().manual_seed(9)).numpy())


async def test_saved_tensor_sees_the_inplace_sampler():
    a = ag.ones(3, requires_grad=True)
    b = a * 1
    c = b * b  # saves b
    b.normal_()
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        await c.sum().backward()


# ---------------------------------------------------------------- autograd (Note [Random ops and autograd])
def _zero_grads_as_torch(build):
    results = []
    for lib in (torch, ag):
        leaves = [lib.ones(3, dtype=lib.float64, requires_grad=True), lib.ones(2, 1, dtype=lib.float64,
                                                                                requires_grad=True)]
        out = build(lib, *leaves)
        results.append((out.requires_grad, type(out.grad_fn).__name__, leaves, out))
    return results


@pytest.mark.parametrize("name,build", [
    ("normal tensor tensor", lambda lib, m, s: lib.normal(m, s)),
    ("normal tensor float", lambda lib, m, s: lib.normal(m, 2.0)),
    ("normal float tensor", lambda lib, m, s: lib.normal(0.0, s)),
    ("bernoulli", lambda lib, m, s: lib.bernoulli(m * 0.5)),
    ("uniform_ non-leaf", lambda lib, m, s: (m * 2).uniform_()),
    ("normal_ non-leaf", lambda lib, m, s: (m * 2).normal_()),
    ("bernoulli_ float", lambda lib, m, s: (m * 2).bernoulli_(0.5)),
    ("bernoulli_ tensor", lambda lib, m, s: (m * 2).bernoulli_(s.expand(2, 3)[0] * 0.5)),
])
async def test_random_ops_have_zero_gradients_as_torch(name, build):
    (t_rg, t_name, t_leaves, t_out), (a_rg, a_name, a_leaves, a_out) = _zero_grads_as_torch(build)
    assert a_rg == t_rg and a_name == t_name
    t_out.sum().backward()
    await a_out.sum().backward()
    for t_leaf, a_leaf in zip(t_leaves, a_leaves):
        if t_leaf.grad is None:
            assert a_leaf.grad is None
        else:
            np.testing.assert_array_equal(a_leaf.grad.numpy(), t_leaf.grad.numpy())


def test_no_grad_records_nothing():
    m = ag.ones(3, requires_grad=True)
    with ag.no_grad():
        assert ag.normal(m, 1.0).grad_fn is None and not ag.bernoulli(m * 0.5).requires_grad
    assert not ag.normal(ag.ones(3), 1.0).requires_grad
    assert ag.randperm(3, dtype=ag.float64, requires_grad=True).requires_grad


# ---------------------------------------------------------------- init and DataLoader take a Generator
def test_init_and_dataloader_take_a_generator():
    w1, w2 = ag.empty(4, 5), ag.empty(4, 5)
    init.kaiming_uniform_(w1, generator=ag.Generator().manual_seed(5))
    init.kaiming_uniform_(w2, generator=ag.Generator().manual_seed(5))
    np.testing.assert_array_equal(w1.numpy(), w2.numpy())
    init.xavier_normal_(w2, generator=ag.Generator().manual_seed(6))
    assert not np.array_equal(w1.numpy(), w2.numpy())
    data = TensorDataset(ag.arange(20))

    def epochs(loader):
        return [[b[0].tolist() for b in loader] for _ in range(2)]

    g = ag.Generator().manual_seed(123)
    loader = DataLoader(data, batch_size=5, shuffle=True, generator=g)
    assert loader.generator is g
    first = epochs(loader)
    assert first[0] != first[1]
    g.manual_seed(123)
    assert epochs(loader) == first
    assert epochs(DataLoader(data, batch_size=5, shuffle=True, generator=123)) == first
    assert epochs(DataLoader(data, batch_size=5, shuffle=True, generator=np.random.default_rng(123))) == first
