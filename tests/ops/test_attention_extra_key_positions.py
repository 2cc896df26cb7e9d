"""multi_head_attention_forward's extra key and value positions, as torch's: ``bias_k``/``bias_v``
(one learned position), ``add_zero_attn`` (one zero position), ``static_k``/``static_v`` (given
keys and values), with both masks growing with the keys; outputs, weights and every gradient
against torch and finite differences, torch's refusals, and MultiheadAttention(add_bias_kv,
add_zero_attn) loading a torch state_dict."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import ag_tensor, assert_close, check_gradgrad, check_op, check_raises

import asyncgrad as ag

L, S, N, E, H = 3, 4, 2, 4, 2
KPM = np.array([[False, True, False, False], [True, False, False, False]])
CAUSAL = np.triu(np.ones((L, S), bool), 1)


def _mha(bias_kv, zero_attn, static, masks, part):
    """The op on (query, key, value, in-projection, out-projection[, bias_k, bias_v | static_k, static_v])."""
    def fn(lib, q, k, v, w, b, ow, ob, *extra):
        kw = {}
        if masks:
            kw = {"key_padding_mask": lib.tensor(KPM), "attn_mask": lib.tensor(CAUSAL)}
        bias_k, bias_v = extra if bias_kv else (None, None)
        if static:
            kw.update(static_k=extra[0], static_v=extra[1])
        out, weights = lib.nn.functional.multi_head_attention_forward(
            q, k, v, E, H, w, b, bias_k, bias_v, zero_attn, 0.0, ow, ob, training=True, **kw)
        return out if part == "output" else weights
    return fn


SHAPES = [(L, N, E), (S, N, E), (S, N, E), (3 * E, E), (3 * E,), (E, E), (E,)]


@pytest.mark.parametrize("part", ["output", "weights"])
@pytest.mark.parametrize("bias_kv,zero_attn,static,masks", [
    (True, False, False, False), (True, False, False, True), (False, True, False, True), (True, True, False, True),
    (False, False, True, False), (False, True, True, True)])
async def test_extra_positions_agree_with_torch(bias_kv, zero_attn, static, masks, part):
    extra = [(1, 1, E), (1, 1, E)] if bias_kv else [(N * H, S, E // H)] * 2 if static else []
    # what reaches the part: the weights read no value nor the out-projection; static keys and values
    # replace the projected ones
    used = [True, not static, not static and part == "output", True, True, part == "output", part == "output"]
    used += [True, part == "output"] if extra else []
    await check_op(_mha(bias_kv, zero_attn, static, masks, part), *SHAPES, *extra, requires_grad=used)


async def test_second_order_agrees_with_torch():
    await check_gradgrad(_mha(True, True, False, True, "output"), *SHAPES, (1, 1, E), (1, 1, E))


def test_refusals_are_torchs():
    def call(lib, **kw):
        x = lib.ones(L, N, E)
        args = dict(bias_k=None, bias_v=None, static_k=None, static_v=None) | kw
        return lib.nn.functional.multi_head_attention_forward(
            x, x, x, E, H, lib.ones(3 * E, E), None, args["bias_k"], args["bias_v"], False, 0.0, lib.ones(E, E), None,
            static_k=args["static_k"], static_v=args["static_v"])

    check_raises(lambda lib: call(lib, bias_k=lib.ones(1, 1, E), bias_v=lib.ones(1, 1, E),
                                  static_k=lib.ones(N * H, S, E // H)),
                 AssertionError, "bias cannot be added to static key.")
    check_raises(lambda lib: call(lib, static_k=lib.ones(N * H + 1, S, E // H)), AssertionError,
                 f"expecting static_k.size\\(0\\) of {N * H}, but got {N * H + 1}")
    check_raises(lambda lib: call(lib, static_v=lib.ones(N * H, S, 1)), AssertionError,
                 f"expecting static_v.size\\(2\\) of {E // H}, but got 1")
    with pytest.raises(AssertionError):
        call(ag, bias_k=ag.ones(1, 1, E))


def test_the_module_loads_torchs_state_dict(torch):
    torch.manual_seed(0)
    t_module = torch.nn.MultiheadAttention(E, H, add_bias_kv=True, add_zero_attn=True)
    module = ag.nn.MultiheadAttention(E, H, add_bias_kv=True, add_zero_attn=True, dtype=ag.float64)
    assert [n for n, _ in module.named_parameters()] == [n for n, _ in t_module.named_parameters()]
    assert module.bias_k.shape == (1, 1, E) and float(module.bias_k.detach().abs().sum()) > 0  # xavier_normal_
    module.load_state_dict({k: ag_tensor(v.detach().numpy()) for k, v in t_module.state_dict().items()})
    x = np.random.default_rng(0).standard_normal((L, N, E))
    out, weights = module(ag_tensor(x), ag_tensor(x), ag_tensor(x))
    t_out, t_weights = t_module(torch.tensor(x), torch.tensor(x), torch.tensor(x))
    assert weights.shape == (N, L, L + 2)
    assert_close(out.detach(), t_out, 1e-10, 1e-12, "output")
    assert_close(weights.detach(), t_weights, 1e-10, 1e-12, "weights")
