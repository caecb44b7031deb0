"""Op families, the fast subset that `make test` runs, and the ops that must stay native;
the same for PyTorch's ModuleInfos at the end (MODULE_*).

Families follow issue 4's list (elementwise ... grouped_mm), then the rest of op_db
(linalg, fft/signal, special functions, creation, views/shape, masked, sparse, other).

Kernel authors: when you land a native kernel, add the OpInfo (and the dtypes it now
runs natively) to MUST_BE_NATIVE so a regression back to the CPU fallback fails
`make test`. `python -m tests.conformance.sweep --op NAME` shows the current status.
"""

from __future__ import annotations

import torch

FAMILIES = (
    "elementwise", "activations", "reductions", "softmax", "norms", "matmul",
    "conv/pool/upsample", "index/gather/scatter/join/sort", "attention", "random", "losses",
    "optimizer", "grouped_mm",
    # Not named in the list:
    "linalg", "fft/signal", "special functions", "creation", "views/shape", "masked",
    "sparse", "other",
)

_ACTIVATIONS = {
    "relu", "relu6", "gelu", "silu", "elu", "celu", "selu", "leaky_relu", "hardtanh",
    "hardswish", "hardsigmoid", "hardshrink", "softshrink", "tanhshrink", "softplus",
    "softsign", "mish", "logsigmoid", "glu", "prelu", "threshold",
}
_SOFTMAX = {"softmax", "log_softmax", "nn.functional.softmin", "_softmax_backward_data",
            "torch.ops.aten._safe_softmax.default"}
_NORMS = {"nn.functional.layer_norm", "nn.functional.group_norm", "nn.functional.batch_norm",
          "nn.functional.instance_norm", "nn.functional.rms_norm",
          "nn.functional.local_response_norm", "native_batch_norm", "_native_batch_norm_legit",
          "_batch_norm_with_update", "native_layer_norm", "native_group_norm",
          "nn.functional.normalize", "renorm"}
_MATMUL = {"mm", "bmm", "addmm", "addmv", "addr", "addbmm", "baddbmm", "matmul", "mv", "dot",
           "vdot", "inner", "outer", "einsum", "tensordot", "kron", "nn.functional.linear",
           "nn.functional.bilinear", "linalg.multi_dot", "linalg.vecdot", "__rmatmul__",
           "cdist", "torch._scaled_mm", "torch._scaled_mm_v2", "chain_matmul",
           "jiterator_2inputs_2outputs"}
_REDUCTIONS = {"sum", "mean", "prod", "amax", "amin", "aminmax", "argmax", "argmin", "all",
               "any", "std", "var", "std_mean", "var_mean", "norm", "count_nonzero", "logsumexp",
               "nansum", "nanmean", "median", "nanmedian", "mode", "cumsum", "cumprod",
               "cummax", "cummin", "logcumsumexp", "max", "min", "dist", "linalg.vector_norm",
               "linalg.matrix_norm", "linalg.norm", "quantile", "nanquantile", "histc",
               "bincount", "histogram", "histogramdd", "trace", "_segment_reduce",
               "cumulative_trapezoid", "trapezoid", "trapz", "diff", "gradient", "sum_to_size",
               "cov", "corrcoef", "hash_tensor"}
_INDEX_JOIN_SORT = {
    "nn.functional.embedding", "nn.functional.embedding_bag", "nn.functional.one_hot",
    "index_add", "index_copy", "index_fill", "index_put", "index_reduce", "index_select",
    "gather", "scatter", "scatter_add", "scatter_reduce", "take", "take_along_dim", "put",
    "masked_fill", "masked_scatter", "masked_select", "__getitem__", "_unsafe_masked_index",
    "_unsafe_masked_index_put_accumulate", "select_scatter", "slice_scatter",
    "diagonal_scatter", "as_strided_scatter", "nonzero", "nonzero_static", "argwhere", "cat",
    "stack", "hstack", "vstack", "dstack", "column_stack", "block_diag", "split",
    "split_with_sizes", "split_with_sizes_copy", "chunk", "unsafe_chunk", "unsafe_split",
    "tensor_split", "hsplit", "vsplit", "dsplit", "unbind", "unbind_copy", "flip", "fliplr",
    "flipud", "roll", "rot90", "repeat", "repeat_interleave", "tile", "sort", "argsort",
    "msort", "topk", "kthvalue", "unique", "unique_consecutive", "searchsorted", "bucketize",
    "isin", "_chunk_cat", "cartesian_prod", "combinations", "meshgrid", "tril", "triu", "diag",
    "diag_embed", "diagflat", "constant_pad_nd", "nn.functional.pad", "unravel_index",
    "max_pool2d_with_indices_backward",
}
_VIEWS = {
    "view", "reshape", "permute", "transpose", "t", "T", "H", "mT", "mH", "squeeze",
    "unsqueeze", "flatten", "unflatten", "expand", "expand_as", "broadcast_to",
    "broadcast_tensors", "broadcast_shapes", "narrow", "narrow_copy", "select", "slice",
    "diagonal", "as_strided", "movedim", "ravel", "view_as", "reshape_as", "contiguous",
    "clone", "atleast_1d", "atleast_2d", "atleast_3d", "unfold", "unfold_copy", "alias_copy",
    "view_as_real", "view_as_complex", "real", "imag", "conj", "conj_physical",
    "resolve_conj", "resolve_neg", "to", "bfloat16", "bool", "byte", "char", "double", "float",
    "half", "int", "long", "short", "cfloat", "cdouble", "chalf", "positive", "item",
    "linalg.diagonal", "resize_", "resize_as_", "nn.functional.channel_shuffle",
}
_CREATION = {"arange", "linspace", "logspace", "ones", "zeros", "full", "eye", "zeros_like",
             "ones_like", "full_like", "new_ones", "new_zeros", "new_full", "new_empty",
             "new_empty_strided", "empty", "empty_like", "empty_permuted", "empty_strided",
             "scalar_tensor", "tril_indices", "triu_indices", "fill", "zero_"}
_LINALG_EXTRA = {"cholesky", "cholesky_inverse", "cholesky_solve", "lu", "lu_solve", "lu_unpack",
                 "qr", "svd", "geqrf", "ormqr", "triangular_solve", "matrix_exp", "logdet",
                 "pinverse", "inverse", "det", "svd_lowrank", "pca_lowrank", "cross"}
_LOSS_EXTRA = {"nn.functional.cross_entropy", "nn.functional.binary_cross_entropy",
               "nn.functional.binary_cross_entropy_with_logits", "nn.functional.kl_div",
               "nn.functional.linear_cross_entropy", "nn.functional.nll_loss",
               "nn.functional.ctc_loss"}
_RANDOM = {"bernoulli", "cauchy", "exponential", "geometric", "log_normal", "multinomial",
           "normal", "uniform", "rand_like", "randint", "randint_like", "randn", "randn_like",
           "nn.functional.dropout", "nn.functional.dropout2d", "nn.functional.dropout3d",
           "nn.functional.alpha_dropout", "nn.functional.feature_alpha_dropout",
           "nn.functional.rrelu", "native_dropout_backward"}


def family_of(op) -> str:
    name = op.name
    short = name.removeprefix("nn.functional.")
    kind = type(op).__name__
    if name.startswith("_foreach_") or name.startswith("_fused_"):
        return "optimizer"
    if "grouped_mm" in name:
        return "grouped_mm"
    if "attention" in name:
        return "attention"
    if name in _RANDOM:
        return "random"
    if name.startswith("masked."):
        return "masked"
    if name.startswith("sparse.") or name == "to_sparse":
        return "sparse"
    if "loss" in name or name in _LOSS_EXTRA:
        return "losses"
    if name in _SOFTMAX:
        return "softmax"
    if name in _NORMS:
        return "norms"
    if name in _MATMUL:
        return "matmul"
    if any(k in name for k in ("conv", "pool", "interpolate", "upsample", "grid_sample",
                               "pixel_shuffle", "pixel_unshuffle", "unpool")) \
            or name in ("nn.functional.unfold", "nn.functional.pdist",
                        "nn.functional.pairwise_distance", "nn.functional.cosine_similarity"):
        return "conv/pool/upsample"
    if name.startswith("nn.functional.") and short in _ACTIVATIONS:
        return "activations"
    if name in _INDEX_JOIN_SORT:
        return "index/gather/scatter/join/sort"
    if name in _REDUCTIONS or kind == "ReductionOpInfo":
        return "reductions"
    if name.startswith("linalg.") or name in _LINALG_EXTRA:
        return "linalg"
    if name.startswith("fft.") or name.startswith("signal.") or kind == "SpectralFuncInfo" \
            or name in ("stft", "istft"):
        return "fft/signal"
    if name.startswith("special."):
        return "special functions"
    if name in _CREATION:
        return "creation"
    if name in _VIEWS or name.endswith("_copy") or kind == "ShapeFuncInfo":
        return "views/shape"
    if kind in ("UnaryUfuncInfo", "BinaryUfuncInfo") or name in (
            "where", "addcmul", "addcdiv", "lerp", "clamp", "clamp_min", "clamp_max",
            "nan_to_num", "float_power", "complex", "polar", "frexp", "isclose", "allclose",
            "equal", "isin", "isreal", "signbit", "sgn", "polygamma", "mvlgamma", "logit",
            "angle", "heaviside", "__radd__", "__rsub__", "__rmul__", "__rdiv__", "__rmod__",
            "__rpow__", "__rand__", "__ror__", "__rxor__", "rsub", "true_divide", "xlogy",
            "igamma", "igammac") or name.startswith("jiterator_"):
        return "elementwise"
    return "other"


# ---------------------------------------------------------------------------------------
# The fast subset (`make test`): representative OpInfos of every family in the issue.
# key: OpInfo name, or "name.variant" for a variant.

ALL_DTYPES = ("float32", "bfloat16", "float16", "int8", "int16", "int32", "int64", "uint8",
              "bool", "complex64")
FLOAT_DTYPES = ("float32", "bfloat16")

FAST_SUBSET: dict[str, tuple[str, ...]] = {
    # elementwise unary / binary / ternary, comparisons: every dtype of the issue
    "add": ALL_DTYPES, "mul": ALL_DTYPES, "div.no_rounding_mode": ALL_DTYPES,
    "div.floor_rounding": ("float32", "int64"), "sub": ("float32", "bfloat16", "int64"),
    "neg": ALL_DTYPES, "abs": ALL_DTYPES, "exp": ALL_DTYPES, "sqrt": FLOAT_DTYPES,
    "rsqrt": FLOAT_DTYPES, "log": FLOAT_DTYPES, "sin": FLOAT_DTYPES, "tanh": FLOAT_DTYPES,
    "sigmoid": FLOAT_DTYPES, "floor": ("float32", "int64"), "round": FLOAT_DTYPES,
    "sign": FLOAT_DTYPES, "pow": ("float32", "bfloat16", "int64"), "eq": ALL_DTYPES,
    "lt": ALL_DTYPES, "ge": ("float32", "int64", "bool"), "maximum": ("float32", "int64", "bool"),
    "logical_and": ("float32", "bool"), "logical_not": ("float32", "bool", "int64"),
    "where": ALL_DTYPES, "addcmul": FLOAT_DTYPES, "addcdiv": FLOAT_DTYPES,
    "lerp": FLOAT_DTYPES, "clamp": ("float32", "bfloat16", "int64"),
    "bitwise_and": ("int64", "bool"),
    # activations (with backward)
    "nn.functional.relu": FLOAT_DTYPES, "nn.functional.gelu": FLOAT_DTYPES,
    "nn.functional.silu": FLOAT_DTYPES, "nn.functional.leaky_relu": FLOAT_DTYPES,
    "nn.functional.softplus": FLOAT_DTYPES,
    # reductions
    "sum": ("float32", "bfloat16", "int64", "bool"), "mean": FLOAT_DTYPES,
    "amax": ("float32", "bfloat16", "int64"), "argmax": ("float32", "int64"),
    "var": ("float32",), "cumsum": ("float32", "int64"), "prod": ("float32",),
    # softmax
    "softmax": FLOAT_DTYPES, "log_softmax": FLOAT_DTYPES,
    # norms
    "nn.functional.layer_norm": FLOAT_DTYPES, "nn.functional.rms_norm": FLOAT_DTYPES,
    "nn.functional.group_norm": ("float32",), "nn.functional.batch_norm": ("float32",),
    # matmul family
    "mm": ("float32", "bfloat16", "int64", "complex64"), "bmm": FLOAT_DTYPES,
    "addmm": FLOAT_DTYPES, "matmul": FLOAT_DTYPES, "nn.functional.linear": FLOAT_DTYPES,
    "baddbmm": ("float32",),
    # conv / pool / upsample
    "nn.functional.conv2d": FLOAT_DTYPES, "nn.functional.conv1d": ("float32",),
    "nn.functional.max_pool2d": ("float32",), "nn.functional.avg_pool2d": ("float32",),
    "nn.functional.interpolate.nearest": ("float32",),
    "nn.functional.interpolate.bilinear": ("float32",),
    # embedding, index ops, gather/scatter, cat/stack, topk/sort
    "nn.functional.embedding": FLOAT_DTYPES, "index_select": ("float32", "bfloat16", "int64"),
    "gather": ("float32", "int64"), "scatter_add": ("float32",), "index_put": ("float32",),
    "index_add": ("float32",), "masked_fill": ("float32", "bool"),
    "__getitem__": ("float32", "int64"), "cat": ("float32", "bfloat16", "int64", "bool"),
    "stack": ("float32",), "topk": FLOAT_DTYPES, "sort": ("float32", "int64"),
    # scaled_dot_product_attention
    "nn.functional.scaled_dot_product_attention": FLOAT_DTYPES,
    # RNG
    "bernoulli": ("float32",), "normal": ("float32",), "uniform": ("float32",),
    "nn.functional.dropout": ("float32",), "randn_like": ("float32",),
    "multinomial": ("float32",),
    # losses
    "nn.functional.cross_entropy": FLOAT_DTYPES, "nn.functional.nll_loss": ("float32",),
    "nn.functional.mse_loss": FLOAT_DTYPES,
    "nn.functional.binary_cross_entropy_with_logits": ("float32",),
    # optimizer kernels
    "_foreach_add": FLOAT_DTYPES, "_foreach_mul": ("float32",), "_foreach_addcmul": ("float32",),
    "_foreach_lerp": ("float32",), "_foreach_norm": ("float32",), "_foreach_sqrt": ("float32",),
    "_fused_adamw_": FLOAT_DTYPES, "_fused_adam_": ("float32",),
    # grouped GEMM
    "_grouped_mm": FLOAT_DTYPES,
    # creation, views, copies
    "view": ("float32",), "permute": ("float32",), "clone": ("float32", "bfloat16"),
    "zeros_like": ("float32",), "arange": ("float32", "int64"), "full": ("float32",),
    "to": ("float32",),
}

# Samples per (op, dtype) in the fast subset (the full sweep runs them all, up to its cap).
FAST_MAX_SAMPLES = 6

# ---------------------------------------------------------------------------------------
# Must run natively (no CPU fallback, forward and backward): regressions fail `make test`.
# Started from what the bridge runs natively at the time of writing; extend it as kernels
# land. Every key must also be in FAST_SUBSET (the test checks).

MUST_BE_NATIVE: dict[str, tuple[str, ...]] = {
    "add": ("float32", "bfloat16", "float16", "int8", "int16", "int32", "int64", "uint8", "bool"),
    "mul": ("float32", "bfloat16", "float16", "int8", "int16", "int32", "int64", "uint8", "bool"),
    "div.no_rounding_mode": ("float32", "bfloat16", "float16", "bool"),
    "div.floor_rounding": ("float32", "int64"),
    "sub": ("float32", "bfloat16", "int64"),
    "neg": ("float32", "bfloat16", "float16", "int8", "int16", "int32", "int64", "uint8"),
    "abs": ("int8", "int16", "int32", "int64", "uint8"),
    "exp": ("float32", "bfloat16", "float16", "int8", "int16", "int32", "int64", "uint8", "bool"),
    "sqrt": ("float32", "bfloat16"),
    "log": ("float32", "bfloat16"),
    "sin": ("float32", "bfloat16"),
    "tanh": ("float32", "bfloat16"),
    "sigmoid": ("float32", "bfloat16"),
    "floor": ("float32", "int64"),
    "round": ("float32", "bfloat16"),
    "sign": ("float32", "bfloat16"),
    "eq": ("float32", "bfloat16", "float16", "int8", "int16", "int32", "int64", "uint8", "bool"),
    "lt": ("float32", "bfloat16", "float16", "int8", "int16", "int32", "int64", "uint8", "bool"),
    "ge": ("float32", "int64", "bool"),
    "maximum": ("int64", "bool"),
    "logical_and": ("float32", "bool"),
    "logical_not": ("float32", "bool", "int64"),
    "where": ("float32", "bfloat16", "float16", "int8", "int16", "int32", "int64", "uint8",
              "bool"),
    "addcmul": ("float32", "bfloat16"),
    "addcdiv": ("float32", "bfloat16"),
    "nn.functional.relu": ("float32", "bfloat16"),
    "nn.functional.gelu": ("float32", "bfloat16"),
    "nn.functional.silu": ("float32", "bfloat16"),
    "softmax": ("float32", "bfloat16"),
    "log_softmax": ("float32", "bfloat16"),
    "nn.functional.layer_norm": ("float32", "bfloat16"),
    "nn.functional.rms_norm": ("float32", "bfloat16"),
    "nn.functional.group_norm": ("float32",),
    "nn.functional.batch_norm": ("float32",),
    "mm": ("float32", "bfloat16"),
    "bmm": ("float32", "bfloat16"),
    "addmm": ("float32", "bfloat16"),
    "nn.functional.linear": ("float32", "bfloat16"),
    "nn.functional.embedding": ("float32", "bfloat16"),
    "index_select": ("int64",),
    "uniform": ("float32",),
    "randn_like": ("float32",),
    "nn.functional.nll_loss": ("float32",),
    "_foreach_add": ("float32", "bfloat16"),
    "_foreach_mul": ("float32",),
    "_foreach_addcmul": ("float32",),
    "_foreach_lerp": ("float32",),
    "_foreach_sqrt": ("float32",),
    "_fused_adamw_": ("float32", "bfloat16"),
    "_fused_adam_": ("float32",),
    "_grouped_mm": ("float32", "bfloat16"),
    "view": ("float32",),
    "permute": ("float32",),
    "clone": ("float32", "bfloat16"),
    "zeros_like": ("float32",),
    "arange": ("float32", "int64"),
    "full": ("float32",),
    "to": ("float32",),
}

# Known wrong results in the fast subset, each a bug to fix: (OpInfo, dtype) -> the bug.
# They run as strict xfails: when the bug is fixed the test fails until the entry goes.
# (Integer true division, the first entry, was fixed: a freed temporary was reused.)
KNOWN_WRONG: dict[tuple[str, str], str] = {}

# ---------------------------------------------------------------------------------------
# ModuleInfo (module_db, tests/conformance/modules.py): the fast subset, module -> dtypes.
# One or more modules per layer family: linear, conv, norms (BatchNorm's running
# statistics), embedding, attention and transformer, recurrent, activations, pooling,
# padding, losses.

MODULE_FAST_SUBSET: dict[str, tuple[str, ...]] = {
    "nn.Linear": ("float32",), "nn.Bilinear": ("float32",), "nn.Conv1d": ("float32",),
    "nn.Conv2d": ("float32",), "nn.ConvTranspose2d": ("float32",),
    "nn.BatchNorm1d": ("float32",), "nn.BatchNorm2d": ("float32",),
    "nn.InstanceNorm2d": ("float32",), "nn.LayerNorm": ("float32",), "nn.RMSNorm": ("float32",),
    "nn.GroupNorm": ("float32", "bfloat16"), "nn.Embedding": ("float32",),
    "nn.MultiheadAttention": ("float32",), "nn.TransformerEncoderLayer": ("float32",),
    "nn.TransformerDecoderLayer": ("float32",), "nn.LSTM": ("float32",), "nn.GRU": ("float32",),
    "nn.GRUCell": ("float32",), "nn.ReLU": ("float32",), "nn.GELU": ("float32",),
    "nn.SiLU": ("float32",), "nn.Hardswish": ("float32",), "nn.PReLU": ("float32",),
    "nn.Softmax": ("float32",), "nn.LogSoftmax": ("float32",), "nn.MaxPool2d": ("float32",),
    "nn.AvgPool2d": ("float32",), "nn.AdaptiveAvgPool2d": ("float32",),
    "nn.ReflectionPad2d": ("float32",), "nn.ZeroPad2d": ("float32",),
    "nn.CrossEntropyLoss": ("float32",), "nn.NLLLoss": ("float32",), "nn.MSELoss": ("float32",),
    "nn.BCEWithLogitsLoss": ("float32",), "nn.SmoothL1Loss": ("float32",),
}

# Samples per (module, dtype) in the fast subset, training and eval interleaved.
MODULE_FAST_MAX_SAMPLES = 16

# Modules that must run natively, forward and backward (as MUST_BE_NATIVE for OpInfos):
# every module of the fast subset did in the sweep that added them.
MODULE_MUST_BE_NATIVE: dict[str, tuple[str, ...]] = dict(MODULE_FAST_SUBSET)

# Known wrong results in the module fast subset: (module, dtype) -> the bug (strict xfail).
MODULE_KNOWN_WRONG: dict[tuple[str, str], str] = {}
