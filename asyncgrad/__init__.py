"""asyncgrad: PyTorch's autograd engine rebuilt on asyncio, with numpy (and CuPy) arrays.

Data flows one way: ``tensor`` -> ``ops`` (forward + backward formulas) -> ``graph`` (the
recorded graph) -> ``engine`` (runs it backward) -> ``devices``; ``autograd`` is the front door.
"""

# isort: split
from asyncgrad import _surface  # noqa: F401  (installs Tensor's methods: Note [One declaration of Tensor's surface])

# isort: split
from asyncgrad import nn, optim, profiler, utils, viz  # noqa: E402
from asyncgrad.autograd import functional
from asyncgrad.autograd.api import backward, backward_sync, give_way, grad, grad_sync
from asyncgrad.autograd.function import Function, FunctionCtx, once_differentiable
from asyncgrad.autograd.gradcheck import GradcheckError, gradcheck, gradgradcheck  # noqa: E402
from asyncgrad.checkpoint import checkpoint  # noqa: E402
from asyncgrad.devices import Device, device, set_inline_threshold, set_num_workers

# allocator policy: opt-in glibc heap thresholds (Note [Heap trimming and page faults] in devices/allocator.py)
from asyncgrad.devices.allocator import get_allocator_policy, set_allocator_policy

# recycled product buffers: large cpu gradient products reuse freed memory (Note [Recycled product buffers])
from asyncgrad.devices.buffers import empty_cache

# streams: per-device streams and events (Note [Streams per device] in devices/streams.py)
from asyncgrad.devices.streams import Event, Stream, current_stream, default_stream, stream, synchronize
from asyncgrad.dtypes import (
    bool,
    double,
    float,
    float16,
    float32,
    float64,
    get_default_dtype,
    half,
    int,
    int8,
    int16,
    int32,
    int64,
    long,
    set_default_dtype,
    short,
    uint8,
)
from asyncgrad.engine.budget import get_loop_budget, set_loop_budget
from asyncgrad.engine.engine import get_engine
from asyncgrad.factories import (
    arange,
    bernoulli,
    empty,
    empty_like,
    eye,
    from_numpy,
    full,
    full_like,
    linspace,
    multinomial,
    normal,
    ones,
    ones_like,
    rand,
    rand_like,
    randint,
    randint_like,
    randn,
    randn_like,
    randperm,
    tensor,
    zeros,
    zeros_like,
)
from asyncgrad.graph.anomaly import detect_anomaly, is_anomaly_enabled, set_detect_anomaly
from asyncgrad.graph.grad_mode import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from asyncgrad.graph.node import Edge, GraphRoot, Node, RemovableHandle
from asyncgrad.ops.elementwise import (
    abs,
    add,
    clamp,
    cos,
    div,
    eq,
    exp,
    ge,
    gt,
    hypot,
    le,
    log,
    log1p,
    lt,
    maximum,
    minimum,
    mul,
    ne,
    neg,
    pow,
    relu,
    sigmoid,
    sign,
    sin,
    sqrt,
    sub,
    tanh,
    where,
)
from asyncgrad.ops.linalg import matmul
from asyncgrad.ops.out import accepts_out as _accepts_out
from asyncgrad.ops.reduction import argmax, argmin, log_softmax, max, mean, min, softmax, sum

# views and shape ops (ops/views.py, ops/shape.py)
from asyncgrad.ops.shape import (
    cat,
    clone,
    diag,
    flatten,
    flip,
    hstack,
    permute,
    reshape,
    roll,
    squeeze,
    stack,
    tile,
    transpose,
    tril,
    triu,
    unsqueeze,
    vstack,
)
from asyncgrad.ops.views import (
    as_strided,
    chunk,
    diagonal,
    moveaxis,
    movedim,
    narrow,
    select,
    split,
    split_with_sizes,
    unbind,
    unflatten,
)
from asyncgrad.random import (
    Generator,
    default_generator,
    get_rng_state,
    initial_seed,
    manual_seed,
    seed,
    set_rng_state,
)
from asyncgrad.serialization import load, save
from asyncgrad.tensor import Tensor
from asyncgrad.variable.accumulate import AccumulateGrad

# out= (Note [out= arguments] in ops/out.py): the top-level functions take torch's out=, the methods do not
(abs, add, clamp, cos, div, eq, exp, ge, gt, hypot, le, log, log1p, lt, maximum, minimum, mul, ne, neg, pow,
 sigmoid, sign, sin, sqrt, sub, tanh, where, matmul, argmax, argmin, mean, sum, cat, stack) = map(_accepts_out, (
    abs, add, clamp, cos, div, eq, exp, ge, gt, hypot, le, log, log1p, lt, maximum, minimum, mul, ne, neg, pow,
    sigmoid, sign, sin, sqrt, sub, tanh, where, matmul, argmax, argmin, mean, sum, cat, stack))
detach = Tensor.detach
"""torch's function form, ``ag.detach(t)``: ``t.detach()``."""

__version__ = "0.1.0"

# pointwise math, the matmul family, norms, ag.linalg, constructors and checks
from asyncgrad import linalg  # noqa: E402
from asyncgrad.constructors import as_tensor, is_tensor  # noqa: E402
from asyncgrad.ops.elementwise import (  # noqa: E402
    acos,
    acosh,
    allclose,
    asin,
    asinh,
    atan,
    atan2,
    atanh,
    ceil,
    clamp_max,
    clamp_min,
    copysign,
    cosh,
    deg2rad,
    digamma,
    equal,
    erf,
    erfc,
    erfinv,
    exp2,
    expm1,
    floor,
    floor_divide,
    fmax,
    fmin,
    fmod,
    frac,
    greater,
    greater_equal,
    i0,
    isclose,
    isfinite,
    isinf,
    isnan,
    ldexp,
    lerp,
    less,
    less_equal,
    lgamma,
    log2,
    log10,
    logaddexp,
    logaddexp2,
    logit,
    mvlgamma,
    nan_to_num,
    nextafter,
    not_equal,
    polygamma,
    positive,
    rad2deg,
    reciprocal,
    remainder,
    round,
    rsqrt,
    rsub,
    sgn,
    sinc,
    sinh,
    square,
    tan,
    true_divide,
    trunc,
    xlogy,
)
from asyncgrad.ops.linalg import (  # noqa: E402
    addmm,
    baddbmm,
    block_diag,
    bmm,
    cdist,
    chain_matmul,
    cholesky_inverse,
    cholesky_solve,
    cross,
    det,
    dot,
    eig,
    einsum,
    kron,
    logdet,
    matrix_exp,
    matrix_power,
    mm,
    mv,
    norm,
    outer,
    pinverse,
    slogdet,
    symeig,
    trapezoid,
    trapz,
    triangular_solve,
)
from asyncgrad.ops.linalg import cholesky_legacy as cholesky  # noqa: E402
from asyncgrad.ops.linalg import inv as inverse  # noqa: E402
from asyncgrad.ops.linalg import qr_legacy as qr  # noqa: E402
from asyncgrad.ops.linalg import svd_legacy as svd  # noqa: E402

arctan2 = atan2

# grad modes: torch's multithreading switch and inference mode
# dtypes: torch's dtype class and functions (Note [Dtypes are numpy dtypes underneath] in dtypes.py)
from asyncgrad.constructors import is_complex, is_floating_point  # noqa: E402
from asyncgrad.dtypes import dtype, finfo, iinfo  # noqa: E402
from asyncgrad.graph.grad_mode import (  # noqa: E402
    inference_mode,
    is_inference_mode_enabled,
    set_multithreading_enabled,
)

# indexing: gather/scatter, index_select/index_add, masks, sorting, scans and reductions
from asyncgrad.ops.indexing import (  # noqa: E402
    gather,
    index_add,
    index_select,
    masked_fill,
    masked_select,
    nonzero,
    scatter,
    scatter_add,
)
from asyncgrad.ops.reduction import (  # noqa: E402
    all,
    amax,
    amin,
    any,
    cumprod,
    cumsum,
    logsumexp,
    prod,
    std,
    std_mean,
    var,
    var_mean,
)
from asyncgrad.ops.sorting import argsort, kthvalue, median, nanmedian, sort, topk, unique  # noqa: E402

# torch.Size (what Tensor.shape and Tensor.size() return)
from asyncgrad.tensor import Size  # noqa: E402

# isort: split
# ops-misc: logcumsumexp, nansum, dstack, atleast_Nd, put, broadcast_tensors, pdist, the unsafe_ splits
from asyncgrad.ops.misc import (  # noqa: E402
    atleast_1d,
    atleast_2d,
    atleast_3d,
    broadcast_tensors,
    bucketize,
    dstack,
    index_copy,
    index_fill,
    index_put,
    logcumsumexp,
    masked_scatter,
    nansum,
    pdist,
    put,
    searchsorted,
)
from asyncgrad.ops.views import unsafe_chunk, unsafe_split, unsafe_split_with_sizes  # noqa: E402

# strides and memory formats (asyncgrad/_layout.py)
# isort: split
from asyncgrad._layout import (  # noqa: E402
    channels_last,
    channels_last_3d,
    contiguous_format,
    layout,
    memory_format,
    preserve_format,
    strided,
)
from asyncgrad.factories import empty_strided  # noqa: E402

# opt: addcmul and addcdiv (ops/elementwise.py)
# isort: split
from asyncgrad.ops.elementwise import addcdiv, addcmul  # noqa: E402

# opsB: ag.masked, ag.special, the *_copy variants of the views (ops/view_copies.py)
# isort: split
from asyncgrad import masked, special  # noqa: E402

# the rest of torch's differentiable ops (issue 29): composites, products, scans, scatters
from asyncgrad.ops.composites import (  # noqa: E402
    broadcast_to,
    cartesian_prod,
    column_stack,
    combinations,
    corrcoef,
    cov,
    cumulative_trapezoid,
    diagflat,
    diff,
    dsplit,
    fliplr,
    flipud,
    float_power,
    gradient,
    hsplit,
    inner,
    meshgrid,
    msort,
    nanmean,
    nanquantile,
    quantile,
    ravel,
    repeat_interleave,
    take_along_dim,
    tensor_split,
    tensordot,
    vsplit,
)
from asyncgrad.ops.elementwise import fill, frexp  # noqa: E402
from asyncgrad.ops.indexing import index_reduce, scatter_reduce, take  # noqa: E402
from asyncgrad.ops.inplace_views import swapaxes, swapdims  # noqa: E402
from asyncgrad.ops.linalg import addbmm, addmv, addr, dist, renorm, trace, vdot  # noqa: E402
from asyncgrad.ops.linalg_composed import ormqr, pca_lowrank, svd_lowrank  # noqa: E402

# the LU family's torch.* names (ops/lu.py; torch.linalg's are in ag.linalg)
from asyncgrad.ops.lu import lu_legacy as lu  # noqa: E402
from asyncgrad.ops.lu import lu_solve_legacy as lu_solve  # noqa: E402
from asyncgrad.ops.lu import lu_unpack  # noqa: E402
from asyncgrad.ops.shape import diag_embed, rot90  # noqa: E402
from asyncgrad.ops.sorting import aminmax, cummax, cummin, mode  # noqa: E402
from asyncgrad.ops.view_copies import (  # noqa: E402
    alias_copy,
    as_strided_copy,
    diagonal_copy,
    expand_copy,
    narrow_copy,
    permute_copy,
    split_with_sizes_copy,
    squeeze_copy,
    t_copy,
    transpose_copy,
    unbind_copy,
    unfold_copy,
    unsqueeze_copy,
    view_copy,
)
from asyncgrad.ops.views import as_strided_scatter, diagonal_scatter, select_scatter, slice_scatter  # noqa: E402

# behaviour: ops torch's current autograd tests use (factories.py, ops/elementwise.py, ops/misc.py, ops/reduction.py)
# isort: split
from asyncgrad.autograd.api import is_warn_always_enabled, set_warn_always  # noqa: E402
from asyncgrad.factories import tril_indices, triu_indices  # noqa: E402
from asyncgrad.ops.elementwise import signbit  # noqa: E402
from asyncgrad.ops.misc import isin  # noqa: E402
from asyncgrad.ops.reduction import count_nonzero  # noqa: E402

# the unary table in place (Note [In-place forms of the unary table] in ops/elementwise.py): a function where torch
# has one (it has only the method for these five)
# isort: split
from asyncgrad.ops import UNARY_INPLACE as _UNARY_INPLACE  # noqa: E402

for _name, _fn in _UNARY_INPLACE.items():
    if _name not in ("sign_", "erfinv_", "sgn_", "lgamma_", "digamma_"):
        # named where they are exported, so that introspection (help(), the reference pages) finds them here
        _fn.__module__, _fn.__qualname__ = __name__, _name
        globals()[_name] = _fn
del _name, _fn
