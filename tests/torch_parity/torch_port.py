"""Shared pieces of the ports of PyTorch's own autograd tests (``test_torch_autograd_port*.py``).

torch's ``test/test_autograd.py`` helpers as asyncgrad code, the population of in-scope test names,
and the check that each port file holds exactly its slice of the seeded sample
``random.Random(0).sample(population, 239)`` (a permutation of the population whose first 60 are
``sample(population, 60)``: ``random.sample`` draws the same prefix for any k on this population).
"""

import random

import numpy as np
import pytest

import asyncgrad as ag

S = 5  # torch.testing._internal.common_methods_invocations.S


@pytest.fixture(autouse=True)
def double_default():
    """torch's test file runs ``torch.set_default_dtype(torch.double)`` at import."""
    before = ag.get_default_dtype()
    ag.set_default_dtype(ag.float64)
    yield
    ag.set_default_dtype(before)


def _np(t):
    if isinstance(t, ag.Tensor):
        return np.asarray(t.detach().numpy())
    return np.asarray(t)


def assert_equal(actual, expected, atol=None, rtol=None):
    """torch's ``assertEqual`` for tensors and numbers: same shape, values within its default tolerances."""
    a, e = _np(actual), _np(expected)
    assert a.shape == e.shape, (a.shape, e.shape)
    if atol is None:
        low = np.float32 in (a.dtype, e.dtype)
        rtol, atol = (1.3e-6, 1e-5) if low else (1e-7, 1e-7)
    np.testing.assert_allclose(a, e, rtol=rtol, atol=atol, equal_nan=True)


def _assert_same_struct(res, base):
    """TestAutogradFunctional._assert_same_struct."""
    if isinstance(base, ag.Tensor):
        assert isinstance(res, ag.Tensor)
        assert tuple(base.shape) == tuple(res.shape)
    elif isinstance(base, tuple):
        assert isinstance(res, tuple)
        assert len(base) == len(res)
        for el_base, el_res in zip(base, res):
            assert isinstance(el_base, ag.Tensor) and isinstance(el_res, ag.Tensor)
            assert tuple(el_base.shape) == tuple(el_res.shape)
    else:
        raise RuntimeError("The base given to `_assert_same_struct` doesn't have the right structure.")


def _assert_interleaved_struct(res, base1, base2):
    """TestAutogradFunctional._assert_interleaved_struct."""
    if isinstance(base1, ag.Tensor) and isinstance(base2, ag.Tensor):
        assert isinstance(res, ag.Tensor)
        assert tuple(res.shape) == tuple(base1.shape) + tuple(base2.shape)
    elif isinstance(base1, tuple) and isinstance(base2, ag.Tensor):
        assert isinstance(res, tuple) and len(res) == len(base1)
        for el_res, el_base1 in zip(res, base1):
            assert tuple(el_res.shape) == tuple(el_base1.shape) + tuple(base2.shape)
    elif isinstance(base1, ag.Tensor) and isinstance(base2, tuple):
        assert isinstance(res, tuple) and len(res) == len(base2)
        for el_res, el_base2 in zip(res, base2):
            assert tuple(el_res.shape) == tuple(base1.shape) + tuple(el_base2.shape)
    elif isinstance(base1, tuple) and isinstance(base2, tuple):
        assert isinstance(res, tuple) and len(res) == len(base1)
        for el_res, el_base1 in zip(res, base1):
            assert isinstance(el_res, tuple) and len(res) == len(base2)
            for el_el_res, el_base2 in zip(el_res, base2):
                assert tuple(el_el_res.shape) == tuple(el_base1.shape) + tuple(el_base2.shape)
    else:
        raise RuntimeError("The bases given to `_assert_interleaved_struct` don't have the right structure.")


def random_symmetric_matrix(l, *batches):
    """common_utils.random_symmetric_matrix: (A + Aᵀ) / 2 of a standard normal A."""
    A = ag.randn(*(batches + (l, l)))
    return (A + A.transpose(-2, -1)) / 2


def random_symmetric_pd_matrix(matrix_size, *batch_dims):
    """common_utils.random_symmetric_pd_matrix: A Aᵀ + 1e-5 I of a standard normal A."""
    A = ag.randn(*(batch_dims + (matrix_size, matrix_size)))
    return ag.matmul(A, A.transpose(-2, -1)) + ag.eye(matrix_size) * 1e-5


def mask_not_all_zeros(shape):
    """common_methods_invocations.mask_not_all_zeros."""
    while True:
        result = ag.randn(*shape).gt(0)
        if bool(result.sum() > 0):
            return result


async def run_functional_checks(name, apply_fn, run_grad_checks, f_args_variable):
    """test_autograd.run_functional_checks (gradcheck, gradgradcheck with non-contiguous grad
    outputs left to asyncgrad's default, a backward with a random grad, the grad's type and size)."""
    output_variable = apply_fn(*f_args_variable)
    if run_grad_checks:
        assert await ag.gradcheck(apply_fn, f_args_variable, eps=1e-6, atol=1e-4)
        assert await ag.gradgradcheck(apply_fn, f_args_variable)
    self_variable = f_args_variable[0]
    if isinstance(output_variable, ag.Tensor) and output_variable.requires_grad and self_variable is not None:
        await output_variable.backward(ag.randn_like(output_variable))
        assert self_variable.grad.dtype == self_variable.dtype  # assertEqualTypeString
        assert tuple(self_variable.size()) == tuple(self_variable.grad.size())


def graph_desc(fn):
    """test_autograd.graph_desc, with ``name()`` for torch's ``type(fn).__name__``."""
    if fn is None:
        return 'None'
    result = fn.name() + '('
    next_functions = fn.next_functions
    for next_fn, _ in next_functions:
        result += graph_desc(next_fn)
        result += ', '
    if next_functions:
        result = result[:-2]
    return result + ')'


# The population, in the order torch's file defines the tests (names without their ``test_``).
POPULATION = {
    "TestAutograd": """
    function once_differentiable function_returns_input function_returns_undefined_tensor
    materialize_grads dont_materialize_grads custom_function_exception invalid_gradients accumulate_grad
    slogdet_sign sum_to_with_empty_dim_grad hessian_vector grad grad_nonleaf grad_nonleaf_many_outputs
    grad_nonleaf_register_hook hook_with_no_name sharded_grad backward_badcalls grad_badcalls
    grad_fn_badcalls grad_unreachable hooks hooks_cpp hook_none retain_grad retain_grad_cycle backward
    multi_backward multi_backward_no_grad dependent_backward save_output_nr free_deep_graph
    free_deep_graph_complicated free_deep_graph_pyfunction no_unnecessary_save no_grad
    set_grad_generator_functions no_grad_python_function indexing indexing_duplicates
    index_backward_does_not_save_tensor requires_grad requires_grad_ requires_grad_inplace
    no_requires_grad_inplace attribute_deletion duplicate_backward_root backward_no_grad
    backward_twice_with_saved_values backward_twice_retained_graph_with_saved_values
    backward_twice_without_saved_values backward_twice_retained_graph_without_saved_values
    next_functions inplace mark_non_differentiable mark_non_differentiable_mixed
    mark_non_differentiable_none return_duplicate return_duplicate_inplace resize setitem setitem_mask
    select_sum stack hstack vstack dstack unbind put put_accumulate fill unused_output
    naughty_anomaly_access naughty_autograd_function_stashing_ctx custom_autograd_repeated_grad_grad
    custom_autograd_no_early_free detach detach_base type_conversions isolated_node shape
    numpy_requires_grad return_leaf leaf_assignment no_grad_assignment no_grad_modifies_version
    no_grad_input backward_copy save_none_for_backward too_many_grads pickle dep_nograd set_grad_enabled
    simple_reentrant reentrant_child_error broadcast_tensors block_diag cat cat_negdim_1 cat_negdim_2
    cat_empty_legacy cat_empty trapz var_mean_differentiable cholesky cholesky_solve eig symeig
    cholesky_inverse triangular_solve
    gradcheck_fail_when_no_differentiable_outputs_and_num_grad_not_zero variable_traverse
    norm_subgradient pow_zero_tensor_gradient pow_scalar_base pinverse chain_matmul profiler_tracing
    profiler profiler_seq_nr profiler_unboxed_only record_function_callbacks profiler_aggregation_fake
    profiler_aggregation_table profiler_function_event_avg profiler_shapes profiler_no_cuda
    profiler_aggregation_lstm memory_profiler record_function record_function_multithreaded as_strided
    lerp_tensor_weights reduce_dtype inplace_view_saved_output inplace_view_backward
    inplace_view_weak_grad_fn mul_out mul_out_result_requires_grad diagonal_derivative_requires_grad
    anomaly_detect_nan nested_anomaly_detect_nan anomaly_grad_warnings eig_no_eigenvectors
    eig_complex_eigenvalues symeig_no_eigenvectors svd_no_singularvectors no_grad_copy
    gradcheck_single_input gradcheck_nondeterministic version_counter set_data_preserve_pyobj
    deep_reentrant reentrant_priority checkpointing reentrant_with_callbacks_depth_0
    reentrant_with_callbacks_depth_1 reentrant_with_callbacks_both_depths
    reentrant_with_leaf_variable_hook reentrant_with_non_leaf_variable_hook autograd_views_codegen
    autograd_complex_views_python autograd_inplace_views_python custom_function_return_view_in_nograd
    grad_mode_restored_reentrant power_function nansum_with_nans nansum_dtype custom_function_error
    custom_function_local_inplace integer_outputs
""",
    "TestAutogradFunctional": """
    vjp_err_check vjp_err_check_strict vjp_output vjp_scalar vjp_create_graph jvp_err_check
    jvp_err_check_strict jvp_output jvp_scalar jvp_create_graph jacobian_err_check
    jacobian_err_check_strict jacobian_output jacobian_scalar jacobian_create_graph hessian_err_check
    hessian_err_check_strict hessian_output hessian_scalar hessian_create_graph vhp_err_check
    vhp_err_check_strict vhp_output vhp_scalar vhp_create_graph hvp_err_check hvp_err_check_strict
    hvp_output hvp_scalar hvp_create_graph jacobian_match_vjp_jvp hessian_match_vhp_hvp
""",
    "TestAutogradDeviceType": """
    min_max_median_backprops_to_all_values cdist cdist_same_inputs parameter_resize pyscalar_conversions
    set_requires_grad_only_for_floats advanced_indexing_backwards_memory_format pdist_large
    where_functional where_scalar ctc_loss leaky_relu_inplace_with_neg_slope
    leaky_relu_inplace_with_zero_slope LSTM_grad_and_gradgrad GRU_grad_and_gradgrad grad_assignment
    requires_grad_factory copy_ inplace_view_backprop_base inplace_view_backprop_view_of_view
    inplace_view_of_view inplace_view_gradcheck inplace_view_multiple_outputs
    inplace_view_makes_base_require_grad inplace_view_backprop_view inplace_view_modify_base
    inplace_view_python inplace_view_non_contig inplace_view_multi_output_unsafe
    inplace_view_multi_output_safe mv_grad_stride_0 logcumsumexp_large_value strided_leaf_grad_layout
    movedim atleast
""",
}


def population() -> list[str]:
    """Every in-scope test, as ``Class.test_name``."""
    names = [f"{cls}.test_{name}" for cls, names in POPULATION.items() for name in names.split()]
    assert len(names) == len(set(names)) == 239
    return names


def seeded_sample() -> list[str]:
    """The order in which tests are ported: all 239, items 1-60 equal to ``sample(population, 60)``."""
    order = random.Random(0).sample(population(), 239)
    assert order[:60] == random.Random(0).sample(population(), 60)
    return order


def ported_names(module_globals: dict) -> list[str]:
    """The torch tests a port file ports, in its order: the docstrings start ``Port of Class.test_x``."""
    return [fn.__doc__.split()[2].rstrip(".") for fn in list(module_globals.values())
            if callable(fn) and (fn.__doc__ or "").startswith("Port of ")]


def assert_ports_are_items(module_globals: dict, first: int, last: int) -> None:
    """The file's ports are exactly items ``first`` to ``last`` (1-based, inclusive) of the sample."""
    assert ported_names(module_globals) == seeded_sample()[first - 1:last]
