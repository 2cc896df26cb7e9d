"""ag.utils.data: datasets, default_collate against torch's, shuffling, drop_last, and the
``async for`` form that makes the next batch in a thread while the caller trains."""

import asyncio
import re
import threading
from collections import namedtuple

import numpy as np
import pytest

import asyncgrad as ag
from asyncgrad.utils.data import DataLoader, Dataset, Subset, TensorDataset, default_collate, random_split

Point = namedtuple("Point", ["x", "y"])


class Mixed(Dataset):
    """Samples of every kind default_collate knows."""

    def __len__(self):
        return 7

    def __getitem__(self, i):
        return {"image": np.full((2, 3), i, dtype=np.float32), "label": i, "weight": i / 2, "name": f"s{i}",
                "pair": (np.int64(i), ag.tensor([i, -i])), "point": Point(float(i), [i, i + 1]),
                "flag": np.bool_(i % 2)}


def _torch_like(value, torch):
    """Our collated structure with tensors turned into torch's, for comparing with torch's collate."""
    if isinstance(value, ag.Tensor):
        return torch.from_numpy(np.array(value.numpy()))
    if isinstance(value, Point):
        return Point(*(_torch_like(v, torch) for v in value))
    if isinstance(value, dict):
        return {k: _torch_like(v, torch) for k, v in value.items()}
    if isinstance(value, list):
        return [_torch_like(v, torch) for v in value]
    return value


def _assert_same(ours, theirs, torch):
    if isinstance(theirs, torch.Tensor):
        assert isinstance(ours, torch.Tensor) and ours.dtype == theirs.dtype and ours.shape == theirs.shape
        assert torch.equal(ours, theirs)
    elif isinstance(theirs, (dict,)):
        assert type(ours) is type(theirs) and list(ours) == list(theirs)
        for key in theirs:
            _assert_same(ours[key], theirs[key], torch)
    elif isinstance(theirs, (list, tuple)):
        assert type(ours) is type(theirs) and len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            _assert_same(a, b, torch)
    else:
        assert ours == theirs


class TorchMixed(Mixed):
    def __init__(self, torch):
        self.torch = torch

    def __getitem__(self, i):
        sample = super().__getitem__(i)
        sample["pair"] = (sample["pair"][0], self.torch.tensor([i, -i]))
        return sample


@pytest.mark.parametrize("batch_size,drop_last", [(3, False), (3, True), (7, False), (10, True), (None, False)])
def test_batches_equal_torchs(torch, batch_size, drop_last):
    ours = DataLoader(Mixed(), batch_size=batch_size, drop_last=drop_last)
    theirs = torch.utils.data.DataLoader(TorchMixed(torch), batch_size=batch_size, drop_last=drop_last)
    assert len(ours) == len(theirs)
    batches = list(ours)
    assert len(batches) == len(theirs)
    for mine, torchs in zip(batches, theirs):
        _assert_same(_torch_like(mine, torch), torchs, torch)


def test_tensor_dataset(torch):
    x, y = ag.arange(12.0).reshape(6, 2), ag.tensor([0, 1, 0, 1, 1, 0])
    dataset = TensorDataset(x, y)
    assert len(dataset) == 6 and dataset[4][0].tolist() == [8.0, 9.0] and dataset[4][1].item() == 1
    with pytest.raises(AssertionError, match="Size mismatch between tensors"):
        TensorDataset(x, ag.zeros(5))
    fast = list(DataLoader(dataset, batch_size=4))
    slow = list(DataLoader(dataset, batch_size=4, collate_fn=lambda batch: default_collate(batch)))
    theirs = list(torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.arange(12.0).reshape(6, 2),
                                                                             torch.tensor([0, 1, 0, 1, 1, 0])),
                                              batch_size=4))
    for a, b, c in zip(fast, slow, theirs):
        assert isinstance(a, list) and len(a) == 2
        for u, v, w in zip(a, b, c):
            assert u.dtype == v.dtype and u.tolist() == v.tolist() == w.tolist()


def test_shuffle_is_a_fresh_permutation_each_epoch_and_repeatable():
    dataset = TensorDataset(ag.arange(50))

    def epochs(loader, n=3):
        return [np.concatenate([batch[0].numpy() for batch in loader]).tolist() for _ in range(n)]

    first = epochs(DataLoader(dataset, batch_size=8, shuffle=True, generator=123))
    assert all(sorted(epoch) == list(range(50)) for epoch in first)
    assert first[0] != first[1] != first[2] and first[0] != list(range(50))
    assert first == epochs(DataLoader(dataset, batch_size=8, shuffle=True, generator=np.random.default_rng(123)))
    ag.manual_seed(5)
    seeded = epochs(DataLoader(dataset, batch_size=8, shuffle=True))
    ag.manual_seed(5)
    assert seeded == epochs(DataLoader(dataset, batch_size=8, shuffle=True))
    assert epochs(DataLoader(dataset, batch_size=8), 1)[0] == list(range(50))


def test_drop_last_and_custom_collate():
    dataset = TensorDataset(ag.arange(10))
    assert [len(b[0]) for b in DataLoader(dataset, batch_size=4)] == [4, 4, 2]
    assert [len(b[0]) for b in DataLoader(dataset, batch_size=4, drop_last=True)] == [4, 4]
    assert len(DataLoader(dataset, batch_size=4, drop_last=True)) == 2
    sums = list(DataLoader(dataset, batch_size=3, collate_fn=lambda batch: sum(s[0].item() for s in batch)))
    assert sums == [3, 12, 21, 9]


async def test_async_for_gives_the_same_batches_as_for():
    dataset = Mixed()
    plain = [b["label"].tolist() for b in DataLoader(dataset, batch_size=2, shuffle=True, generator=9)]
    prefetched = [b["label"].tolist() async for b in DataLoader(dataset, batch_size=2, shuffle=True, generator=9)]
    assert plain == prefetched and len(plain) == 4
    assert [b async for b in DataLoader(TensorDataset(ag.zeros(0)), batch_size=2)] == []


class Recording(Dataset):
    """Records which thread made each sample, and lets the test see sample 2 being made."""

    def __init__(self):
        self.threads = {}
        self.grad_enabled = {}
        self.second_batch_started = threading.Event()

    def __len__(self):
        return 6

    def __getitem__(self, i):
        self.threads[i] = threading.get_ident()
        self.grad_enabled[i] = ag.is_grad_enabled()
        if i == 2:
            self.second_batch_started.set()
        return np.float64(i)


async def test_async_for_makes_the_next_batch_while_the_caller_works():
    """While the body of the loop is still busy with batch 0 (awaiting, as a backward does),
    batch 1 gets made in another thread: the body sees it start before it lets go."""
    dataset = Recording()
    seen_during_batch_0 = None
    with ag.no_grad():
        async for batch in DataLoader(dataset, batch_size=2):
            if batch.tolist() == [0.0, 1.0]:
                # the caller "trains" on batch 0 until batch 1 starts being made elsewhere
                seen_during_batch_0 = await asyncio.to_thread(dataset.second_batch_started.wait, 30)
    assert seen_during_batch_0 is True
    assert threading.get_ident() not in set(dataset.threads.values())
    assert not any(dataset.grad_enabled.values())  # the caller's no_grad reached the thread


async def test_async_training_loop_learns():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 3))
    y = x @ np.array([1.5, -2.0, 0.5]) + 0.3
    loader = DataLoader(TensorDataset(ag.tensor(x), ag.tensor(y)), batch_size=16, shuffle=True, generator=0)
    model = ag.nn.Linear(3, 1, dtype=ag.float64)
    opt = ag.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for _ in range(20):
        async for xb, yb in loader:
            opt.zero_grad()
            loss = ag.nn.functional.mse_loss(model(xb).reshape(-1), yb)
            await loss.backward()
            opt.step()
            losses.append(loss.item())
    assert losses[-1] < 1e-3 * losses[0]


class Broken(Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        if i == 5:
            raise KeyError(f"sample {i} is missing")
        return float(i)


async def test_an_error_in_the_loading_thread_reaches_the_async_for():
    seen = []
    with pytest.raises(KeyError, match="sample 5 is missing"):
        async for batch in DataLoader(Broken(), batch_size=2):
            seen.append(batch.tolist())
    assert seen == [[0.0, 1.0], [2.0, 3.0]]


async def test_leaving_async_for_early_ends_the_thread():
    iterator = DataLoader(TensorDataset(ag.arange(100)), batch_size=10).__aiter__()
    first = await iterator.__anext__()
    assert first[0].tolist() == list(range(10))
    await iterator.aclose()
    for thread in threading.enumerate():
        if thread.name.startswith("asyncgrad-dataloader"):
            thread.join(30)
            assert not thread.is_alive()


def test_random_split(torch):
    dataset = TensorDataset(ag.arange(10))
    for lengths in ([3, 7], [0.25, 0.25, 0.5], [0.33, 0.33, 0.34]):
        parts = random_split(dataset, lengths, generator=1)
        torch_parts = torch.utils.data.random_split(range(10), lengths)
        assert [len(p) for p in parts] == [len(p) for p in torch_parts]
        assert all(isinstance(p, Subset) for p in parts)
        values = sorted(int(p[i][0].item()) for p in parts for i in range(len(p)))
        assert values == list(range(10))
    with pytest.raises(ValueError, match="Sum of input lengths does not equal the length of the input dataset!"):
        random_split(dataset, [3, 3])
    with pytest.raises(ValueError, match="Fraction at index 1 is not between 0 and 1"):
        random_split(dataset, [0.5, -0.5, 1.0])
    with pytest.warns(UserWarning, match="Length of split at index 1 is 0"):
        random_split(TensorDataset(ag.arange(1)), [0.5, 0.5])


BAD = [dict(batch_size=0), dict(batch_size=-2), dict(drop_last="yes"), dict(batch_size=None, drop_last=True),
       dict(num_workers=-1)]


@pytest.mark.parametrize("settings", BAD, ids=str)
def test_bad_arguments_raise_torchs_errors(torch, settings):
    with pytest.raises(ValueError) as theirs:
        torch.utils.data.DataLoader(range(4), **settings)
    with pytest.raises(ValueError, match=f"^{re.escape(str(theirs.value))}$"):
        DataLoader(TensorDataset(ag.arange(4)), **settings)


def test_bad_samples_and_options(torch):
    with pytest.raises(TypeError) as theirs:
        torch.utils.data.default_collate([object(), object()])
    with pytest.raises(TypeError, match=f"^{re.escape(str(theirs.value))}$"):
        default_collate([object(), object()])
    with pytest.raises(RuntimeError, match="each element in list of batch should be of equal size"):
        default_collate([[1, 2], [3]])
    with pytest.raises(TypeError, match="default_collate: batch must contain .* found <U1"):
        default_collate([np.array(["a"]), np.array(["b"])])
    with pytest.raises(NotImplementedError, match="Subclasses of Dataset should implement __getitem__."):
        Dataset()[0]
    ported = DataLoader(TensorDataset(ag.arange(4)), batch_size=2, num_workers=4, pin_memory=True)
    assert [b[0].tolist() for b in ported] == [[0, 1], [2, 3]]
    with pytest.raises(TypeError, match="generator must be an asyncgrad.Generator, a numpy.random.Generator, an int "
                                        "seed or None, not str"):
        DataLoader(TensorDataset(ag.arange(4)), shuffle=True, generator="seed")
