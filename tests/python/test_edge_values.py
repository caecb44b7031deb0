"""Edge values on neuron against the CPU, for every op family: NaN, +-Inf, -0.0, the largest
finite and the subnormal values of float32/bfloat16/float16 through elementwise, comparison,
reduction, softmax, layer_norm, matmul and clamp ops; integer wrap-around, division by zero
and negative powers; zero-size, 0-dim, non-contiguous, expanded and overlapping operands
(indexed writes whose values, mask or indices alias the destination included); arguments at
the edge of a dtype's range (fill_, random_, randperm) and the real variance of complex values.

Every expectation is PyTorch's CPU result on the same inputs in the same dtype, with no
absolute tolerance (a subnormal flushed to zero shows). Where the CPU's own result is not
defined the comments say what is compared instead: PyTorch's CPU runs contiguous operands
through its vectorised loops and strided ones through its scalar loop, and a few edge inputs
give different results on the two (gelu(inf) is nan in the AVX loop and inf in the scalar
one, fmod(3e38, 0.5) nan and 0, maximum(-0.0, 0.0) one zero or the other); there either
CPU result is accepted, element by element.

Differences from the CPU found by this file are strict xfails naming the values."""

import math
import warnings

import pytest
import torch
import torch.nn.functional as F

pytestmark = [pytest.mark.usefixtures("no_fallback"),
              # std/var of fewer than 2 values: the CPU warns (and neuron), the value is nan
              pytest.mark.filterwarnings("ignore:.*degrees of freedom is <= 0:UserWarning")]

NAN, INF = math.nan, math.inf
FLOATS = [torch.float32, torch.bfloat16, torch.float16]
INTS = [torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8]
RTOL = {torch.float32: 1.3e-6, torch.bfloat16: 1.6e-2, torch.float16: 1e-3}  # assert_close's
SENTINEL = 100.0  # what the gaps of a strided layout hold: reading them shows


def name(dtype):
    return str(dtype).removeprefix("torch.")


def cases(ops, dtypes, known=None):
    """pytest params (op, dtype) for ops x dtypes; the pairs in known are strict xfails
    with known's reason."""
    known = known or {}
    return [pytest.param(op, dt, id=f"{op}-{name(dt)}",
                         marks=[pytest.mark.xfail(strict=True, reason=known[op, dt])]
                         if (op, dt) in known else [])
            for op in ops for dt in dtypes]


def specials(dtype):
    """16 values: NaN, +-Inf, -0.0, 0.0, +-largest finite, smallest normal, +-smallest
    subnormal, and ordinary ones."""
    fi = torch.finfo(dtype)
    sub = fi.tiny * fi.eps
    return torch.tensor([NAN, INF, -INF, -0.0, 0.0, fi.max, -fi.max, fi.tiny, sub, -sub,
                         1.5, -2.5, 0.5, -1.0, 2.0, 7.0], dtype=dtype)


def strided(x):
    """x's values in a layout whose last dim has stride 2 (a slice with step 2)."""
    big = torch.full((*x.shape[:-1], 2 * x.shape[-1]), SENTINEL, dtype=x.dtype, device=x.device)
    big[..., ::2] = x
    return big[..., ::2]


def transposed(x):
    """x's values in column-major order (a transposed view)."""
    return x.mT.contiguous().mT


def layouts(x):
    """x (CPU, at least 2-D) on neuron as contiguous, transposed and step-2 views."""
    d = x.to("neuron")
    return {"contiguous": d, "transposed": transposed(d), "step2": strided(d)}


def close_mask(a, b, dtype, atol=0.0):
    if not a.is_floating_point():
        return a == b
    return torch.isclose(a.float(), b.float(), rtol=RTOL[dtype], atol=atol, equal_nan=True)


def either(got, first, second, dtype, atol=0.0):
    """first, except where second differs from it and got is second."""
    return torch.where(~close_mask(first, second, dtype, atol) & close_mask(got, second, dtype, atol),
                       second, first)


def check_elementwise(fn, dtype, *xs, atol=0.0):
    """fn on neuron, for xs in each of layouts(), against the CPU: fn on contiguous xs (the
    vectorised loops), or where fn on strided xs (the scalar loop) gives another result,
    that one. Zeros have the CPU's sign (-0.0 or 0.0) too."""
    vec = fn(*xs)
    sca = fn(*[strided(x) for x in xs])
    for layout in ("contiguous", "transposed", "step2"):
        got = fn(*[layouts(x)[layout] for x in xs])
        assert got.device.type == "neuron" and got.dtype == vec.dtype and got.shape == vec.shape
        got = got.cpu()
        where = "" if len(xs) > 1 else f" on {xs[0].flatten()[:16].tolist()}"
        torch.testing.assert_close(got, either(got, vec, sca, dtype, atol), rtol=RTOL[dtype], atol=atol,
                                   equal_nan=True, msg=lambda m: f"{layout}{where}: {m}")
        if got.is_floating_point():
            zeros = (got == 0) & (vec == 0) & (sca == 0)
            bad = zeros & (got.signbit() != vec.signbit()) & (got.signbit() != sca.signbit())
            assert not bad.any(), (f"{layout}: sign of zero differs at inputs "
                                   f"{[x[bad].tolist() for x in xs]}: neuron {got[bad].tolist()}, "
                                   f"CPU {vec[bad].tolist()}")


def outcome(fn, *args):
    """fn's result on the host (synchronised), or the exception it raised."""
    try:
        out = fn(*args)
        return [o.cpu() for o in out] if isinstance(out, (tuple, list)) else out.cpu()
    except Exception as e:  # noqa: BLE001 - the exception is the outcome compared
        return e


def same_outcome(fn, *args, match=None):
    """fn on neuron raises what the CPU raises (the same type; with match, both messages
    contain it), or returns what it returns (dtype, shape, values, NaN in the same places).
    The CPU runs on clones: fn may write to its inputs. Returns the CPU's outcome."""
    expected = outcome(fn, *[a.clone() if isinstance(a, torch.Tensor) else a for a in args])
    got = outcome(fn, *[a.to("neuron") if isinstance(a, torch.Tensor) else a for a in args])
    if isinstance(expected, Exception):
        assert isinstance(got, Exception), f"CPU raises {expected!r}, neuron returns {got}"
        assert type(got) is type(expected), f"CPU raises {expected!r}, neuron {got!r}"
        if match is not None:
            assert match in str(expected) and match in str(got), (expected, got)
        return expected
    assert not isinstance(got, Exception), f"CPU returns {expected}, neuron raises {got!r}"
    as_list = lambda out: out if isinstance(out, list) else [out]  # noqa: E731
    for g, e in zip(as_list(got), as_list(expected)):
        assert g.dtype == e.dtype and g.shape == e.shape, (g, e)
        rtol = RTOL.get(e.dtype, 0) if e.is_floating_point() else 0
        torch.testing.assert_close(g, e, rtol=rtol, atol=0, equal_nan=True)
    return expected


# --- 1. NaN, Inf, -0.0, huge and subnormal values -------------------------------------------

UNARY = {
    "exp": torch.exp, "log": torch.log, "sqrt": torch.sqrt, "tanh": torch.tanh,
    "sigmoid": torch.sigmoid, "abs": torch.abs, "sign": torch.sign, "floor": torch.floor,
    "round": torch.round, "neg": torch.neg, "ceil": torch.ceil, "trunc": torch.trunc,
    "reciprocal": torch.reciprocal, "rsqrt": torch.rsqrt, "log1p": torch.log1p,
    "sin": torch.sin, "relu": torch.relu, "gelu": F.gelu, "silu": F.silu,
    "nan_to_num": torch.nan_to_num,
    # comparisons with one operand (bool results)
    "isnan": torch.isnan, "isinf": torch.isinf, "isfinite": torch.isfinite,
    "isposinf": torch.isposinf, "signbit": torch.signbit,
}
UNARY_KNOWN: dict = {}


@pytest.mark.parametrize("op,dtype", cases(UNARY, FLOATS, UNARY_KNOWN))
def test_unary_specials(neuron, op, dtype):
    # 87 values: the vectorised loops of both sides and their tails
    x = specials(dtype).repeat(6)[:87].view(3, 29)
    # The CPU's vectorised log1p (Sleef) returns 0 for a subnormal x on every path here,
    # std::log1p (PyTorch's non-vectorised builds) x: either, within the smallest normal.
    check_elementwise(UNARY[op], dtype, x, atol=torch.finfo(dtype).tiny if op == "log1p" else 0.0)


BINARY = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div, "pow": torch.pow,
    "maximum": torch.maximum, "minimum": torch.minimum, "fmax": torch.fmax, "fmin": torch.fmin,
    "atan2": torch.atan2, "remainder": torch.remainder, "fmod": torch.fmod,
    "floor_divide": torch.floor_divide,
    "eq": torch.eq, "ne": torch.ne, "lt": torch.lt, "le": torch.le, "gt": torch.gt, "ge": torch.ge,
}
BINARY_KNOWN = {}  # (op, dtype) -> why neuron still differs


@pytest.mark.parametrize("op,dtype", cases(BINARY, FLOATS, BINARY_KNOWN))
def test_binary_specials(neuron, op, dtype):
    # every pair of specials: a[i, j] = specials[i], b[i, j] = specials[j]
    v = specials(dtype)
    a, b = v[:, None].expand(16, 16).contiguous(), v[None, :].expand(16, 16).contiguous()
    check_elementwise(BINARY[op], dtype, a, b)
    # broadcast operands: a (16, 1) column against a (1, 16) row
    got = BINARY[op](a[:, :1].to(neuron), b[:1].to(neuron)).cpu()
    expected = either(got, BINARY[op](a, b), BINARY[op](strided(a), strided(b)), dtype)
    torch.testing.assert_close(got, expected, rtol=RTOL[dtype], atol=0, equal_nan=True)


SCALARS = [NAN, INF, -INF, -0.0, 0.0, 0.5, 2, -1, 1e300, 1e-300]  # the last two fit no float type here
SCALAR_OPS = {
    "add": lambda x, s: x + s, "mul": lambda x, s: x * s, "div": lambda x, s: x / s,
    "rdiv": lambda x, s: s / x, "pow": lambda x, s: x ** s, "rpow": lambda x, s: s ** x,
    "remainder": torch.remainder, "fmod": torch.fmod, "lt": lambda x, s: x < s,
    "eq": lambda x, s: x == s,
}
SCALAR_KNOWN = {  # by str(scalar): -0.0 == 0.0
    ("pow", "1e-300", torch.float32): "x ** 1e-300: neuron rounds the exponent to float32 (0) and gives 1 "
                                      "for every x; the CPU (a double exponent) nan for nan and x < 0, "
                                      "0 for +-0.0, inf for +-inf",
    **{("pow", "1e+300", dt): "x ** 1e300 raises on the CPU ('value cannot be converted to type "
                           f"{'c10::BFloat16' if dt == torch.bfloat16 else 'c10::Half'} without overflow'), "
                           "neuron returns values ((-1, 0.5, 2) ** 1e300 = 1, 0, inf)"
       for dt in (torch.bfloat16, torch.float16)},
}


@pytest.mark.parametrize("op,scalar,dtype", [
    pytest.param(op, s, dt, id=f"{op}-{s}-{name(dt)}",
                 marks=[pytest.mark.xfail(strict=True, reason=SCALAR_KNOWN[op, str(s), dt])]
                 if (op, str(s), dt) in SCALAR_KNOWN else [])
    for op in SCALAR_OPS for s in SCALARS for dt in FLOATS])
def test_python_scalar_operand_specials(neuron, op, scalar, dtype):
    # Python numbers as the other operand (wrapped numbers: computed in the tensor's type,
    # in float for the half types)
    x = specials(dtype).repeat(6)[:87].view(3, 29)
    fn = lambda t: SCALAR_OPS[op](t, scalar)  # noqa: E731
    if isinstance(outcome(fn, x), Exception):
        same_outcome(fn, x)   # the CPU raises (a scalar out of the type's range): neuron too
    else:
        check_elementwise(fn, dtype, x)


CLAMPS = {
    "clamp": lambda x: torch.clamp(x, -1, 1), "clamp_min": lambda x: torch.clamp(x, min=0.0),
    "clamp_max_neg_zero": lambda x: x.clamp(max=-0.0), "clip_inf": lambda x: x.clip(-INF, INF),
    "clamp_nan_bound": lambda x: x.clamp(min=NAN), "min_above_max": lambda x: x.clamp(2, 1),
    # tensor bounds holding NaN and infinities: the specials shifted
    "tensor_bounds": lambda x: torch.clamp(x, x.roll(1, -1), x.roll(-3, -1).abs()),
}


@pytest.mark.parametrize("op,dtype", cases(CLAMPS, FLOATS))
def test_clamp_specials(neuron, op, dtype):
    check_elementwise(CLAMPS[op], dtype, specials(dtype).repeat(6)[:87].view(3, 29))


ROW_GROUPS = ["nan_inf", "zeros", "huge", "subnormal"]


def reduction_input(dtype, group, length=40):
    """Rows of `length` values, each with its own edge case, on a filler of multiples of
    0.25 (sums of which are exact in any order)."""
    fi = torch.finfo(dtype)
    sub = fi.tiny * fi.eps
    fill = (torch.arange(length) % 7 + 1) * 0.25
    if group == "nan_inf":
        rows = [fill.clone() for _ in range(9)]
        rows[1][5] = NAN
        rows[2][17] = INF
        rows[3][length - 1] = -INF
        rows[4][3], rows[4][20] = INF, -INF
        rows[5][:] = -INF
        rows[6][:] = INF
        rows[7][8], rows[7][30] = NAN, NAN                          # two NaNs
        rows[8][0], rows[8][20], rows[8][length - 1] = -fi.max, INF, NAN  # NaN last (a tail)
    elif group == "zeros":
        rows = [torch.tensor([0.0, -0.0]).repeat(length // 2), -fill]
        rows[1][10], rows[1][30] = -0.0, 0.0                        # largest: -0.0 then 0.0
    elif group == "huge":  # the sum overflows, the mean does not
        rows = [fill.clone(), fill.clone()]
        rows[0][2], rows[0][11], rows[0][25] = fi.max, fi.max, fi.max
        rows[1][7] = -fi.max
    else:
        rows = [torch.tensor([sub, fi.tiny, -0.0, sub * 3]).repeat(length // 4),
                torch.tensor([fi.tiny, -sub, 0.0, 2 * fi.tiny]).repeat(length // 4)]
    return torch.stack(rows).to(dtype)


def reduction_layouts(x):
    """(CPU input, neuron input, dim) for a reduction along x's rows: the rows contiguous
    (innermost reduction), as columns of a contiguous tensor (outer reduction), and as
    step-2 views."""
    xt = x.t().contiguous()
    return [(x, x.to("neuron"), -1), (xt, xt.to("neuron"), 0), (x, strided(x.to("neuron")), -1)]


REDUCTIONS = {  # d: the dim, or nothing for a whole-tensor reduction
    "sum": lambda x, *d: x.sum(*d), "mean": lambda x, *d: x.mean(*d),
    "prod": lambda x, *d: x.prod(*d), "amax": lambda x, *d: x.amax(*d),
    "amin": lambda x, *d: x.amin(*d), "nansum": lambda x, *d: x.nansum(*d),
    "std": lambda x, *d: x.std(*d), "var": lambda x, *d: x.var(*d),
    "logsumexp": lambda x, *d: x.logsumexp(*(d or (0,))),
    "norm": lambda x, *d: torch.linalg.vector_norm(x, dim=d or None),
    "cumsum": lambda x, d: x.cumsum(d), "softmax": lambda x, d: x.softmax(d),
    "log_softmax": lambda x, d: F.log_softmax(x, d),
}
_HUGE = "3 x finfo.max + 37 values of 0.25..1.75 (40)"
REDUCTION_KNOWN = {
    **{("mean", "huge", dt): f"mean of {_HUGE}: neuron {v}, the CPU inf (its sum overflows first)"
       for dt, v in ((torch.float32, "2.552e37"), (torch.bfloat16, "2.542e37"))},
    ("std", "huge", torch.float32): f"std of {_HUGE}: neuron 9.077e37 with or without a dim, as the "
                                    "CPU's std along a dim; the CPU's whole-tensor float32 std overflows (inf)",
}


def reduction_cases(ops, known):
    return [pytest.param(op, group, dt, id=f"{op}-{group}-{name(dt)}",
                         marks=[pytest.mark.xfail(strict=True, reason=known[op, group, dt])]
                         if (op, group, dt) in known else [])
            for op in ops for group in ROW_GROUPS for dt in FLOATS]


@pytest.mark.parametrize("op,group,dtype", reduction_cases(REDUCTIONS, REDUCTION_KNOWN))
def test_reduction_specials(neuron, op, group, dtype):
    x = reduction_input(dtype, group)
    for cpu_x, dev_x, dim in reduction_layouts(x):
        expected = REDUCTIONS[op](cpu_x, dim)
        got = REDUCTIONS[op](dev_x, dim)
        assert got.device.type == "neuron" and got.dtype == expected.dtype
        torch.testing.assert_close(got.cpu(), expected, rtol=RTOL[dtype], atol=0, equal_nan=True,
                                   msg=lambda m: f"{op} dim={dim}: {m}")
    if op in ("softmax", "log_softmax", "cumsum"):
        return
    for row in x:  # without dim: a whole-tensor reduction of each edge case
        got = REDUCTIONS[op](row.to(neuron)).cpu()
        torch.testing.assert_close(got, REDUCTIONS[op](row), rtol=RTOL[dtype], atol=0, equal_nan=True,
                                   msg=lambda m: f"{op} of {row.tolist()}: {m}")


INDEXED = {  # (values or None, indices)
    "max": lambda x, d: x.max(d), "min": lambda x, d: x.min(d),
    "argmax": lambda x, d: (None, x.argmax(d)), "argmin": lambda x, d: (None, x.argmin(d)),
    "sort": lambda x, d: x.sort(dim=d, stable=True),
    "sort_descending": lambda x, d: x.sort(dim=d, descending=True, stable=True),
    "topk": lambda x, d: x.topk(5, d), "topk_smallest": lambda x, d: x.topk(5, d, largest=False),
}


@pytest.mark.parametrize("op,group,dtype", reduction_cases(INDEXED, {}))
def test_indexed_reduction_specials(neuron, op, group, dtype):
    x = reduction_input(dtype, group)
    for cpu_x, dev_x, dim in reduction_layouts(x):
        e_vals, e_idx = INDEXED[op](cpu_x, dim)
        g_vals, g_idx = INDEXED[op](dev_x, dim)
        assert g_idx.dtype == torch.int64 and g_idx.shape == e_idx.shape
        g_idx = g_idx.cpu()
        if e_vals is not None:
            torch.testing.assert_close(g_vals.cpu(), e_vals, rtol=0, atol=0, equal_nan=True)
        # the indices point at the CPU's values (NaN where NaN)
        unsqueeze = (lambda i: i) if e_idx.dim() == x.dim() else (lambda i: i.unsqueeze(dim))
        torch.testing.assert_close(cpu_x.gather(dim, unsqueeze(g_idx)), cpu_x.gather(dim, unsqueeze(e_idx)),
                                   rtol=0, atol=0, equal_nan=True)
        # The indices themselves: a stable sort defines every one (NaNs sort last, in order);
        # max/min/argmax/argmin return the first of equal values, but which of several NaNs
        # depends on the CPU's reduction order: those rows are left out. topk's order among
        # equal values is not defined (only the values, above).
        if op.startswith("sort"):
            assert torch.equal(g_idx, e_idx), f"{op} dim={dim}: neuron {g_idx.tolist()}, CPU {e_idx.tolist()}"
        elif not op.startswith("topk"):
            defined = cpu_x.isnan().sum(dim) < 2
            assert defined.any()
            assert torch.equal(g_idx[defined], e_idx[defined]), \
                f"{op} dim={dim}: neuron {g_idx.tolist()}, CPU {e_idx.tolist()}"


@pytest.mark.parametrize("group", ROW_GROUPS)
@pytest.mark.parametrize("dtype", FLOATS, ids=name)
def test_layer_norm_specials(neuron, group, dtype):
    x = reduction_input(dtype, group)
    w = torch.full((x.shape[-1],), 1.5, dtype=dtype)
    b = torch.full((x.shape[-1],), 0.25, dtype=dtype)
    expected = F.layer_norm(x, (x.shape[-1],), w, b)
    for layout, d in layouts(x).items():
        got = F.layer_norm(d, (x.shape[-1],), w.to(neuron), b.to(neuron))
        # mean and variance are computed in float on both: a few units of the last place
        torch.testing.assert_close(got.cpu(), expected, rtol=RTOL[dtype] * 4, atol=0,
                                   equal_nan=True, msg=lambda m: f"{layout}: {m}")


def matmul_inputs(dtype):
    """a (6, 9) with an edge case a row, b (9, 5) with zeros, an infinity, a NaN. Every sum
    is order-independent: at most one huge or infinite product per dot product, which
    overflows by itself, so +inf, -inf and nan (inf * 0, inf - inf) come out the same in
    any order, and the subnormal products are exact."""
    fi = torch.finfo(dtype)
    a = ((torch.arange(54) % 5 - 2) * 0.5).view(6, 9)
    a[0, 3] = NAN
    a[1, 0] = INF
    a[2, 4] = -INF
    a[3, 1] = fi.max
    a[4] = fi.tiny * torch.tensor([1, 0.5, -0.25, 2, 0, 1, -1, 0.5, 4])  # some subnormal
    a[5] = -0.0
    b = (torch.arange(45) % 4 - 1.5).view(9, 5)
    b[:, 0] = 0.0        # inf * 0 = nan in row 1
    b[3, 1] = INF
    b[8, 2] = NAN
    b[1, 3] = 2.0        # finfo.max * 2 overflows in row 3
    b[1, 4] = 0.5
    return a.to(dtype), b.to(dtype)


MATMULS = {
    "mm": lambda a, b: torch.mm(a, b), "matmul": lambda a, b: a @ b,
    "bmm": lambda a, b: torch.bmm(torch.stack([a, -a]), torch.stack([b, b])),
    "mv": lambda a, b: torch.mv(a, b[:, 1]), "vm": lambda a, b: a[1] @ b,
    "addmm": lambda a, b: torch.addmm(b[0], a, b), "linear": lambda a, b: F.linear(a, b.t()),
}


def padded(fn, a, b):
    """fn's CPU result with a and b padded with zeros to 64 rows and 64 columns, cut back."""
    a64 = torch.cat([a, a.new_zeros(64 - a.shape[0], a.shape[1])])
    b64 = torch.cat([b, b.new_zeros(b.shape[0], 64 - b.shape[1])], 1)
    out = fn(a64, b64)
    return out[tuple(slice(0, n) for n in fn(a, b).shape)]


@pytest.mark.parametrize("op,dtype", cases(MATMULS, FLOATS))
def test_matmul_specials(neuron, op, dtype):
    a, b = matmul_inputs(dtype)
    fn = MATMULS[op]
    expected = fn(a, b)
    # PyTorch's CPU bfloat16 GEMM flushes subnormal inputs and products to zero where it
    # runs oneDNN's AVX512-BF16 kernels (64-row products here), not in its own loop (this
    # 6-row one): either CPU result is accepted for bfloat16. Neuron flushes: row 4 of mm
    # is [.., 8.816e-38, -7.053e-38] as in the CPU's 64-row product, [.., 1.043e-37,
    # -5.437e-38] (exact) in its 6-row one.
    other = padded(fn, a, b) if dtype == torch.bfloat16 else expected
    for la, da in layouts(a).items():
        for lb, db in layouts(b).items():
            got = fn(da, db)
            assert got.device.type == "neuron" and got.dtype == expected.dtype
            got = got.cpu()
            # half types accumulate in float on both: the result's rounding
            torch.testing.assert_close(got, either(got, expected, other, dtype), rtol=RTOL[dtype] * 2,
                                       atol=0, equal_nan=True, msg=lambda m: f"a {la}, b {lb}: {m}")


# --- 2. Integers ----------------------------------------------------------------------------

def integer_input(dtype):
    i = torch.iinfo(dtype)
    v = [i.max, i.max - 1, i.min, i.min + 1, 0, 1, 2, i.max // 2 + 1]
    if i.min < 0:
        v += [-1, -2, i.min // 2 - 1]
    return torch.tensor(v, dtype=dtype)


INTEGER_OVERFLOW = {
    "add_one": lambda x: x + 1, "add_self": lambda x: x + x, "sub_one": lambda x: x - 1,
    "add_alpha": lambda x: torch.add(x, x, alpha=3), "mul_two": lambda x: x * 2,
    "mul_self": lambda x: x * x, "mul_max": lambda x: x * x.max(), "neg": torch.neg,
    "abs": torch.abs, "add_": lambda x: x.add_(x.flip(0)), "neg_": lambda x: x.neg_(),
    "pow2": lambda x: x.pow(2), "pow_tensor": lambda x: x.pow(x.abs() % 7),
    "sum_same_dtype": lambda x: x.sum(dtype=x.dtype),
    "cumsum_same_dtype": lambda x: x.cumsum(0, dtype=x.dtype),
    "prod_same_dtype": lambda x: x.prod(dtype=x.dtype),
}


@pytest.mark.parametrize("op,dtype", cases(INTEGER_OVERFLOW, INTS))
def test_integer_overflow_wraps(neuron, op, dtype):
    x = integer_input(dtype)
    same_outcome(INTEGER_OVERFLOW[op], x)
    same_outcome(INTEGER_OVERFLOW[op], x.repeat(9))  # long enough for the vector loops


INT_DIVISIONS = {
    "div_floor": lambda a, b: torch.div(a, b, rounding_mode="floor"),
    "div_trunc": lambda a, b: torch.div(a, b, rounding_mode="trunc"),
    "remainder": torch.remainder, "fmod": torch.fmod, "floor_divide": torch.floor_divide,
    "true_div": torch.div,
}


@pytest.mark.parametrize("op,dtype", cases(INT_DIVISIONS, INTS))
def test_integer_division(neuron, op, dtype):
    fn = INT_DIVISIONS[op]
    i = torch.iinfo(dtype)
    if i.min < 0:
        a = torch.tensor([7, i.max, 0, 5, 6, -7, -7, i.min, -1], dtype=dtype)
        b = torch.tensor([2, 3, 4, 5, 1, 2, -2, 3, 4], dtype=dtype)
    else:
        a = torch.tensor([7, i.max, 0, 5, 6, 200, 1, i.max, 3], dtype=dtype)
        b = torch.tensor([2, 3, 4, 5, 1, 7, 255, 1, 5], dtype=dtype)
    same_outcome(fn, a, b)                   # the rounding of negative quotients
    if dtype in (torch.int8, torch.int16):   # min / -1 wraps (int32 and int64 trap on the CPU)
        same_outcome(fn, torch.tensor([i.min, i.min], dtype=dtype), torch.tensor([-1, 1], dtype=dtype))
    # A zero divisor: the CPU raises RuntimeError("ZeroDivisionError") for the integer ops
    # and gives inf/nan for true division; neuron the same, and its device stays usable.
    b[3] = 0
    for cpu_outcome in (same_outcome(fn, a, b, match="ZeroDivisionError"),
                        same_outcome(lambda t: fn(t, 0), a, match="ZeroDivisionError")):
        assert isinstance(cpu_outcome, RuntimeError) == (op != "true_div")
    assert (a.to(neuron) + 1).cpu().tolist() == (a + 1).tolist()


@pytest.mark.parametrize("dtype", INTS, ids=name)
def test_integer_negative_powers(neuron, dtype):
    signed = torch.iinfo(dtype).min < 0
    base = torch.tensor([-2, -1, 0, 1, 2, 3] if signed else [0, 1, 2, 3, 255], dtype=dtype)
    exp = torch.tensor([-1, -2, -3, 0, 1, 7] if signed else [0, 1, 2, 7, 9], dtype=dtype)
    # a tensor exponent: 1 ** -n = 1, (-1) ** -n = +-1, other bases ** -n = 0 (0 ** -n too)
    same_outcome(lambda b, e: torch.pow(b[:, None], e[None, :]), base, exp)
    same_outcome(lambda e: torch.pow(2, e), exp)
    e = same_outcome(lambda b: b.pow(-1), base)   # a negative Python exponent raises
    assert isinstance(e, RuntimeError) and "negative integer powers" in str(e)
    same_outcome(lambda b: b.pow(-2.5), base)     # a float exponent: float results


# --- 3. Shapes ------------------------------------------------------------------------------

EMPTY_SHAPES = [(0,), (3, 0), (0, 4)]
EMPTY_OPS = {
    "exp": torch.exp, "add": lambda x: x + x, "mul_broadcast": lambda x: x * x[..., :1],
    "sum": lambda x: x.sum(), "sum_dim0": lambda x: x.sum(0), "sum_dim_last": lambda x: x.sum(-1),
    "mean": lambda x: x.mean(), "mean_dim_last": lambda x: x.mean(-1),
    "prod": lambda x: x.prod(), "amax": lambda x: x.amax(), "amax_dim0": lambda x: x.amax(0),
    "amax_dim_last": lambda x: x.amax(-1), "max_dim_last": lambda x: x.max(-1),
    "argmax_dim0": lambda x: x.argmax(0), "std": lambda x: x.std(), "var_dim0": lambda x: x.var(0),
    "logsumexp_dim_last": lambda x: x.logsumexp(-1), "cumsum": lambda x: x.cumsum(-1),
    "softmax": lambda x: x.softmax(-1), "log_softmax_dim0": lambda x: x.log_softmax(0),
    "layer_norm": lambda x: F.layer_norm(x, x.shape[-1:]),
    "matmul_self_t": lambda x: x @ x.mT, "matmul_t_self": lambda x: x.mT @ x,
    "cat": lambda x: torch.cat([x, x]),
    "cat_nonempty": lambda x: torch.cat([x, torch.ones(2, *x.shape[1:], device=x.device)]),
    "index_select": lambda x: x.index_select(0, torch.zeros(0, dtype=torch.long, device=x.device)),
    "index_select_last": lambda x: x.index_select(-1, torch.zeros(0, dtype=torch.long, device=x.device)),
    "sort": lambda x: x.sort(-1), "topk0": lambda x: x.topk(0, -1), "clamp": lambda x: x.clamp(0, 1),
    "where": lambda x: torch.where(x > 0, x, -x), "sign": torch.sign,
}
EMPTY_KNOWN = {}  # (op, shape) -> why neuron still differs


@pytest.mark.parametrize("op,shape", [
    pytest.param(op, s, id=f"{op}-{s}", marks=[pytest.mark.xfail(strict=True, reason=EMPTY_KNOWN[op, s])]
                 if (op, s) in EMPTY_KNOWN else [])
    for op in EMPTY_OPS for s in EMPTY_SHAPES])
def test_zero_size(neuron, op, shape):
    # sum of nothing is 0, prod 1, mean and std nan, amax and max with no dim or along
    # the empty dim raise: the CPU decides, neuron must match (value or exception type)
    same_outcome(EMPTY_OPS[op], torch.ones(shape))


def test_zero_inner_dim_matmul_and_empty_cat(neuron):
    for fn, value in ((torch.mm, 0.0), (torch.matmul, 0.0),
                      (lambda x, y: torch.addmm(torch.full((3, 4), 2.0, device=x.device), x, y), 2.0),
                      (lambda x, y: torch.bmm(x.expand(2, 3, 0), y.expand(2, 0, 4)), 0.0)):
        out = same_outcome(fn, torch.ones(3, 0), torch.ones(0, 4))   # zeros, or addmm's bias
        assert out.shape[-2:] == (3, 4) and bool((out == value).all())
    # the legacy (0,)-shaped empty tensor is skipped by cat whatever the other shapes
    same_outcome(lambda x: torch.cat([x, torch.ones(2, 3, device=x.device)]), torch.empty(0))
    same_outcome(lambda x: x.index_select(0, torch.tensor([2, 0], device=x.device)), torch.ones(3, 0))


ZERO_DIM_OPS = {
    "exp": torch.exp, "add_vector": lambda x: x + torch.arange(3.0, device=x.device),
    "mul_self": lambda x: x * x, "sum": lambda x: x.sum(), "sum_dim0": lambda x: x.sum(0),
    "mean": lambda x: x.mean(), "amax_dim0": lambda x: x.amax(0), "max_dim0": lambda x: x.max(0),
    "argmax": lambda x: x.argmax(), "std": lambda x: x.std(), "softmax": lambda x: x.softmax(0),
    "log_softmax": lambda x: x.log_softmax(0), "softmax_1x1": lambda x: x.view(1, 1).softmax(-1),
    "cumsum": lambda x: x.cumsum(0), "sort": lambda x: x.sort(0), "topk": lambda x: x.topk(1),
    "clamp": lambda x: x.clamp(max=0.5), "item_add": lambda x: x + x.item(),
    "index_select": lambda x: x.index_select(0, torch.tensor([0], device=x.device)),
    "cat": lambda x: torch.cat([x, x]), "matmul": lambda x: x @ x,
}
ZERO_DIM_KNOWN = {}  # (op, value) -> why neuron still differs


@pytest.mark.parametrize("op,value", [
    pytest.param(op, v, id=f"{op}-{vid}",
                 marks=[pytest.mark.xfail(strict=True, reason=ZERO_DIM_KNOWN[op, vid])]
                 if (op, vid) in ZERO_DIM_KNOWN else [])
    for op in ZERO_DIM_OPS for v, vid in ((1.5, "finite"), (NAN, "nan"), (-INF, "-inf"))])
def test_zero_dim(neuron, op, value):
    same_outcome(ZERO_DIM_OPS[op], torch.tensor(value))


EXPANDED_OPS = {
    "exp": torch.exp, "add": lambda x: x + x.flip(-1), "sum_dim0": lambda x: x.sum(0),
    "sum_dim1": lambda x: x.sum(1), "amax_dim0": lambda x: x.amax(0), "softmax": lambda x: x.softmax(-1),
    "cumsum_dim0": lambda x: x.cumsum(0), "sort": lambda x: x.sort(-1, stable=True),
    "matmul": lambda x: x @ x.mT, "clone": lambda x: x.clone(), "contiguous_t": lambda x: x.t().contiguous(),
    "index_select": lambda x: x.index_select(1, torch.tensor([3, 0, 3], device=x.device)),
}


@pytest.mark.parametrize("op", list(EXPANDED_OPS))
def test_expanded_inputs(neuron, op):
    # one row of specials read 4 times (stride 0), and a column of 4 of them read 16 times
    v = specials(torch.float32)
    same_outcome(lambda x: EXPANDED_OPS[op](x.expand(4, 16)), v)
    same_outcome(lambda x: EXPANDED_OPS[op](x[:4, None].expand(4, 16)), v)


IN_PLACE = {
    "add_": lambda t: t.add_(1), "mul_": lambda t: t.mul_(t), "exp_": lambda t: t.exp_(),
    "clamp_": lambda t: t.clamp_(0, 1), "copy_": lambda t: t.copy_(torch.ones(t.shape, device=t.device)),
    "out=": lambda t: torch.add(torch.ones(t.shape, device=t.device), 1, out=t),
    "fill_": lambda t: t.fill_(2.0), "zero_": lambda t: t.zero_(),
}


@pytest.mark.parametrize("op", list(IN_PLACE))
def test_in_place_on_expanded(neuron, op):
    # Writing through a stride-0 view: the CPU raises ("unsupported operation: more than
    # one element of the written-to tensor refers to a single memory location") except for
    # fill_ and zero_, which write one value everywhere; neuron the same, base included.
    def run(x):
        IN_PLACE[op](x.expand(4, 3))
        return x
    cpu = same_outcome(run, torch.arange(3.0))
    if op not in ("fill_", "zero_"):
        assert "more than one element of the written-to tensor" in str(cpu)


OVERLAPPING = {
    "add_shifted": lambda x: x[1:].add_(x[:-1]),
    "exp_out_shifted": lambda x: torch.exp(x[:-1], out=x[1:]),
    "mul_transposed": lambda x: x.view(3, 3).mul_(x.view(3, 3).t()),
    "mul_overlapping": lambda x: x[:5].mul_(x[4:]),
    "copy_shifted": lambda x: x[1:].copy_(x[:-1]),
    "copy_transposed": lambda x: x.view(3, 3).copy_(x.view(3, 3).t()),
    "add_self": lambda x: x.add_(x),             # the same memory exactly: allowed
    "exp_out_self": lambda x: torch.exp(x, out=x),
}
# Partial overlaps: the CPU raises "unsupported operation: some elements of the input
# tensor and the written-to tensor refer to a single memory location"; so must neuron
# (before the check it ran them, reading values already overwritten or as a memmove).
PARTIAL_OVERLAPS = {"add_shifted", "exp_out_shifted", "mul_transposed", "mul_overlapping",
                    "copy_shifted", "copy_transposed"}


@pytest.mark.parametrize("op", list(OVERLAPPING))
def test_overlapping_in_place(neuron, op):
    def run(x):
        OVERLAPPING[op](x)
        return x
    cpu = same_outcome(run, torch.arange(9.0))
    if op in PARTIAL_OVERLAPS:
        assert "some elements of the input tensor and the written-to tensor" in str(cpu)


# Indexed writes whose values, mask or indices live in the written tensor: the CPU raises
# "unsupported operation" (a host-library op such as put_ included: its CPU kernel sees the
# aliasing), and warns for an expanded destination of index_put_ / masked_fill_.
INDEXED_OVERLAPS = {
    "index_put_values_in_self": lambda y, i: y.index_put_((i,), y[:3]),
    "index_put_value_0dim_in_self": lambda y, i: y.index_put_((i,), y[0]),
    "index_put_index_is_self": lambda y, i: i.index_put_((i,), i.clone()),
    "put_values_in_self": lambda y, i: y.put_(i, y[:3]),
    "put_index_is_self": lambda y, i: i.put_(i.clone(), i),
    "masked_fill_mask_in_self": lambda y, i: (y > 0.5)[1:].masked_fill_((y > 0.5)[:-1], False),
}


@pytest.mark.parametrize("op", list(INDEXED_OVERLAPS))
def test_indexed_write_overlapping_its_inputs(neuron, op):
    def run(y, i):
        if op == "masked_fill_mask_in_self":
            m = y > 0.5
            return m[1:].masked_fill_(m[:-1], False)
        return INDEXED_OVERLAPS[op](y, i)
    cpu = same_outcome(run, torch.arange(6.0) / 6, torch.tensor([2, 1, 0]))
    assert "unsupported operation" in str(cpu)


@pytest.mark.parametrize("op", ["index_put_", "masked_fill_"])
def test_indexed_write_into_an_expanded_tensor_warns(neuron, op):
    x = torch.rand(1, device=neuron).expand(6)
    with pytest.warns(UserWarning, match="expanded tensors"):
        if op == "index_put_":
            x.index_put_((torch.tensor([2, 1, 0], device=neuron),), torch.rand(3, device=neuron))
        else:
            x.masked_fill_(torch.tensor([True, False] * 3, device=neuron), 0.0)


# --- 4. Arguments at the edge of a dtype's range ------------------------------------------

@pytest.mark.parametrize("dtype,value", [(torch.int8, 200), (torch.uint8, 256), (torch.uint8, -1),
                                         (torch.float32, 1e40), (torch.float16, 1e6),
                                         (torch.bool, 5), (torch.int64, 2**62)], ids=str)
def test_fill_with_a_value_out_of_range(neuron, dtype, value):
    # int8 <- 200 and float32 <- 1e40 raise "value cannot be converted"; uint8 <- -1 wraps
    # and float16 <- 1e6 is inf, as on the CPU.
    same_outcome(lambda t: t.fill_(value), torch.zeros(3, dtype=dtype))


RANDOM_BOUNDS = [  # (dtype, from, to): to None is the dtype's own top
    (torch.int8, -129, 0), (torch.int8, 0, 129), (torch.uint8, -1, 10), (torch.bool, 0, 3),
    (torch.int32, -2**31 - 1, 0), (torch.int16, 5, 5), (torch.float16, 0, 2**20),
    (torch.float16, -2**17, None), (torch.float32, 0, 2**25), (torch.bfloat16, 0, 2**10),
    (torch.float32, 10, None), (torch.int8, -128, None), (torch.bool, 0, None),
]


@pytest.mark.parametrize("dtype,lo,hi", RANDOM_BOUNDS, ids=str)
def test_random_bounds_are_checked_as_on_the_cpu(neuron, dtype, lo, hi):
    # Out of the dtype's range raises "from/to - 1 is out of bounds"; beyond a float type's
    # exact integers warns; in range, the values stay in [lo, hi) (to None: the top included).
    def draw(device):
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            try:
                t = torch.empty(2000, dtype=dtype, device=device).random_(lo, hi)
            except RuntimeError as e:
                return str(e).split(" (Triggered internally")[0], messages(seen)
            return t.double().cpu(), messages(seen)

    def messages(seen):  # without " (Triggered internally at <file>:<line>.)"
        return [str(w.message).split(" (Triggered internally")[0] for w in seen]
    (cpu, cpu_warned), (got, got_warned) = draw("cpu"), draw(neuron)
    assert [w for w in got_warned if "out of bounds" in w] == \
        [w for w in cpu_warned if "out of bounds" in w]
    if isinstance(cpu, str):
        assert got == cpu
        return
    assert not isinstance(got, str), got
    digits = {torch.float32: 24, torch.float16: 11, torch.bfloat16: 8}
    top = hi if hi is not None else (2 ** digits[dtype] + 1 if dtype in digits else
                                     1 + (1 if dtype == torch.bool else torch.iinfo(dtype).max))
    assert lo <= got.min().item() and got.max().item() < top, (got.min(), got.max(), cpu.max())


def test_randperm_too_large_for_its_dtype_raises(neuron):
    for dtype, fits, too_large in ((torch.uint8, 2**8, 2**8 + 1), (torch.float16, 2**11 + 1, 2**11 + 2)):
        out = torch.empty(0, dtype=dtype, device=neuron)
        torch.randperm(fits, out=out)
        assert sorted(out.long().tolist()) == list(range(fits))
        with pytest.raises(RuntimeError):
            torch.randperm(too_large, out=out)


@pytest.mark.parametrize("fn", ["var", "std", "var_mean", "std_mean"])
def test_variance_of_complex_values_is_real(neuron, fn):
    x = torch.randn(5, 7, dtype=torch.complex64)
    for args in ((), (1,)):
        got = getattr(torch, fn)(x.to(neuron), *args)
        expected = getattr(torch, fn)(x, *args)
        # var/std real (float32), var_mean/std_mean's mean complex64, as on the CPU.
        torch.testing.assert_close(tuple(t.cpu() for t in got) if fn.endswith("_mean") else got.cpu(),
                                   expected, rtol=1e-6, atol=1e-7)
