"""Containers and Module features against torch.nn: names, order, hooks, apply, conversions."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest

import asyncgrad as ag
from asyncgrad import nn


def _tree(lib):
    """The same nested model in either library: Sequential from an OrderedDict, a ModuleList,
    a ModuleDict and a ParameterList inside a custom Module."""

    class Net(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = lib.nn.Sequential(OrderedDict(conv=lib.nn.Conv2d(1, 2, 3), act=lib.nn.ReLU()))
            self.blocks = lib.nn.ModuleList([lib.nn.Linear(8, 4), lib.nn.Linear(4, 3)])
            self.heads = lib.nn.ModuleDict({"a": lib.nn.Linear(3, 2), "b": lib.nn.Identity()})
            self.extra = lib.nn.ParameterList([lib.nn.Parameter(lib.zeros(2)), lib.nn.Parameter(lib.ones(3))])

        def forward(self, x):
            h = self.stem(x).flatten(1)
            for block in self.blocks:
                h = block(h)
            return self.heads["a"](self.heads["b"](h))

    return Net()


def test_names_and_order_match_torch(torch):
    ours, theirs = _tree(ag), _tree(torch)
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert [n for n, _ in ours.named_modules()] == [n for n, _ in theirs.named_modules()]
    assert [n for n, _ in ours.named_children()] == [n for n, _ in theirs.named_children()]
    assert [type(m).__name__ for m in ours.modules()] == [type(m).__name__ for m in theirs.modules()]
    assert [type(m).__name__ for m in ours.children()] == [type(m).__name__ for m in theirs.children()]
    assert repr(ours.stem) == repr(theirs.stem)


async def test_a_container_model_trains():
    ag.manual_seed(0)
    model = _tree(ag)
    x = ag.randn(5, 1, 4, 4)
    loss = model(x).pow(2).mean()
    await loss.backward()
    assert all(p.grad is not None for name, p in model.named_parameters() if not name.startswith("extra"))
    assert model.blocks[1].weight.grad.shape == (3, 4)


def test_module_list_and_sequential_behave_like_lists():
    layers = nn.ModuleList([nn.ReLU(), nn.Tanh()])
    layers.append(nn.Sigmoid())
    layers.insert(0, nn.Identity())
    layers += [nn.Flatten()]
    assert [type(m).__name__ for m in layers] == ["Identity", "ReLU", "Tanh", "Sigmoid", "Flatten"]
    del layers[1]
    assert [type(m).__name__ for m in layers] == ["Identity", "Tanh", "Sigmoid", "Flatten"]
    assert type(layers[-1]).__name__ == "Flatten" and len(layers[1:3]) == 2
    with pytest.raises(IndexError, match="index 9 is out of range"):
        layers[9]
    with pytest.raises(TypeError, match="is not a Module subclass"):
        layers.append(3)
    seq = nn.Sequential(OrderedDict(first=nn.Linear(2, 3), second=nn.ReLU()))
    assert [n for n, _ in seq.named_children()] == ["first", "second"] and isinstance(seq[0], nn.Linear)
    assert type(seq[1:][0]).__name__ == "ReLU"
    assert list(seq.state_dict()) == ["first.weight", "first.bias"]


def test_module_dict_and_parameter_list():
    heads = nn.ModuleDict([("x", nn.Linear(2, 2)), ("y", nn.ReLU())])
    heads["z"] = nn.Tanh()
    assert list(heads) == ["x", "y", "z"] and "y" in heads and len(heads) == 3
    assert [type(m).__name__ for m in heads.values()] == ["Linear", "ReLU", "Tanh"]
    assert type(heads.pop("y")).__name__ == "ReLU" and list(heads.keys()) == ["x", "z"]
    with pytest.raises(KeyError):
        heads["nope"]
    params = nn.ParameterList([ag.zeros(2)])
    params.append(nn.Parameter(ag.ones(3)))
    assert all(isinstance(p, nn.Parameter) and p.requires_grad for p in params)
    holder = nn.Module()
    holder.params = params
    assert [n for n, _ in holder.named_parameters()] == ["params.0", "params.1"]


def test_forward_hooks_and_pre_hooks():
    layer = nn.Linear(2, 2)
    calls = []
    pre = layer.register_forward_pre_hook(lambda m, args: (args[0] * 0,))
    post = layer.register_forward_hook(lambda m, args, out: calls.append(("post", out.shape)) or out + 100)
    first = layer.register_forward_hook(lambda m, args, out: calls.append(("first", None)), prepend=True)
    out = layer(ag.ones(3, 2))
    assert calls == [("first", None), ("post", (3, 2))]
    np.testing.assert_allclose(out.detach().numpy(), (layer.bias.detach().numpy() + 100)[None].repeat(3, 0))
    for handle in (pre, post, first):
        handle.remove()
    calls.clear()
    x = ag.ones(1, 2)
    np.testing.assert_allclose(layer(x).detach().numpy(), (x @ layer.weight.T + layer.bias).detach().numpy())
    assert calls == []


def test_hooks_see_what_torch_hooks_see(torch):
    seen = {}
    for lib in (ag, torch):
        model = lib.nn.Sequential(lib.nn.Flatten(), lib.nn.Identity())
        model[1].register_forward_pre_hook(lambda m, args, lib=lib: seen.setdefault(lib.__name__, []).append(
            (type(m).__name__, len(args), tuple(args[0].shape))))
        model(lib.zeros(2, 3, 4))
    assert seen["asyncgrad"] == seen["torch"] == [("Identity", 1, (2, 12))]


def test_apply_visits_children_first_as_torch(torch):
    ours, theirs = [], []
    _tree(ag).apply(lambda m: ours.append(type(m).__name__))
    _tree(torch).apply(lambda m: theirs.append(type(m).__name__))
    assert ours == theirs


async def test_to_double_float_and_devices_keep_the_parameters():
    model = nn.Sequential(nn.Linear(3, 2), nn.ReLU(), nn.Linear(2, 1))
    params = list(model.parameters())
    optimizer = ag.optim.SGD(model.parameters(), lr=0.1)
    loss = model(ag.ones(4, 3)).sum()
    await loss.backward()
    assert model.double() is model
    assert list(model.parameters()) == params and all(p is q for p, q in zip(model.parameters(), params))
    assert all(p.dtype == np.float64 and p.grad.dtype == np.float64 for p in params)
    optimizer.step()  # the optimizer holds the same Parameters
    model.float()
    assert all(p.dtype == np.float32 for p in params)
    model.to("sim:0")
    assert all(p.device is ag.device("sim:0") and p.grad.device is ag.device("sim:0") for p in params)
    out = model(ag.ones(2, 3, device="sim:0"))
    assert out.device is ag.device("sim:0")
    model.to(ag.zeros(1, dtype=ag.float64)).cpu()
    assert all(p.device is ag.device("cpu") and p.dtype == np.float64 for p in params)
    with pytest.raises(TypeError, match="nn.Module.to only accepts floating point"):
        model.to(ag.int64)


def test_train_eval_requires_grad_and_zero_grad():
    model = _tree(ag)
    model.eval()
    assert not any(m.training for m in model.modules())
    model.train()
    assert all(m.training for m in model.modules())
    model.requires_grad_(False)
    assert not any(p.requires_grad for p in model.parameters())
    model.requires_grad_()
    for p in model.parameters():
        p.grad = ag.ones_like(p)
    model.zero_grad(set_to_none=False)
    assert all(not p.grad.numpy().any() for p in model.parameters())
    model.zero_grad()
    assert all(p.grad is None for p in model.parameters())
