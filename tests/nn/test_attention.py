"""scaled_dot_product_attention, MultiheadAttention and TransformerEncoderLayer against torch, with
torch's weights loaded: outputs, attention weights and gradients (inputs and parameters), float64."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import check_gradgrad, check_op, check_raises

import asyncgrad as ag

DEVICES = pytest.mark.parametrize("op_device", ["cpu", "sim:0"], indirect=True)
RNG = np.random.default_rng(5)
Q = RNG.standard_normal((2, 3, 4, 5))
K = RNG.standard_normal((2, 3, 6, 5))
V = RNG.standard_normal((2, 3, 6, 5))
BOOL_MASK = RNG.uniform(size=(4, 6)) > 0.3
BOOL_MASK[:, 0] = True  # every query keeps a key: no row of -inf only
FLOAT_MASK = RNG.standard_normal((2, 1, 4, 6))


@DEVICES
@pytest.mark.parametrize("kwargs", [{}, {"is_causal": True}, {"scale": 0.3}, {"mask": "bool"}, {"mask": "float"}],
                         ids=["plain", "causal", "scale", "bool-mask", "float-mask"])
async def test_scaled_dot_product_attention(kwargs):
    kwargs = dict(kwargs)
    mask = {"bool": BOOL_MASK, "float": FLOAT_MASK}.get(kwargs.pop("mask", None))

    def fn(lib, q, k, v):
        return lib.nn.functional.scaled_dot_product_attention(
            q, k, v, attn_mask=None if mask is None else lib.tensor(mask), **kwargs)

    await check_op(fn, Q, K, V)
    # torch's CPU kernel has no second derivative: finite differences of the first order only
    await check_gradgrad(fn, Q[:1, :1], K[:1, :1], V[:1, :1], torch_check=False)


@DEVICES
async def test_scaled_dot_product_attention_grouped_query_heads():
    """enable_gqa: 6 query heads over 3 key/value heads (each serves two), as torch repeats them."""
    q = RNG.standard_normal((2, 6, 4, 5))

    def fn(lib, q, k, v):
        return lib.nn.functional.scaled_dot_product_attention(q, k, v, enable_gqa=True)

    await check_op(fn, q, K, V)


def test_sdpa_dropout_repeats_under_seed_and_rejects_mask_with_causal():
    q = ag.tensor(Q)
    ag.manual_seed(1)
    a = ag.nn.functional.scaled_dot_product_attention(q, ag.tensor(K), ag.tensor(V), dropout_p=0.5)
    ag.manual_seed(1)
    b = ag.nn.functional.scaled_dot_product_attention(q, ag.tensor(K), ag.tensor(V), dropout_p=0.5)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    plain = ag.nn.functional.scaled_dot_product_attention(q, ag.tensor(K), ag.tensor(V))
    assert not np.allclose(a.numpy(), plain.numpy())
    check_raises(lambda lib: lib.nn.functional.scaled_dot_product_attention(
        lib.ones(1, 2, 3), lib.ones(1, 2, 3), lib.ones(1, 2, 3), attn_mask=lib.ones(2, 2), is_causal=True),
        RuntimeError, "Explicit attn_mask should not be set when is_causal=True")


def _load(torch, module, reference):
    with torch.no_grad():
        for p in reference.parameters():
            p.add_(torch.randn_like(p) * 0.2)
    module.load_state_dict({k: ag.tensor(v.detach().numpy().copy()) for k, v in reference.state_dict().items()})


async def _compare(torch, module, reference, arrays, pick=lambda out: out, **kwargs):
    """Same output (through ``pick``) and gradients (every float input, every parameter) as torch."""
    xs = [ag.tensor(a, requires_grad=True) for a in arrays]
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    if len(arrays) == 1 and "self" in kwargs.pop("_self", ""):
        xs, ts = xs * 3, ts * 3
    ag_kwargs = {k: ag.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}
    t_kwargs = {k: torch.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}
    out, expected = pick(module(*xs, **ag_kwargs)), pick(reference(*ts, **t_kwargs))
    np.testing.assert_allclose(out.detach().numpy(), expected.detach().numpy(), rtol=1e-10, atol=1e-12)
    v = RNG.standard_normal(out.shape)
    leaves = list(dict.fromkeys(xs)) + list(module.parameters())
    t_leaves = list(dict.fromkeys(ts)) + list(reference.parameters())
    grads = await ag.grad(out, leaves, grad_outputs=ag.tensor(v), allow_unused=True)
    expected_grads = torch.autograd.grad(expected, t_leaves, grad_outputs=torch.tensor(v), allow_unused=True)
    for g, e in zip(grads, expected_grads):
        if e is None:
            assert g is None or not np.any(g.numpy())
            continue
        np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("batch_first", [False, True])
async def test_multihead_self_attention_matches_torch(torch, batch_first):
    ag.set_default_dtype(ag.float64)
    module = ag.nn.MultiheadAttention(8, 2, batch_first=batch_first)
    reference = torch.nn.MultiheadAttention(8, 2, batch_first=batch_first)
    assert list(module.state_dict()) == list(reference.state_dict()) == [
        "in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"]
    _load(torch, module, reference)
    x = RNG.standard_normal((5, 3, 8))
    await _compare(torch, module, reference, [x], lambda o: o[0], _self="self")
    await _compare(torch, module, reference, [x], lambda o: o[1], _self="self")
    await _compare(torch, module, reference, [x], lambda o: o[1], _self="self", average_attn_weights=False)


async def test_multihead_cross_attention_with_masks(torch):
    ag.set_default_dtype(ag.float64)
    module, reference = ag.nn.MultiheadAttention(6, 3, batch_first=True), torch.nn.MultiheadAttention(
        6, 3, batch_first=True)
    _load(torch, module, reference)
    q = RNG.standard_normal((2, 4, 6))
    k = RNG.standard_normal((2, 5, 6))
    v = RNG.standard_normal((2, 5, 6))
    padding = np.zeros((2, 5), bool)
    padding[1, 3:] = True
    causal = np.triu(np.ones((4, 5), bool), 1)
    float_mask = RNG.standard_normal((2 * 3, 4, 5))
    for kwargs in ({"key_padding_mask": padding}, {"attn_mask": causal}, {"attn_mask": float_mask},
                   {"key_padding_mask": padding, "attn_mask": causal}, {"need_weights": False},
                   {"key_padding_mask": padding, "average_attn_weights": False}):
        await _compare(torch, module, reference, [q, k, v], lambda o: o[0], **kwargs)
        if kwargs.get("need_weights", True):
            await _compare(torch, module, reference, [q, k, v], lambda o: o[1], **kwargs)
    out, weights = module(ag.tensor(q), ag.tensor(k), ag.tensor(v), need_weights=False)
    assert weights is None


async def test_multihead_attention_unbatched_and_without_bias(torch):
    ag.set_default_dtype(ag.float64)
    module, reference = ag.nn.MultiheadAttention(4, 2, bias=False), torch.nn.MultiheadAttention(4, 2, bias=False)
    assert list(module.state_dict()) == list(reference.state_dict())
    _load(torch, module, reference)
    x = RNG.standard_normal((3, 4))
    await _compare(torch, module, reference, [x], lambda o: o[0], _self="self")
    await _compare(torch, module, reference, [x], lambda o: o[1], _self="self")


async def test_multihead_attention_gradient_against_finite_differences():
    ag.set_default_dtype(ag.float64)
    module = ag.nn.MultiheadAttention(4, 2)
    x = RNG.standard_normal((3, 2, 4))
    v = RNG.standard_normal((3, 2, 4))

    def loss(array):
        t = ag.tensor(array)
        return float((module(t, t, t)[0] * ag.tensor(v)).sum().detach().item())

    xt = ag.tensor(x, requires_grad=True)
    (g,) = await ag.grad((module(xt, xt, xt)[0] * ag.tensor(v)).sum(), [xt])
    numeric = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        plus, minus = x.copy(), x.copy()
        plus[i] += 1e-6
        minus[i] -= 1e-6
        numeric[i] = (loss(plus) - loss(minus)) / 2e-6
    np.testing.assert_allclose(g.numpy(), numeric, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("kwargs", [
    {}, {"activation": "gelu"}, {"norm_first": True}, {"batch_first": True, "norm_first": True, "activation": "gelu"},
], ids=["relu", "gelu", "norm-first", "batch-first-gelu-norm-first"])
async def test_transformer_encoder_layer_matches_torch(torch, kwargs):
    ag.set_default_dtype(ag.float64)
    module = ag.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, **kwargs)
    reference = torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, **kwargs)
    assert list(module.state_dict()) == list(reference.state_dict())
    _load(torch, module, reference)
    x = RNG.standard_normal((3, 5, 8) if kwargs.get("batch_first") else (5, 3, 8))  # batch 3, sequence 5
    await _compare(torch, module, reference, [x])
    padding = np.zeros((3, 5), bool)
    padding[2, 4] = True
    causal = np.triu(np.ones((5, 5), bool), 1)
    await _compare(torch, module, reference, [x], src_mask=causal, src_key_padding_mask=padding)
    await _compare(torch, module, reference, [x], src_mask=causal, is_causal=True)


def test_transformer_encoder_layer_dropout_trains_and_evaluates():
    layer = ag.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.5)
    x = ag.randn(4, 2, 8)
    ag.manual_seed(0)
    a = layer(x)
    ag.manual_seed(1)
    b = layer(x)
    assert not np.allclose(a.detach().numpy(), b.detach().numpy())
    layer.eval()
    np.testing.assert_array_equal(layer(x).detach().numpy(), layer(x).detach().numpy())


def test_attention_errors_as_torch():
    check_raises(lambda lib: lib.nn.MultiheadAttention(10, 3), AssertionError,
                 "embed_dim must be divisible by num_heads")
    check_raises(lambda lib: lib.nn.TransformerEncoderLayer(10, 3), AssertionError,
                 "embed_dim must be divisible by num_heads")
    check_raises(lambda lib: lib.nn.MultiheadAttention(4, 2)(lib.ones(3, 2, 4), lib.ones(3, 2, 4), lib.ones(3, 2, 4),
                                                            is_causal=True),
                 RuntimeError, "Need attn_mask if specifying the is_causal hint")


def test_transformer_step_benchmark_runs(torch, capsys):
    from benchmarks import transformer_step

    result = transformer_step.main(["--d-model", "8", "--heads", "2", "--seq", "4", "--batch", "2", "--ff", "16",
                                    "--repeats", "1", "--warmup", "0"])
    assert result["torch_s"] > 0 and result["asyncgrad_s"] > 0
    assert "x torch" in capsys.readouterr().out


async def test_multihead_attention_with_other_key_and_value_sizes(torch):
    ag.set_default_dtype(ag.float64)
    module = ag.nn.MultiheadAttention(6, 2, kdim=5, vdim=3)
    reference = torch.nn.MultiheadAttention(6, 2, kdim=5, vdim=3)
    assert list(module.state_dict()) == list(reference.state_dict()) == [
        "q_proj_weight", "k_proj_weight", "v_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"]
    _load(torch, module, reference)
    q, k, v = RNG.standard_normal((4, 2, 6)), RNG.standard_normal((5, 2, 5)), RNG.standard_normal((5, 2, 3))
    padding = np.zeros((2, 5), bool)
    padding[0, 4] = True
    await _compare(torch, module, reference, [q, k, v], lambda o: o[0], key_padding_mask=padding)
    await _compare(torch, module, reference, [q, k, v], lambda o: o[1])


LAYERS_ON_DEVICES = [
    ("TransformerEncoderLayer", lambda d: ag.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, device=d),
     [(5, 3, 8)], {"src_mask": np.triu(np.ones((5, 5), bool), 1)}),
    ("MultiheadAttention", lambda d: ag.nn.MultiheadAttention(6, 2, kdim=5, vdim=3, device=d),
     [(4, 2, 6), (5, 2, 5), (5, 2, 3)], {"key_padding_mask": np.eye(2, 5, dtype=bool)}),
    ("LSTM", lambda d: ag.nn.LSTM(3, 4, num_layers=2, bidirectional=True, device=d), [(5, 2, 3)], {}),
    ("GRU", lambda d: ag.nn.GRU(3, 4, device=d), [(5, 2, 3)], {}),
    ("BatchNorm1d", lambda d: ag.nn.BatchNorm1d(3, device=d), [(5, 3)], {}),
    ("GroupNorm", lambda d: ag.nn.GroupNorm(2, 4, device=d), [(2, 4, 3)], {}),
]


@pytest.mark.parametrize("name, make, shapes, kwargs", LAYERS_ON_DEVICES, ids=[c[0] for c in LAYERS_ON_DEVICES])
async def test_layers_on_the_sim_device_match_cpu(name, make, shapes, kwargs):
    """The composed layers only through the device's array backend: sim:0 (array_api_strict) gives
    cpu's outputs and gradients, with the same weights."""
    ag.set_default_dtype(ag.float64)
    arrays = [RNG.standard_normal(s) for s in shapes]
    results = {}
    state = None
    for device in ("cpu", "sim:0"):
        module = make(device)
        if state is None:
            state = {k: v.clone() for k, v in module.state_dict().items()}
        else:
            module.load_state_dict({k: v.to(device) for k, v in state.items()})
        xs = [ag.tensor(a, device=device, requires_grad=True) for a in arrays]
        out = module(*xs, **{k: ag.tensor(v, device=device) for k, v in kwargs.items()})
        out = out[0] if isinstance(out, tuple) else out
        assert out.device is ag.device(device)
        grads = await ag.grad(out.sum(), xs + list(module.parameters()))
        results[device] = [out.detach().cpu().numpy()] + [g.cpu().numpy() for g in grads]
    for a, b in zip(results["cpu"], results["sim:0"]):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
