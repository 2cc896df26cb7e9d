"""Ports of tests of torch's 2020 ``test/test_autograd.py`` that its current revision no longer has.

The first port of torch's autograd tests (issue 10: a seeded sample of 239 in-scope tests of the 2020
revision, once tests/torch_parity/test_autograd_sample_*.py) is replaced by the ports of the current file in this
folder. Its tests of names the current file still has are dropped (renamed ones too: ``inplace_view_*`` is
now ``inplace_on_view_*``, ``test_min_max_median_backprops_to_all_values`` is now
``test_min_max_aminmax_median_backprops_to_all_values``, and
``test_gradcheck_fail_when_no_differentiable_outputs_and_num_grad_not_zero`` is now
``test_gradcheck_check_no_differentiable_outputs``). These are the rest: tests torch moved out of
test_autograd.py (op gradients now covered by its OpInfo suite, the profiler's to test_profiler.py) or
removed with an API (``eig``/``symeig``, legacy Functions). They still check asyncgrad against torch's
2020 expectations, so they are kept as they were ported, each naming the torch test it ports and carrying
its strict xfails.
"""

import json
import math
import tempfile
import warnings

import pytest
from torch_port import (  # noqa: F401  (double_default: an autouse fixture)
    S,
    assert_equal,
    double_default,
    graph_desc,
    mask_not_all_zeros,
    random_symmetric_matrix,
    run_functional_checks,
)

import asyncgrad as ag
import asyncgrad.nn.functional as F
from asyncgrad import Function, once_differentiable
from asyncgrad.autograd.profiler import profile, record_function


async def _rnn_mod(mod, inp):
    """TestAutogradDeviceType._test_rnn_mod (cudnn off is asyncgrad's only mode)."""
    def flatten_out(inp):
        out = mod(inp)
        return tuple([t if isinstance(t, ag.Tensor) else tt for t in out for tt in t])

    assert await ag.gradcheck(flatten_out, inp)
    assert await ag.gradgradcheck(flatten_out, inp)


PRECISION = 1e-4  # test_autograd.PRECISION


class SimulateBackwardError(Function):
    """TestAutograd.SimulateBackwardError."""

    @staticmethod
    def forward(ctx, input):
        return input.clone()

    @staticmethod
    @once_differentiable
    def backward(ctx, input):
        raise Exception("Simulate error on backward pass")


# 136
async def _test_atleast(torch_fn):
    """TestAutogradDeviceType._test_atleast."""
    # 0-dim
    s = ag.tensor(0.5, dtype=ag.float64, requires_grad=True)

    assert await ag.gradcheck(lambda x: torch_fn(x), s)
    assert await ag.gradgradcheck(lambda x: torch_fn(x), s)

    # 1-dim
    a = ag.rand(4, dtype=ag.float64, requires_grad=True)

    assert await ag.gradcheck(lambda x: torch_fn(x), a)
    assert await ag.gradgradcheck(lambda x: torch_fn(x), a)

    # 2,3,4-dim
    b = ag.rand(4, 3, dtype=ag.float64, requires_grad=True)
    c = ag.rand(4, 3, 2, dtype=ag.float64, requires_grad=True)
    d = ag.rand(4, 3, 2, 1, dtype=ag.float64, requires_grad=True)

    input_tuple = (s, a, b, c, d)
    assert await ag.gradcheck(lambda s, w, x, y, z: torch_fn(s, w, x, y, z), input_tuple)
    assert await ag.gradgradcheck(lambda s, w, x, y, z: torch_fn(s, w, x, y, z), input_tuple)


inf = math.inf


nan = math.nan


# 1
async def test_leaky_relu_inplace_with_zero_slope():
    """Port of TestAutogradDeviceType.test_leaky_relu_inplace_with_zero_slope."""
    a = ag.tensor([-2., 0., 2.], requires_grad=True)
    b = F.leaky_relu_(a.clone(), 0.0)
    await b.backward(ag.ones(3))
    expected = ag.tensor([0., 0., 1.])
    assert_equal(a.grad, expected)


# 2
async def test_cat():
    """Port of TestAutograd.test_cat."""
    f_args_variable = (ag.randn(1, S, S, requires_grad=True),
                       ag.randn(2, S, S, requires_grad=True),
                       ag.randn(3, S, S, requires_grad=True),
                       0)
    await run_functional_checks("cat", lambda a, b, c, dim: ag.cat((a, b, c), dim), True, f_args_variable)


# 5
async def test_eig():
    """Port of TestAutograd.test_eig."""
    def func(B):
        return ag.eig(B, eigenvectors=True)

    def func_eigvals(B):
        return ag.eig(B, eigenvectors=True)[0]

    def func_eigvecs(B):
        return ag.eig(B, eigenvectors=True)[1]

    for dims in [(3, 3), (5, 5)]:
        A = random_symmetric_matrix(dims[0])
        U = ag.rand(*dims)
        Uinv = ag.linalg.inv(U)
        B = ag.matmul(Uinv, ag.matmul(A, U)).requires_grad_()
        for fn in (func, func_eigvals, func_eigvecs):
            assert await ag.gradcheck(fn, [B])
            assert await ag.gradgradcheck(fn, [B])


# 6
async def test_sum_to_with_empty_dim_grad():
    """Port of TestAutograd.test_sum_to_with_empty_dim_grad."""
    a = ag.rand(4, 0, requires_grad=True)
    b = ag.rand(4, 1, requires_grad=True)
    c = a + b
    assert c.shape == (4, 0)
    await c.sum().backward()

    assert_equal(b.grad, ag.zeros(4, 1))
    assert_equal(a.grad, ag.zeros(4, 0))


# 7
async def test_vstack():
    """Port of TestAutograd.test_vstack."""
    x = ag.randn(10, 10, requires_grad=True)
    y = ag.randn(10, 10, requires_grad=True)
    z = ag.randn(10, 10, requires_grad=True)
    stacked = ag.vstack([x, y, z])
    grad = ag.randn(30, 10)
    await stacked.backward(grad)
    assert_equal(x.grad, grad[0:10])
    assert_equal(y.grad, grad[10:20])
    assert_equal(z.grad, grad[20:30])


# 10
async def test_trapz():
    """Port of TestAutograd.test_trapz."""
    f_args_variable = (ag.randn(2, 3, requires_grad=True),
                       ag.tensor([[1.0, 2.0, 5.5], [2.3, 0.5, 6.2]], requires_grad=True))
    await run_functional_checks("trapz", lambda y, x: ag.trapz(y, x), True, f_args_variable)


# 18
def test_memory_profiler():
    """Port of TestAutograd.test_memory_profiler (CPU part; the CUDA and MKLDNN parts are conditional in torch)."""
    def run_profiler(tensor_creation_fn):
        with profile(profile_memory=True, record_shapes=True) as prof:
            x = None
            with record_function("test_user_scope_alloc"):
                x = tensor_creation_fn()
            with record_function("test_user_scope_dealloc"):
                del x
        return prof.key_averages(group_by_input_shape=True)

    def check_metrics(stats, metric, allocs=None, deallocs=None):
        stat_metrics = {stat.key: getattr(stat, metric) for stat in stats}
        for alloc_fn in allocs or ():
            assert alloc_fn in stat_metrics
            assert stat_metrics[alloc_fn] > 0
        for dealloc_fn in deallocs or ():
            assert dealloc_fn in stat_metrics
            assert stat_metrics[dealloc_fn] < 0

    stats = run_profiler(lambda: ag.rand(10, 10))
    check_metrics(stats, "cpu_memory_usage",
                  allocs=["aten::empty", "aten::rand", "test_user_scope_alloc"],
                  deallocs=["test_user_scope_dealloc"])


# 26
async def test_stack():
    """Port of TestAutograd.test_stack."""
    x = ag.randn(10, 10, requires_grad=True)
    y = ag.randn(10, 10, requires_grad=True)
    z = ag.randn(10, 10, requires_grad=True)
    stacked = ag.stack([x, y, z], 0)
    grad = ag.randn(3, 10, 10)
    await stacked.backward(grad)
    assert_equal(x.grad, grad[0])
    assert_equal(y.grad, grad[1])
    assert_equal(z.grad, grad[2])


# 38
async def test_profiler_seq_nr():
    """Port of TestAutograd.test_profiler_seq_nr."""
    with profile() as p:
        x = ag.randn(10, 10, requires_grad=True)
        y = ag.randn(10, 10, requires_grad=True)
        z = x + y
        s = z.sum()
        await s.backward()
    add_seq_nr = -1
    sum_seq_nr = -1
    found_add = found_sum = False
    found_bwd_add = found_bwd_sum = False
    found_empty = False
    for e in p.function_events:
        if e.name == "aten::add":
            add_seq_nr = e.sequence_nr
            assert not found_add
            found_add = True
        elif e.name == "aten::sum":
            sum_seq_nr = e.sequence_nr
            assert not found_sum
            found_sum = True
        elif "Add" in e.name and "Backward" in e.name:
            assert e.sequence_nr == add_seq_nr
            assert not found_bwd_add
            found_bwd_add = True
        elif "Sum" in e.name and "Backward" in e.name:
            assert e.sequence_nr == sum_seq_nr
            assert not found_bwd_sum
            found_bwd_sum = True
        if e.name == "aten::empty":
            assert e.sequence_nr == -1
            found_empty = True
    assert add_seq_nr >= 0
    assert sum_seq_nr >= 0
    assert add_seq_nr != sum_seq_nr
    assert found_add and found_sum and found_bwd_add and found_bwd_sum and found_empty


# 40
async def test_cdist_same_inputs():
    """Port of TestAutogradDeviceType.test_cdist_same_inputs."""
    sizex = (1, 27, 32)
    for _p in [0, 1, 2, 3, 1.5, 2.5, float('inf')]:
        x = ag.randn(*sizex, dtype=ag.float32)
        dist_grad = ag.randn(1, 27, 27, dtype=ag.float32)
        y = x.clone()
        x.requires_grad = True
        d = ag.cdist(x, y)
        await d.backward(dist_grad)
        assert bool(ag.isfinite(x.grad).all())


# 49
async def test_norm_subgradient():
    """Port of TestAutograd.test_norm_subgradient."""
    async def run_test(input_size, norm_deg):
        input = ag.zeros(*input_size, requires_grad=True)
        await input.norm(norm_deg).backward()
        assert_equal(input.grad.abs().sum(), 0)

    await run_test((10,), 2)
    await run_test((10, 10), 2)
    await run_test((10,), 3)
    await run_test((10,), 1)
    await run_test((10,), 1.5)


# 50
async def test_lerp_tensor_weights():
    """Port of TestAutograd.test_lerp_tensor_weights."""
    def construct_inputs(*shapes):
        start = ag.randn(*shapes[0]).requires_grad_()
        end = ag.randn(*shapes[1]).requires_grad_()
        weight = ag.randn(*shapes[2]).requires_grad_()
        return [start, end, weight]

    all_test_shapes = [((3, 3, 3), (3, 3, 3), (3, 3, 3)),
                       ((3,), (3, 3, 3), (3, 3, 3)),
                       ((3, 3, 3), (3,), (3, 3, 3)),
                       ((3, 3, 3), (3, 3, 3), (3,)),
                       ((), (3, 3, 3), (3, 3, 3)),
                       ((3, 3, 3), (), (3, 3, 3)),
                       ((3, 3, 3), (3, 3, 3), ()),
                       ((3, 3), (3, 3, 3), (3,))]
    for shapes in all_test_shapes:
        cur_inputs = construct_inputs(*shapes)
        assert await ag.gradcheck(ag.lerp, cur_inputs)
        assert await ag.gradgradcheck(ag.lerp, cur_inputs)


# 53
async def test_diagonal_derivative_requires_grad():
    """Port of TestAutograd.test_diagonal_derivative_requires_grad."""
    a = ag.randn(5, 6, requires_grad=True)
    b = ag.diagonal(a) ** 2
    c = b.sum()
    d, = await ag.grad(c, a, retain_graph=True, create_graph=True)
    assert d.requires_grad


# 56
async def test_cat_empty():
    """Port of TestAutograd.test_cat_empty."""
    f_args_variable = (ag.randn(0, S, requires_grad=True),
                       ag.randn(S, S, requires_grad=True))
    await run_functional_checks("cat", lambda a, b: ag.cat((a, b)), True, f_args_variable)


# 68
async def test_eig_complex_eigenvalues():
    """Port of TestAutograd.test_eig_complex_eigenvalues (torch.eig, as in torch's 2020 file)."""
    A = ag.tensor([[0., -1.], [1., 0.]], dtype=ag.float32, requires_grad=True)
    w, v = ag.eig(A, eigenvectors=True)
    with pytest.raises(RuntimeError, match='does not support complex eigenvalues'):
        await ag.backward([w, v], [ag.ones_like(w), ag.ones_like(v)])


# 72
def test_mul_out_result_requires_grad():
    """Port of TestAutograd.test_mul_out_result_requires_grad."""
    a = ag.randn(2, 2)
    b = ag.randn(2, 2)
    x = ag.zeros(2, 2, requires_grad=True)
    with pytest.raises(RuntimeError, match='out='):
        ag.mul(a, b, out=x)


# 84
async def test_cdist():
    """Port of TestAutogradDeviceType.test_cdist."""
    async def _test_cdist_for_size(sizex, sizey=None):
        if sizey is None:
            sizey = sizex
        for p in [0, 1, 2, 3, 1.5, 2.5, float('inf')]:
            x = ag.randn(*sizex, dtype=ag.float64)
            y = ag.randn(*sizey, dtype=ag.float64)
            eps = 1e-6
            # to avoid extremum
            x = x - (((x - y) < eps).double() * 2 * eps)
            x.requires_grad = True
            y.requires_grad = True
            f_args_variable = (x, y)

            def f(a, b, p=p):
                return ag.cdist(a, b, p)
            await run_functional_checks("cdist", f, True, f_args_variable)

    async def _test_euclidean_large_cdist(sizex, sizey=None):
        if sizey is None:
            sizey = sizex
        x = ag.randn(*sizex, dtype=ag.float32)
        y = ag.randn(*sizey, dtype=ag.float32)
        eps = 1e-6
        x = x - (((x - y) < eps).float() * 2 * eps)
        x.requires_grad = True
        y.requires_grad = True
        dist = ag.cdist(x, y, p=2)
        loss = dist.sum()
        await loss.backward()

    await _test_cdist_for_size((S, S))
    await _test_cdist_for_size((S, S, S))
    await _test_cdist_for_size((3, 5))
    await _test_cdist_for_size((2, 3, 5))
    await _test_cdist_for_size((1, 2, 3))
    await _test_cdist_for_size((1, 1), (S, 1))
    await _test_euclidean_large_cdist((2000, 5))


# 86
def test_mul_out():
    """Port of TestAutograd.test_mul_out."""
    a = ag.randn(2, 2, requires_grad=True)
    b = ag.randn(2, 2, requires_grad=True)
    x = ag.zeros_like(a)

    with pytest.raises(RuntimeError, match='out='):
        ag.mul(a, b, out=x)

    with ag.no_grad():
        ag.mul(a, b, out=x)
        assert_equal(x, a * b)


# 87
async def test_LSTM_grad_and_gradgrad():
    """Port of TestAutogradDeviceType.test_LSTM_grad_and_gradgrad."""
    hsize = 4
    inp = ag.rand(1, 3, hsize, dtype=ag.float64, requires_grad=True)
    for bias in [True, False]:
        mod = ag.nn.LSTM(hsize, hsize, bias=bias).to(ag.float64)
        await _rnn_mod(mod, inp)


# 93
async def test_movedim():
    """Port of TestAutogradDeviceType.test_movedim."""
    x = ag.randn(4, 3, 2, 1, dtype=ag.float64, requires_grad=True)

    assert await ag.gradcheck(lambda x: ag.movedim(x, (0, 1, 2, 3), (3, 2, 1, 0)), x)
    assert await ag.gradgradcheck(lambda x: ag.movedim(x, (0, 1, 2, 3), (3, 2, 1, 0)), x)

    assert await ag.gradcheck(lambda x: ag.movedim(x, (0, -1, -2, -3), (-3, -2, -1, -0)), x)
    assert await ag.gradgradcheck(lambda x: ag.movedim(x, (0, -1, -2, -3), (-3, -2, -1, -0)), x)


# 107
async def test_slogdet_sign():
    """Port of TestAutograd.test_slogdet_sign."""
    a = ag.randn(3, 3, requires_grad=True)
    s, logdet = a.slogdet()

    # the 2020 test asserted that the sign requires no grad; torch 2.13, which asyncgrad follows, hangs it
    # on logabsdet's node with an undefined gradient
    assert s.requires_grad and s.grad_fn is logdet.grad_fn
    assert (await ag.grad(s, [a], allow_unused=True)) == (None,)

    # test that backward through computation involving sign works
    def sign_mul_logdet(mat):
        s, logdet = mat.slogdet()
        return s * logdet

    u, s, v = a.detach().svd()
    s.abs_().clamp_(0.0001)
    for sign in (-1, 1):
        s[-1] = sign
        mat = ag.chain_matmul(u, s.diag(), v.t()).requires_grad_()
        assert await ag.gradcheck(sign_mul_logdet, mat)
        assert await ag.gradgradcheck(sign_mul_logdet, mat)


# 109
async def test_cat_negdim_2():
    """Port of TestAutograd.test_cat_negdim_2."""
    f_args_variable = (ag.randn(S, 1, S, requires_grad=True),
                       ag.randn(S, 2, S, requires_grad=True),
                       ag.randn(S, 3, S, requires_grad=True),
                       -2)
    await run_functional_checks("cat", lambda a, b, c, dim: ag.cat((a, b, c), dim), True, f_args_variable)


# 110
async def test_put_accumulate():
    """Port of TestAutograd.test_put_accumulate."""
    root = ag.randn(4, 5, requires_grad=True)
    values = ag.randn(6, requires_grad=True)
    idx = ag.tensor([1, 2, 3, 1, 2, 3], dtype=ag.int64)

    def func(root, values):
        x = root.clone()
        x.put_(idx, values, accumulate=True)
        return x

    assert await ag.gradcheck(func, [root, values])
    assert await ag.gradgradcheck(func, [root, values])


# 111
def test_resize():
    """Port of TestAutograd.test_resize (torch's ``suppress_warnings``: its deprecation warning)."""
    x = ag.ones(2, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert tuple(x.resize(3, 2).size()) == (3, 2)


# 116
async def test_cholesky():
    """Port of TestAutograd.test_cholesky (random_symmetric_pd_matrix as in torch's common_utils)."""
    def func(root, upper):
        x = ag.matmul(root, root.transpose(-1, -2)) + 1e-05
        return ag.cholesky(x, upper)

    def random_symmetric_pd_matrix(matrix_size, *batch_dims):
        A = ag.randn(*(batch_dims + (matrix_size, matrix_size)))
        return ag.matmul(A, A.transpose(-2, -1)) + ag.eye(matrix_size) * 1e-5

    async def run_test(upper, dims):
        root = ag.rand(*dims, requires_grad=True)

        assert await ag.gradcheck(func, [root, upper])
        assert await ag.gradgradcheck(func, [root, upper])

        root = random_symmetric_pd_matrix(dims[-1], *dims[:-2]).requires_grad_()
        await root.cholesky().sum().backward()
        assert_equal(root.grad, root.grad.transpose(-1, -2))

    for upper in (True, False):
        for dims in [(3, 3), (4, 3, 2, 2)]:
            await run_test(upper, dims)
            await run_test(upper, dims)


# 120
async def test_GRU_grad_and_gradgrad():
    """Port of TestAutogradDeviceType.test_GRU_grad_and_gradgrad."""
    hsize = 4
    inp = ag.rand(1, 3, hsize, dtype=ag.float64, requires_grad=True)
    for bias in [True, False]:
        mod = ag.nn.GRU(hsize, hsize, bias=bias).to(ag.float64)
        await _rnn_mod(mod, inp)


# 126
async def test_cat_empty_legacy():
    """Port of TestAutograd.test_cat_empty_legacy."""
    f_args_variable = (ag.randn(0, requires_grad=True),
                       ag.randn(S, S, requires_grad=True))
    await run_functional_checks("cat", lambda a, b: ag.cat((a, b)), False, f_args_variable)
    assert await ag.gradcheck(lambda a, b: ag.cat((a, b)), f_args_variable, eps=1e-6, atol=PRECISION)


async def test_atleast():
    """Port of TestAutogradDeviceType.test_atleast."""
    await _test_atleast(ag.atleast_1d)
    await _test_atleast(ag.atleast_2d)
    await _test_atleast(ag.atleast_3d)


# 141
async def test_symeig():
    """Port of TestAutograd.test_symeig.

    torch removed ``symeig``; the port uses its torch 2.13 equivalent ``linalg.eigh(x, UPLO)``
    (``upper=True`` is ``UPLO='U'``) and ``random_symmetric_matrix`` as ``(A + A^T) / 2``.
    """
    def func(root, upper):
        x = 0.5 * (root + root.transpose(-2, -1))
        return ag.linalg.eigh(x, UPLO='U' if upper else 'L')

    for upper in (True, False):
        for dims in [(3, 3), (5, 3, 3), (4, 3, 2, 2)]:
            root = ag.rand(*dims, requires_grad=True)

            assert await ag.gradcheck(func, [root, upper])
            assert await ag.gradgradcheck(func, [root, upper])

            A = ag.randn(*dims)
            root = ((A + A.transpose(-2, -1)) / 2).requires_grad_()
            w, v = ag.linalg.eigh(root)
            await (w.sum() + v.sum()).backward()
            assert_equal(root.grad, root.grad.transpose(-1, -2))  # Check the gradient is symmetric


# 150
async def test_ctc_loss():
    """Port of TestAutogradDeviceType.test_ctc_loss (CPU cases)."""
    batch_size = 64
    num_labels = 101
    target_length = 15
    gradcheck_input_size = 10

    ZERO_NONE = 0
    ZERO_SOME = 1
    ZERO_ALL = 2

    # input_length, vary_lengths, zero_lengths
    tests = [(150, False, ZERO_NONE),
             (150, True, ZERO_NONE),
             (50, True, ZERO_SOME),
             (50, True, ZERO_ALL)]

    for input_length, vary_lengths, zero_mode in tests:
        targets = ag.randint(1, num_labels, (batch_size, target_length), dtype=ag.long)
        x = ag.randn(gradcheck_input_size, requires_grad=True)
        tile_factors = ag.randn(input_length * batch_size * num_labels // gradcheck_input_size + 1)
        input_lengths = [(ag.randint(input_length // 2, input_length + 1, ()).item()
                          if vary_lengths or i == 0 else input_length) for i in range(batch_size)]
        if zero_mode == ZERO_ALL:
            target_lengths = [0 for _ in range(batch_size)]
        else:
            target_lengths = [(ag.randint(target_length // 2, target_length + 1, ()).item()
                               if vary_lengths else target_length) for _ in range(batch_size)]
            if zero_mode == ZERO_SOME:
                idxes = ag.randint(0, batch_size, (10,))
                for i in idxes:
                    target_lengths[i] = 0

        def ctc_after_softmax(x, input_length=input_length, tile_factors=tile_factors, targets=targets,
                              input_lengths=input_lengths, target_lengths=target_lengths):
            x_full = ((x[:, None] * tile_factors[None, :]).view(-1)[:input_length * batch_size * num_labels]
                      .view(input_length, batch_size, num_labels))
            log_probs = ag.log_softmax(x_full, 2)
            return F.ctc_loss(log_probs, targets, input_lengths, target_lengths)

        assert await ag.gradcheck(ctc_after_softmax, [x])


# 151
async def test_broadcast_tensors():
    """Port of TestAutograd.test_broadcast_tensors."""
    f_args_variable = (ag.randn(3, requires_grad=True),
                       ag.randn(1, 2, 1, requires_grad=True),
                       ag.randn(1, 1, requires_grad=True),
                       ag.randn(5, 1, 1, requires_grad=True))
    await run_functional_checks("broadcast", lambda a, b, c, d: ag.broadcast_tensors(a, b, c, d),
                                True, f_args_variable)


# 152
async def test_dont_materialize_grads():
    """Port of TestAutograd.test_dont_materialize_grads.

    torch's ``torch._C._functions.UndefinedGrad()`` is the Function below: the identity, whose
    backward hands on an undefined (None) gradient, as torch's does.
    """
    class UndefinedGrad(Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, grad):
            return None

    class MyFunction(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            return x

        @staticmethod
        def backward(ctx, grad):
            assert grad is None
            return grad

    x = ag.ones(1, requires_grad=True)
    await UndefinedGrad.apply(MyFunction.apply(x)).backward()


# 155
async def test_unbind():
    """Port of TestAutograd.test_unbind."""
    stacked = ag.randn(3, 10, 10, requires_grad=True)
    x, y, z = stacked.unbind()
    grad = ag.randn(3, 10, 10)
    await ag.backward([x, y, z], grad.unbind())
    assert_equal(stacked.grad, grad)
    # check that it works with only one gradient provided (#9977)
    for i in range(3):
        stacked = ag.randn(3, 10, 10, requires_grad=True)
        outs = stacked.unbind()
        gi = grad.unbind()[i]
        g, = await ag.grad(outs[i], stacked, gi)
        g_expected = ag.stack([gi if j == i else ag.zeros_like(gi)
                               for j in range(3)], dim=0)
        assert_equal(g, g_expected)


# 157
async def test_as_strided():
    """Port of TestAutograd.test_as_strided.

    torch's guard that a case does not resize the storage reads ``len(y.storage())`` and
    ``y.storage_offset()``; here the storage is the view's base (or the tensor itself) and the
    offset its ``storage_offset()``.
    """
    async def test(x, prepro_fn, size, strides, offset=None):
        x = x.to(ag.float64).detach().requires_grad_()

        # Check that forward will **not** resize storage because it may
        # cause NaN in output and fail numerical Jacobian check consequently
        with ag.no_grad():
            y = prepro_fn(x) if prepro_fn is not None else x
            max_offset = sum((si - 1) * st for si, st in zip(size, strides))
            max_offset += offset if offset is not None else y.storage_offset()
            storage = y._base if y._base is not None else y
            assert max_offset < storage.numel(), "test case resizes storage"

        def closure(x):
            if prepro_fn is not None:
                x = prepro_fn(x)
            return x.as_strided(size, strides, offset)

        assert await ag.gradcheck(closure, [x])
        assert await ag.gradgradcheck(closure, [x])

    # test
    await test(ag.arange(0, 25), lambda x: x.view(5, 5), [3, 3], [6, 2], 2)

    # test crazy stride at dim with size 1 case
    await test(ag.randn(12), None, [1, 2, 1, 5], [0, 5, 100, 1], 2)

    # test expand case
    await test(ag.randn(5), None, [3, 3, 3], [0, 1, 0], 2)
    await test(ag.randn(5), None, [3, 3, 3], [0, 0, 0], 4)
    await test(ag.randn(5), lambda x: x.expand(5, 5), [5, 5], [0, 1], 0)

    # test non-expand overlapping case
    await test(ag.randn(35), None, [6, 6], [5, 1], 2)
    await test(ag.randn(15), None, [3, 2], [3, 6], 2)

    # test transpose case
    await test(ag.randn(3, 4), None, [4, 3], [1, 4])

    # test "getting things outside the input" case
    x = ag.randn(6, 2)
    await test(x[3:], None, [3, 2], [2, 1], 0)  # should be all zeros
    assert_equal(x[3:].as_strided([3, 2], [2, 1], 0), x[:3])

    # test select on expanded input case
    await test(ag.randn(2, 3), lambda x: x.expand(10, 2, 3), [2, 3], [3, 1], 0)


# 167
async def test_symeig_no_eigenvectors():
    """Port of TestAutograd.test_symeig_no_eigenvectors (``torch.symeig`` as ``ag.symeig``)."""
    A = ag.tensor([[1., 2.], [2., 4.]], dtype=ag.float32, requires_grad=True)
    w, v = ag.symeig(A, eigenvectors=False)
    with pytest.raises(RuntimeError, match='cannot compute backward'):
        await ag.backward([w, v], [ag.ones_like(w), ag.ones_like(v)])


# 168
async def test_materialize_grads():
    """Port of TestAutograd.test_materialize_grads.

    torch's ``torch._C._functions.UndefinedGrad()`` is the Function below: the identity, whose
    backward hands on an undefined (None) gradient, as torch's does.
    """
    class UndefinedGrad(Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, grad):
            return None

    class MyFunction(Function):
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, grad):
            assert_equal(grad, ag.zeros(1))
            return grad

    x = ag.ones(1, requires_grad=True)
    await UndefinedGrad.apply(MyFunction.apply(x)).backward()


# 171
async def test_svd_no_singularvectors():
    """Port of TestAutograd.test_svd_no_singularvectors.

    A backward through U and V of ``svd(compute_uv=False)`` is refused. The 2020 text is "cannot
    compute backward"; torch 2.13 refuses earlier, because the zero U and V it returns do not
    require grad: the port matches torch 2.13's text (checked with the torch in the test venv).
    """
    A = ag.randn(2, 2, dtype=ag.float32, requires_grad=True)
    u, s, v = ag.svd(A, compute_uv=False)
    with pytest.raises(RuntimeError, match='element 0 of tensors does not require grad and does not have a grad_fn'):
        await ag.backward([u, s, v], [ag.ones_like(u), ag.ones_like(s), ag.ones_like(v)])


# 173
async def test_eig_no_eigenvectors():
    """Port of TestAutograd.test_eig_no_eigenvectors (``torch.eig`` as ``ag.eig``; torch removed it)."""
    A = ag.tensor([[1., 2.], [2., 4.]], dtype=ag.float32, requires_grad=True)
    w, v = ag.eig(A, eigenvectors=False)
    with pytest.raises(RuntimeError, match='cannot compute backward'):
        await ag.backward([w, v], [ag.ones_like(w), ag.ones_like(v)])


# 177
async def test_cat_negdim_1():
    """Port of TestAutograd.test_cat_negdim_1."""
    f_args_variable = (ag.randn(S, S, 1, requires_grad=True),
                       ag.randn(S, S, 2, requires_grad=True),
                       ag.randn(S, S, 3, requires_grad=True),
                       -1)
    await run_functional_checks("cat", lambda a, b, c, dim: ag.cat((a, b, c), dim), True, f_args_variable)


# 178
async def test_pdist_large():
    """Port of TestAutogradDeviceType.test_pdist_large."""
    shape = (1000, 1)
    x = ag.randn(shape).requires_grad_()
    output = ag.pdist(x, p=2)
    # just run a single backward, as gradcheck/gradgradcheck is expensive here
    await output.sum().backward()


# 183
async def test_fill():
    """Port of TestAutograd.test_fill."""
    root = ag.randn(4, 5, requires_grad=True)

    def func(root):
        x = root.clone()
        x.fill_(2)
        return x

    assert await ag.gradcheck(func, [root])
    assert await ag.gradgradcheck(func, [root])


# 186
async def test_triangular_solve():
    """Port of TestAutograd.test_triangular_solve."""
    async def _test_with_size(A_dims, B_dims):
        A = ag.rand(*A_dims).requires_grad_()
        b = ag.rand(*B_dims).requires_grad_()

        for upper in (True, False):
            for transpose in (True, False):
                for unitriangular in (True, False):
                    def func(A, b):
                        return ag.triangular_solve(b, A, upper, transpose, unitriangular)  # noqa: B023

                    assert await ag.gradcheck(func, [A, b])
                    assert await ag.gradgradcheck(func, [A, b])

    await _test_with_size((3, 3), (3, 4))
    await _test_with_size((3, 3), (3, 2))
    await _test_with_size((2, 3, 3), (2, 3, 4))
    await _test_with_size((2, 3, 3), (2, 3, 2))


# 194
async def test_chain_matmul():
    """Port of TestAutograd.test_chain_matmul."""
    def gen_matrices(p):
        matrices = []
        for (pi, pi_1) in zip(p[:-1], p[1:]):
            matrices.append(ag.randn(pi, pi_1).requires_grad_())
        return matrices

    assert await ag.gradcheck(ag.chain_matmul, gen_matrices([5, 10, 15, 5]))
    assert await ag.gradcheck(ag.chain_matmul, gen_matrices([3, 5, 2, 6]))
    assert await ag.gradcheck(ag.chain_matmul, gen_matrices([6, 2, 4, 8, 10]))
    assert await ag.gradgradcheck(ag.chain_matmul, gen_matrices([5, 10, 15, 5]))
    assert await ag.gradgradcheck(ag.chain_matmul, gen_matrices([3, 5, 2, 6]))
    assert await ag.gradgradcheck(ag.chain_matmul, gen_matrices([6, 2, 4, 8, 10]))


# 198
async def test_block_diag():
    """Port of TestAutograd.test_block_diag."""
    f_args_variable = (ag.randn(1, S, requires_grad=True),
                       ag.randn(2, S, requires_grad=True),
                       ag.randn(3, S, requires_grad=True))
    await run_functional_checks("block_diag", lambda a, b, c: ag.block_diag(a, b, c), True, f_args_variable)


# 199
def test_profiler_tracing():
    """Port of TestAutograd.test_profiler_tracing (CPU part; ``torch.autograd.profiler.profile`` is
    ``ag.profiler.trace``)."""
    t1, t2 = ag.ones(1), ag.ones(1)
    with ag.profiler.trace() as prof:
        ag.add(t1, t2)

    with tempfile.NamedTemporaryFile(mode="w+") as f:
        prof.export_chrome_trace(f.name)
        # read the trace and expect valid json
        # if the JSON generated by export_chrome_trace is not valid, this will throw and fail the test.
        json.load(f)


# 202
async def test_nansum_dtype():
    """Port of TestAutograd.test_nansum_dtype (torch's body sums with ``torch.sum(a, dtype=...)``)."""
    inp = ag.randn(2, 2, 2, 2)
    with ag.no_grad():
        inp[inp < 0.2] = float('nan')

    async def test(inp, inp_dtype, out_dtype):
        with ag.no_grad():
            a = inp.to(inp_dtype)
        a.requires_grad = True
        b = ag.sum(a, dtype=out_dtype)
        await b.backward()
        assert a.dtype == a.grad.dtype

    await test(inp, ag.float32, ag.float64)
    await test(inp, ag.float64, ag.float32)


# 205
async def test_leaky_relu_inplace_with_neg_slope():
    """Port of TestAutogradDeviceType.test_leaky_relu_inplace_with_neg_slope."""
    a = ag.tensor([-1., 1.], requires_grad=True)
    b = F.leaky_relu_(a.clone(), -2)
    with pytest.raises(RuntimeError, match="call out-of-place version"):
        await b.backward(ag.ones(2))

    a = ag.tensor([-1., 1.], requires_grad=True)
    b = F.rrelu_(a.clone(), -5.0, 1.0)
    with pytest.raises(RuntimeError, match="call out-of-place version"):
        await b.backward(ag.ones(2))


# 207
async def test_reduce_dtype():
    """Port of TestAutograd.test_reduce_dtype."""
    async def test_reduction(op, has_no_dim, takes_dtype=True):
        x = ag.randn(3, 3, dtype=ag.float32, requires_grad=True)

        if has_no_dim:
            grad1, = await ag.grad([op(x)], [x])
            grad2, = await ag.grad([op(x, dtype=ag.float64)], [x])
            assert_equal(grad1, grad2)
            assert grad2.dtype == ag.float32

        gi = ag.randn(*op(x, dim=0).shape, dtype=ag.float32)
        grad1, = await ag.grad([op(x, dim=0)], [x], gi)
        if takes_dtype:
            grad2, = await ag.grad([op(x, dim=0, dtype=ag.float64)], [x], gi.double())
        else:
            grad2, = await ag.grad([op(x.double(), dim=0)], [x], gi.double())
        assert_equal(grad1, grad2)
        assert grad2.dtype == ag.float32

    await test_reduction(ag.sum, True)
    await test_reduction(ag.prod, True)
    await test_reduction(ag.cumsum, False)
    await test_reduction(ag.cumprod, False)
    await test_reduction(ag.logcumsumexp, False, takes_dtype=False)


# 210
async def test_nansum_with_nans():
    """Port of TestAutograd.test_nansum_with_nans."""
    a = ag.randn(2, 2, 2, 2)
    with ag.no_grad():
        a[a < 0.2] = float('nan')
    a.requires_grad = True

    # No args
    assert await ag.gradcheck(lambda x: x.nansum(), a)
    assert await ag.gradgradcheck(lambda x: x.nansum(), a)

    # Single dim
    assert await ag.gradcheck(lambda x: x.nansum((0)), a)
    assert await ag.gradgradcheck(lambda x: x.nansum((0)), a)

    # Multi dim
    assert await ag.gradcheck(lambda x: x.nansum((0, 2)), a)
    assert await ag.gradgradcheck(lambda x: x.nansum((0, 2)), a)

    assert await ag.gradcheck(lambda x: x.nansum((0, -1)), a)
    assert await ag.gradgradcheck(lambda x: x.nansum((0, -1)), a)

    # With keep-dim
    assert await ag.gradcheck(lambda x: x.nansum((0, -1), True), a)
    assert await ag.gradgradcheck(lambda x: x.nansum((0, -1), True), a)


# 213
def test_profiler_no_cuda():
    """Port of TestAutograd.test_profiler_no_cuda."""
    print("")
    layer = ag.nn.Linear(20, 30)
    x = ag.randn(128, 20)
    with ag.autograd.profiler.profile(use_cuda=False) as prof:
        layer(x)

    prof_str = str(prof)
    print(prof_str)
    assert 'cpu' in prof_str.lower()
    assert 'cuda' not in prof_str.lower()


# 217
async def test_dstack():
    """Port of TestAutograd.test_dstack."""
    x = ag.randn(10, 10, requires_grad=True)
    y = ag.randn(10, 10, requires_grad=True)
    z = ag.randn(10, 10, requires_grad=True)
    stacked = ag.dstack([x, y, z])
    grad = ag.randn(10, 10, 3)
    await stacked.backward(grad)
    assert_equal(x.grad, grad[:, :, 0])
    assert_equal(y.grad, grad[:, :, 1])
    assert_equal(z.grad, grad[:, :, 2])


# 222
async def test_pow_scalar_base():
    """Port of TestAutograd.test_pow_scalar_base."""
    a = ag.arange(1, 13, dtype=ag.float64).view(3, 4).requires_grad_()
    assert await ag.gradcheck(lambda a: ag.pow(2, a), (a,))


# 226
async def test_cholesky_inverse():
    """Port of TestAutograd.test_cholesky_inverse."""
    async def _test_with_size(upper, dims):
        A = ag.randn(*dims)
        A.diagonal().uniform_(0.1, 5.0)
        A.requires_grad_()

        def func(A, upper):
            if upper:
                root = A.triu()
            else:
                root = A.tril()
            return ag.cholesky_inverse(root, upper)

        assert await ag.gradcheck(func, [A, upper])
        assert await ag.gradgradcheck(func, [A, upper])

    for upper in (True, False):
        for dims in [(3, 3), (5, 5)]:
            await _test_with_size(upper, dims)


# 230
async def test_pinverse():
    """Port of TestAutograd.test_pinverse."""
    m, n = 5, 10
    U = ag.randn(n, m).qr()[0].t()  # Orthogonal with dimensions m x n
    V = ag.randn(n, m).qr()[0].t()  # Orthogonal with dimensions m x n

    def func(x):
        S = ag.cat([x, ag.zeros(n - m)], 0)
        M = U.mm(ag.diag(S)).mm(V.t())
        return M.pinverse()

    assert await ag.gradcheck(func, [ag.rand(m).add_(1).requires_grad_()])
    assert await ag.gradcheck(func, [ag.rand(m).add_(10).requires_grad_()])
    assert await ag.gradgradcheck(func, [ag.rand(m).add_(1).requires_grad_()])
    assert await ag.gradgradcheck(func, [ag.rand(m).add_(10).requires_grad_()])


# 233
async def test_cholesky_solve():
    """Port of TestAutograd.test_cholesky_solve."""
    async def _test_with_size(A_dims, B_dims, upper):
        root = ag.rand(*A_dims).requires_grad_()
        b = ag.rand(*B_dims).requires_grad_()

        def func(root, b, upper):
            if upper:
                A = root.triu()
            else:
                A = root.tril()
            return ag.cholesky_solve(b, A, upper)

        assert await ag.gradcheck(func, [root, b, upper])
        assert await ag.gradgradcheck(func, [root, b, upper])

    for a_size, b_size in [((3, 3), (3, 4)), ((3, 3), (3, 2)), ((2, 3, 3), (2, 3, 4)), ((2, 3, 3), (2, 3, 2))]:
        for upper in [True, False]:
            await _test_with_size(a_size, b_size, upper)


# 234
async def test_put():
    """Port of TestAutograd.test_put."""
    root = ag.randn(4, 5, requires_grad=True)
    values = ag.randn(6, requires_grad=True)
    idx = ag.tensor([1, 2, 3, -1, -2, -3], dtype=ag.int64)

    def func(root, values):
        x = root.clone()
        x.put_(idx, values)
        return x

    assert await ag.gradcheck(func, [root, values])
    assert await ag.gradgradcheck(func, [root, values])


# 235
async def test_logcumsumexp_large_value():
    """Port of TestAutogradDeviceType.test_logcumsumexp_large_value."""
    a = ag.rand(4, 4, 4, dtype=ag.float64, requires_grad=True)
    with ag.no_grad():
        # Large Number
        a[0] = 10000

    assert await ag.gradcheck(lambda x: x.logcumsumexp(0), a)
    assert await ag.gradgradcheck(lambda x: x.logcumsumexp(0), a)

    assert await ag.gradcheck(lambda x: x.logcumsumexp(1), a)
    assert await ag.gradgradcheck(lambda x: x.logcumsumexp(1), a)

    assert await ag.gradcheck(lambda x: x.logcumsumexp(2), a)
    assert await ag.gradgradcheck(lambda x: x.logcumsumexp(2), a)


# 239
async def test_hstack():
    """Port of TestAutograd.test_hstack."""
    x = ag.randn(10, 10, requires_grad=True)
    y = ag.randn(10, 10, requires_grad=True)
    z = ag.randn(10, 10, requires_grad=True)
    stacked = ag.hstack([x, y, z])
    grad = ag.randn(10, 30)
    await stacked.backward(grad)
    assert_equal(x.grad, grad[:, 0:10])
    assert_equal(y.grad, grad[:, 10:20])
    assert_equal(z.grad, grad[:, 20:30])

    x = ag.randn(10, requires_grad=True)
    y = ag.randn(10, requires_grad=True)
    z = ag.randn(10, requires_grad=True)
    stacked = ag.hstack([x, y, z])
    grad = ag.randn(30)
    await stacked.backward(grad)
    assert_equal(x.grad, grad[0:10])
    assert_equal(y.grad, grad[10:20])
    assert_equal(z.grad, grad[20:30])
