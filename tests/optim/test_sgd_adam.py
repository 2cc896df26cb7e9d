"""asyncgrad.optim: SGD and Adam against torch.optim on the same gradients (float64, 1e-12)."""

import numpy as np
import pytest

import asyncgrad as ag
from asyncgrad import nn, optim

SHAPES = [(3, 4), (4,), ()]


def _ids(settings):
    return ",".join(f"{key}={value}" for key, value in settings.items()) or "defaults"


def _run_both(torch, make_ours, make_theirs, steps=5, seed=0):
    """Step both optimizers on identical parameters with identical random gradients."""
    rng = np.random.default_rng(seed)
    initial = [rng.standard_normal(shape) for shape in SHAPES]
    ours = [ag.tensor(value, requires_grad=True) for value in initial]
    theirs = [torch.tensor(value, requires_grad=True) for value in initial]
    ours_opt, theirs_opt = make_ours(ours), make_theirs(theirs)
    for _ in range(steps):
        for p, q in zip(ours, theirs):
            grad = rng.standard_normal(p.shape)
            p.grad, q.grad = ag.tensor(grad), torch.tensor(grad)
        ours_opt.step()
        theirs_opt.step()
    for p, q in zip(ours, theirs):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-12, atol=1e-12)
    return ours_opt, ours


SGD_SETTINGS = [
    dict(lr=0.1),
    dict(lr=0.1, momentum=0.9),
    dict(lr=0.05, momentum=0.9, dampening=0.3),
    dict(lr=0.05, momentum=0.8, nesterov=True),
    dict(lr=0.1, momentum=0.9, weight_decay=0.01),
    dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.1),
]


@pytest.mark.parametrize("settings", SGD_SETTINGS, ids=_ids)
def test_sgd_matches_torch(torch, settings):
    _run_both(torch, lambda ps: optim.SGD(ps, **settings), lambda ps: torch.optim.SGD(ps, **settings))


ADAM_SETTINGS = [
    dict(),
    dict(lr=0.01, betas=(0.8, 0.99)),
    dict(lr=0.1, eps=1e-6, weight_decay=0.05),
]


@pytest.mark.parametrize("settings", ADAM_SETTINGS, ids=_ids)
def test_adam_matches_torch(torch, settings):
    opt, params = _run_both(torch, lambda ps: optim.Adam(ps, **settings), lambda ps: torch.optim.Adam(ps, **settings),
                            steps=8)
    state = opt.state[params[0]]
    assert state["step"] == 8 and state["exp_avg"].shape == params[0].shape


def test_param_groups_override_defaults(torch):
    opt, params = _run_both(
        torch,
        lambda ps: optim.SGD([{"params": ps[:1], "lr": 0.5}, {"params": ps[1:]}], lr=0.1, momentum=0.5),
        lambda ps: torch.optim.SGD([{"params": ps[:1], "lr": 0.5}, {"params": ps[1:]}], lr=0.1, momentum=0.5),
    )
    assert [group["lr"] for group in opt.param_groups] == [0.5, 0.1]
    assert opt.param_groups[1]["momentum"] == 0.5


async def test_training_steps_match_torch_end_to_end(torch):
    """Forward, await backward, Adam with weight decay on a module's Parameters, three times over."""
    ag.manual_seed(0)
    ours = nn.Sequential(nn.Linear(2, 8, dtype=ag.float64), nn.ReLU(), nn.Linear(8, 3, dtype=ag.float64))
    theirs = torch.nn.Sequential(torch.nn.Linear(2, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3)).double()
    with torch.no_grad():
        for p, q in zip(ours.parameters(), theirs.parameters()):
            q.copy_(torch.from_numpy(p.detach().numpy().copy()))
    rng = np.random.default_rng(0)
    x, labels = rng.standard_normal((16, 2)), rng.integers(0, 3, 16)
    ours_opt = optim.Adam(ours.parameters(), lr=0.05, weight_decay=0.01)
    theirs_opt = torch.optim.Adam(theirs.parameters(), lr=0.05, weight_decay=0.01)
    for _ in range(3):
        ours_opt.zero_grad()
        theirs_opt.zero_grad()
        await nn.functional.cross_entropy(ours(ag.tensor(x)), ag.tensor(labels)).backward()
        torch.nn.functional.cross_entropy(theirs(torch.from_numpy(x)), torch.from_numpy(labels)).backward()
        ours_opt.step()
        theirs_opt.step()
    for p, q in zip(ours.parameters(), theirs.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-12, atol=1e-12)


def test_step_updates_in_place_bumps_the_version_and_skips_params_without_grad():
    p = ag.tensor([1.0, 2.0], requires_grad=True)
    untouched = ag.tensor([5.0], requires_grad=True)
    data = p.detach().numpy()
    opt = optim.SGD([p, untouched], lr=0.5)
    p.grad = ag.tensor([2.0, 2.0])
    opt.step()
    assert p.tolist() == [0.0, 1.0] and np.shares_memory(data, p.detach().numpy())
    assert p._version == 1 and untouched._version == 0
    assert p.is_leaf and p.grad_fn is None


def test_zero_grad():
    p = ag.tensor([1.0], requires_grad=True)
    opt = optim.Adam([p])
    p.grad = ag.tensor([3.0])
    grad = p.grad
    opt.zero_grad(set_to_none=False)
    assert p.grad is grad and p.grad.tolist() == [0.0]
    opt.zero_grad()
    assert p.grad is None


def test_invalid_arguments_use_torchs_messages():
    p = ag.tensor([1.0], requires_grad=True)
    with pytest.raises(ValueError, match="optimizer got an empty parameter list"):
        optim.SGD([], lr=0.1)
    with pytest.raises(TypeError, match="should be an iterable of Tensors or dicts"):
        optim.SGD(p, lr=0.1)
    with pytest.raises(TypeError, match="optimizer can only optimize Tensors"):
        optim.SGD([1.0], lr=0.1)
    with pytest.raises(ValueError, match="can't optimize a non-leaf Tensor"):
        optim.SGD([p * 2], lr=0.1)
    with pytest.raises(ValueError, match="some parameters appear in more than one parameter group"):
        optim.SGD([{"params": [p]}, {"params": [p]}], lr=0.1)
    with pytest.raises(ValueError, match="Invalid learning rate: -1"):
        optim.Adam([p], lr=-1)
    with pytest.raises(ValueError, match="Invalid beta parameter at index 1: 1.0"):
        optim.Adam([p], betas=(0.9, 1.0))
    with pytest.raises(ValueError, match="Nesterov momentum requires a momentum and zero dampening"):
        optim.SGD([p], lr=0.1, nesterov=True)


def test_repr_lists_the_groups():
    opt = optim.SGD([ag.tensor([1.0], requires_grad=True)], lr=0.1)
    assert repr(opt).startswith("SGD (\nParameter Group 0\n    dampening: 0.0\n    lr: 0.1\n")
