"""asyncgrad.nn: module tree, Parameter, state_dict, repr, and layers against torch.nn."""

import numpy as np
import pytest

import asyncgrad as ag
from asyncgrad import nn
from asyncgrad.nn import functional as F


class TwoLayers(nn.Module):
    """Exercises registration through a list attribute and a shared (tied) parameter."""

    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(ag.ones(1))
        self.layers = [nn.Linear(3, 4), nn.Linear(4, 2)]
        self.again = self.scale
        self.note = "not a member"

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x * self.scale


# ---------------------------------------------------------------------- Parameter
def test_parameter_is_a_leaf_that_requires_grad_and_shares_memory():
    base = ag.zeros(3)
    param = nn.Parameter(base)
    assert isinstance(param, ag.Tensor) and param.is_leaf and param.requires_grad
    with ag.no_grad():
        param.add_(1)
    assert base.tolist() == [1.0, 1.0, 1.0]
    assert base._version == param._version == 1
    assert not nn.Parameter(ag.zeros(1), requires_grad=False).requires_grad


def test_parameter_repr():
    param = nn.Parameter(ag.ones(2))
    assert repr(param) == "Parameter containing:\ntensor([1., 1.], requires_grad=True)"  # torch's text
    with pytest.raises(TypeError, match="expects a Tensor"):
        nn.Parameter([1.0])


async def test_a_parameter_in_tensor_arithmetic_gets_its_gradient():
    param = nn.Parameter(ag.tensor([2.0]))
    out = ag.tensor([3.0]) * param + param * 2
    assert type(out) is ag.Tensor
    await out.sum().backward()
    assert param.grad.tolist() == [5.0]


# ---------------------------------------------------------------------- the module tree
def test_named_parameters_recurse_into_lists_and_skip_duplicates():
    model = TwoLayers()
    names = [name for name, _ in model.named_parameters()]
    assert names == ["scale", "layers.0.weight", "layers.0.bias", "layers.1.weight", "layers.1.bias"]
    assert [name for name, _ in model.named_parameters(recurse=False)] == ["scale"]
    assert [name for name, _ in model.named_modules()] == ["", "layers.0", "layers.1"]
    assert len(list(model.parameters())) == 5


def test_sequential_names_indexing_and_a_shared_module():
    shared = nn.Linear(2, 2)
    model = nn.Sequential(shared, nn.ReLU(), shared)
    assert [name for name, _ in model.named_parameters()] == ["0.weight", "0.bias"]
    assert list(model.state_dict()) == ["0.weight", "0.bias", "2.weight", "2.bias"]
    assert repr(model).count("Linear") == 2
    assert len(model) == 3 and model[0] is shared and model[-1] is shared
    assert isinstance(model[1:], nn.Sequential) and len(model[1:]) == 2
    assert [type(m).__name__ for m in model] == ["Linear", "ReLU", "Linear"]
    with pytest.raises(TypeError, match="not a Module subclass"):
        model.append(ag.zeros(1))


def test_forward_is_required():
    with pytest.raises(NotImplementedError, match='missing the required "forward"'):
        nn.Module()(ag.zeros(1))


def test_train_and_eval_reach_every_submodule():
    model = TwoLayers()
    assert model.eval() is model
    assert not any(m.training for m in model.modules())
    model.train()
    assert all(m.training for m in model.modules())


async def test_zero_grad_sets_to_none_or_zeros_in_place():
    model = nn.Sequential(nn.Linear(3, 2))
    await model(ag.ones(4, 3)).sum().backward()
    weight_grad = model[0].weight.grad
    model.zero_grad(set_to_none=False)
    assert model[0].weight.grad is weight_grad
    assert not weight_grad.numpy().any()
    model.zero_grad()
    assert all(p.grad is None for p in model.parameters())


# ---------------------------------------------------------------------- state_dict
def test_state_dict_round_trip_copies_in_place():
    ag.manual_seed(1)
    source, target = TwoLayers(), TwoLayers()
    weight = target.layers[0].weight
    result = target.load_state_dict(source.state_dict())
    assert result.missing_keys == [] and result.unexpected_keys == []
    assert target.layers[0].weight is weight
    for (name, a), (_, b) in zip(source.named_parameters(), target.named_parameters()):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy(), err_msg=name)
    state = source.state_dict()
    assert not state["scale"].requires_grad
    assert np.shares_memory(state["scale"].numpy(), source.scale.detach().numpy())


def test_load_state_dict_reports_missing_unexpected_and_size_mismatch():
    model = nn.Linear(2, 3)
    with pytest.raises(RuntimeError) as info:
        model.load_state_dict({"weight": ag.zeros(3, 2), "extra": ag.zeros(1)})
    message = str(info.value)
    assert message.startswith("Error(s) in loading state_dict for Linear:")
    assert 'Unexpected key(s) in state_dict: "extra".' in message
    assert 'Missing key(s) in state_dict: "bias".' in message
    with pytest.raises(RuntimeError, match="size mismatch for weight: copying a param with shape"):
        model.load_state_dict({"weight": ag.zeros(2, 2), "bias": ag.zeros(3)})
    result = model.load_state_dict({"weight": np.ones((3, 2), dtype=np.float32)}, strict=False)
    assert result.missing_keys == ["bias"]
    assert model.weight.detach().numpy().tolist() == [[1.0, 1.0]] * 3


# ---------------------------------------------------------------------- repr
def test_repr_matches_torch(torch):
    ours = nn.Sequential(nn.Linear(2, 16), nn.ReLU(inplace=True), nn.Sequential(nn.Tanh(), nn.Sigmoid()),
                         nn.Linear(16, 3, bias=False), nn.MSELoss())
    theirs = torch.nn.Sequential(torch.nn.Linear(2, 16), torch.nn.ReLU(inplace=True),
                                 torch.nn.Sequential(torch.nn.Tanh(), torch.nn.Sigmoid()),
                                 torch.nn.Linear(16, 3, bias=False), torch.nn.MSELoss())
    assert repr(ours) == repr(theirs)


# ---------------------------------------------------------------------- layers
def test_linear_init_follows_torch_bounds_and_the_seed():
    ag.manual_seed(0)
    layer = nn.Linear(100, 50)
    bound = 1 / np.sqrt(100)
    assert layer.weight.shape == (50, 100) and layer.bias.shape == (50,)
    assert layer.weight.dtype == ag.float32
    values = layer.weight.detach().numpy()
    assert np.abs(values).max() <= bound and np.abs(values).max() > 0.9 * bound
    assert abs(values.mean()) < 0.01
    ag.manual_seed(0)
    np.testing.assert_array_equal(nn.Linear(100, 50).weight.detach().numpy(), values)
    assert nn.Linear(3, 2, bias=False).bias is None
    assert nn.Linear(3, 2, dtype=ag.float64).weight.dtype == ag.float64


def _copy_to_torch(torch, ours, theirs):
    with torch.no_grad():
        for (name, p), (torch_name, q) in zip(ours.named_parameters(), theirs.named_parameters()):
            assert name == torch_name
            q.copy_(torch.from_numpy(p.detach().numpy().copy()))


async def test_mlp_forward_and_backward_match_torch(torch):
    ag.manual_seed(3)
    ours = nn.Sequential(nn.Linear(5, 8, dtype=ag.float64), nn.Tanh(), nn.Linear(8, 8, dtype=ag.float64),
                         nn.Sigmoid(), nn.Linear(8, 8, dtype=ag.float64), nn.ReLU(), nn.Linear(8, 3, dtype=ag.float64))
    theirs = torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.Tanh(), torch.nn.Linear(8, 8), torch.nn.Sigmoid(),
                                 torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3)).double()
    _copy_to_torch(torch, ours, theirs)
    rng = np.random.default_rng(0)
    x, labels = rng.standard_normal((7, 5)), rng.integers(0, 3, 7)
    loss = nn.CrossEntropyLoss()(ours(ag.tensor(x)), ag.tensor(labels))
    torch_loss = torch.nn.CrossEntropyLoss()(theirs(torch.from_numpy(x)), torch.from_numpy(labels))
    await loss.backward()
    torch_loss.backward()
    np.testing.assert_allclose(loss.item(), torch_loss.item(), rtol=1e-12)
    for (name, p), (_, q) in zip(ours.named_parameters(), theirs.named_parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-10, atol=1e-13, err_msg=name)


async def test_linear_on_a_batch_of_sequences_and_mse_loss_match_torch(torch):
    ours = nn.Linear(4, 2, dtype=ag.float64)
    theirs = torch.nn.Linear(4, 2).double()
    _copy_to_torch(torch, ours, theirs)
    rng = np.random.default_rng(1)
    x, target = rng.standard_normal((3, 5, 4)), rng.standard_normal((3, 5, 2))
    x_ours, x_theirs = ag.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    loss = nn.MSELoss(reduction="sum")(ours(x_ours), ag.tensor(target))
    torch_loss = torch.nn.MSELoss(reduction="sum")(theirs(x_theirs), torch.from_numpy(target))
    await loss.backward()
    torch_loss.backward()
    np.testing.assert_allclose(loss.item(), torch_loss.item(), rtol=1e-12)
    np.testing.assert_allclose(x_ours.grad.numpy(), x_theirs.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(ours.weight.grad.numpy(), theirs.weight.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(ours.bias.grad.numpy(), theirs.bias.grad.numpy(), rtol=1e-12)


async def test_cross_entropy_loss_passes_weight_and_ignore_index(torch):
    rng = np.random.default_rng(2)
    logits, labels, weight = rng.standard_normal((6, 4)), np.array([0, 3, -1, 2, 1, 3]), rng.random(4)
    ours_logits = ag.tensor(logits, requires_grad=True)
    theirs_logits = torch.tensor(logits, requires_grad=True)
    loss = nn.CrossEntropyLoss(weight=ag.tensor(weight), ignore_index=-1)(ours_logits, ag.tensor(labels))
    torch_loss = torch.nn.CrossEntropyLoss(weight=torch.from_numpy(weight), ignore_index=-1)(
        theirs_logits, torch.from_numpy(labels))
    await loss.backward()
    torch_loss.backward()
    np.testing.assert_allclose(loss.item(), torch_loss.item(), rtol=1e-12)
    np.testing.assert_allclose(ours_logits.grad.numpy(), theirs_logits.grad.numpy(), rtol=1e-12, atol=1e-15)


# ---------------------------------------------------------------------- functional
def test_functional_exports_the_fused_ops():
    from asyncgrad.ops import nn as nn_ops
    from asyncgrad.ops import reduction

    assert F.linear is nn_ops.linear and F.mse_loss is nn_ops.mse_loss
    assert F.cross_entropy is nn_ops.cross_entropy and F.nll_loss is nn_ops.nll_loss
    assert F.softmax is reduction.softmax and F.log_softmax is reduction.log_softmax
    probabilities = F.softmax(ag.tensor([[1.0, 2.0, 3.0]]), 1)
    np.testing.assert_allclose(probabilities.sum(1).numpy(), [1.0], rtol=1e-6)


def test_relu_inplace_overwrites_its_input():
    x = ag.tensor([-1.0, 2.0])
    out = F.relu(x)
    assert out is not x and x.tolist() == [-1.0, 2.0]
    assert F.relu(x, inplace=True) is x
    assert x.tolist() == [0.0, 2.0] and x._version == 1
    leaf = ag.tensor([-1.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        nn.ReLU(inplace=True)(leaf)
