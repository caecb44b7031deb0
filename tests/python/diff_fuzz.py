"""Differential fuzzer: random small programs run on neuron and on the CPU, compared op by op.

A program is a few input tensors (float32, bfloat16, float16, int64, int32, bool; ranks 0..4,
sizes 0..5; contiguous, permuted, sliced with steps or expanded) and 1..6 ops drawn from OPS,
which covers every op family: elementwise with broadcasting and type promotion, comparisons,
where, reductions, matmuls, softmax, norms, gather/scatter/index/cat, views, sort/topk,
in-place and out= variants, copies between layouts, factories, random ops, losses,
convolution, pooling and attention. A program is a JSON spec (`generate(seed)`); `run(spec)`
replays it from the spec alone.

Both sides run in lockstep. After each op the results are compared: the same exception
family when the CPU raises (messages may differ: noted), else the same dtype, shape, tensors
of the program aliased and a view's strides, and values within a tolerance for the dtype and
the kind of op (exact for integers, bool, views and copies; sort, topk and argmax indices
through the values they pick; random ops by their distribution). Then the neuron results
take the CPU's bits (and a fresh result the CPU's strides), so that a tolerated difference
of one op never grows into a false mismatch in the next. At the end every tensor of the
program (inputs included: in-place ops write through views) must still be equal, which
catches writes to the wrong place and views that are copies. KNOWN_BUGS lists the real
neuron bugs found (the bounded test counts them apart), ACCEPTED the legitimate differences.

Long runs: `python tests/python/diff_fuzz.py --seconds 600 --seed N [--minimise]` runs a
worker process, restarted after a crash or hang (reported with its program's --case-seed),
and prints each failing case as a replayable JSON line (FAIL {...}), then the programs,
op executions and mismatches. `--replay LINE_OR_FILE` replays cases (the corpus file too),
`--case-seed N` generates, prints and runs one program."""

import argparse
import json
import math
import operator
import os
import random
import re
import subprocess
import sys
import time
import warnings
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

DEVICE = "neuron"
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16,
          "int64": torch.int64, "int32": torch.int32, "bool": torch.bool}
NAMES = {v: k for k, v in DTYPES.items()}
FLOATS = ("float32", "bfloat16", "float16")
INTS = ("int64", "int32")
# a dtype's relative spacing at 1.0 (one unit in the last place, relative)
EPS = {torch.float32: 2.0 ** -23, torch.bfloat16: 2.0 ** -7, torch.float16: 2.0 ** -10}
E32 = EPS[torch.float32]
SPECIALS = [math.nan, math.inf, -math.inf, -0.0]


# --- tensors from specs --------------------------------------------------------------------

def base_shape(spec):
    """The shape of the contiguous tensor a spec's layout is cut from: undo expand (size-1
    dims), permute and step slicing, in that order."""
    lay = spec.get("layout", {})
    shape = [1 if d in lay.get("expand", ()) else s for d, s in enumerate(spec["shape"])]
    if "perm" in lay:
        pre = [0] * len(shape)
        for i, p in enumerate(lay["perm"]):
            pre[p] = shape[i]
        shape = pre
    if "step" in lay:
        shape = [o + s * k for s, k, o in zip(shape, lay["step"], lay["offset"])]
    return shape


def fill_values(spec, shape):
    """Deterministic values from the spec's seed: floats are mostly multiples of 1/4 (exact
    in every float type, so sums do not depend on their order) with some normal samples
    and, if asked, NaN/Inf/-0.0; integers are small (no overflow in a few ops)."""
    dtype = DTYPES[spec["dtype"]]
    if "values" in spec:
        return torch.tensor(spec["values"], dtype=dtype).reshape(shape)
    g = torch.Generator().manual_seed(spec["seed"])
    fill = spec.get("fill", "auto")
    if isinstance(fill, list) and fill[0] == "index":       # ["index", low, high]
        lo, hi = fill[1], fill[2]
        if hi <= lo:
            return torch.full(shape, lo, dtype=dtype)
        return torch.randint(lo, hi, shape, generator=g).to(dtype)
    if isinstance(fill, list) and fill[0] == "unique":      # ["unique", dim, high]: no repeats along dim
        dim, hi = fill[1], fill[2]
        wide = list(shape)
        wide[dim] = max(hi, shape[dim])
        perm = torch.rand(wide, generator=g).argsort(dim)
        return perm.narrow(dim, 0, shape[dim]).to(dtype)
    if fill == "prob":
        return (torch.randint(0, 5, shape, generator=g) / 4).to(dtype)
    if fill == "nonzero":
        v = torch.randint(1, 6, shape, generator=g) * (torch.randint(0, 2, shape, generator=g) * 2 - 1)
        return v.to(dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if not dtype.is_floating_point:
        return torch.randint(-5, 6, shape, generator=g).to(dtype)
    v = torch.randint(-12, 13, shape, generator=g) / 4
    v = torch.where(torch.rand(shape, generator=g) < 0.3, torch.randn(shape, generator=g) * 3, v)
    if spec.get("specials"):
        pick = torch.randint(0, len(SPECIALS), shape, generator=g)
        v = torch.where(torch.rand(shape, generator=g) < 0.15, torch.tensor(SPECIALS)[pick], v)
    return v.to(dtype)


def apply_layout(base, lay):
    t = base
    if "step" in lay:
        t = t[tuple(slice(o, None, k) for o, k in zip(lay["offset"], lay["step"]))]
    if "perm" in lay:
        t = t.permute(lay["perm"])
    if "expand" in lay:
        shape = list(t.shape)
        for d in lay["expand"]:
            shape[d] = lay["sizes"][d]
        t = t.expand(shape)
    return t


def make_tensor(spec, device):
    """The spec's tensor on device: the same base values and the same view of them (strides
    and storage offset) on either device."""
    shape = base_shape(spec)
    base = fill_values(spec, shape)
    lay = dict(spec.get("layout", {}))
    if "expand" in lay:
        lay["sizes"] = spec["shape"]
    return apply_layout(base.to(device), lay)


# --- the op table ------------------------------------------------------------------------------

@dataclass
class Op:
    fn: object
    gen: object
    mode: str = "exact"      # how values compare: tolerance(), check_indices(), check_random()
    weight: float = 1.0
    needs_device: bool = False


OPS: dict = {}


def register(name, fn, gen, mode="exact", weight=1.0, needs_device=False):
    OPS[name] = Op(fn, gen, mode, weight, needs_device)


def ref(i):
    return {"ref": i}


class Gen:
    """Chooses an op's operands from the tensors of the program so far (CPU values)."""

    def __init__(self, rng, env):
        self.r, self.env = rng, env

    def coin(self, p):
        return self.r.random() < p

    def pick(self, pred=None):
        """An env id whose tensor satisfies pred, recent ones more often."""
        ids = [i for i, t in self.env.items() if pred is None or pred(t)]
        if not ids:
            return None
        return self.r.choices(ids, weights=[k + 1 for k in range(len(ids))])[0]

    def t(self, i):
        return self.env[i]

    def dtype(self, floats=False):
        if floats:
            return self.r.choice(FLOATS)
        return self.r.choices(list(DTYPES), weights=[35, 15, 15, 15, 10, 10])[0]

    def size(self):
        if self.coin(0.02):
            return self.r.randint(6, 33)      # rarely long enough for the kernels' vector loops
        return self.r.choices(range(6), weights=[6, 20, 25, 22, 15, 12])[0]

    def shape(self, rank=None):
        if rank is None:
            rank = self.r.choices(range(5), weights=[10, 30, 30, 20, 10])[0]
        return [self.size() for _ in range(rank)]

    def layout(self, shape, expand=True):
        lay, rank = {}, len(shape)
        if rank and self.coin(0.25):
            lay["perm"] = self.r.sample(range(rank), rank)
        if rank and self.coin(0.25):
            lay["step"] = [self.r.choice([1, 1, 2, 3]) for _ in shape]
            lay["offset"] = [self.r.choice([0, 0, 1]) for _ in shape]
        if rank and expand and self.coin(0.12):
            lay["expand"] = [d for d in range(rank) if self.coin(0.5)]
        return lay

    def new(self, dtype, shape, fill="auto", layout=True, expand=True, specials=True):
        spec = {"dtype": dtype, "shape": list(shape), "seed": self.r.randrange(2 ** 31), "fill": fill}
        if layout:
            spec["layout"] = self.layout(shape, expand)
        if specials and fill == "auto" and dtype in FLOATS and self.coin(0.08):
            spec["specials"] = True
        return {"new": spec}

    def index(self, shape, high, low=None, bad=0.03):
        """An int64 index tensor of shape with values in [low, high) (low default 0; with
        probability bad, out of range: the error path)."""
        low = 0 if low is None else low
        if self.coin(bad):
            low, high = high, high + 3
        return self.new("int64", shape, ["index", low, high], layout=self.coin(0.2), expand=False)

    def scalar(self, kind=None):
        kind = kind or self.r.choice(["int", "float", "float", "bool"])
        if kind == "int":
            return self.r.randint(-4, 4)
        if kind == "bool":
            return self.coin(0.5)
        if self.coin(0.05):
            return self.r.choice([math.nan, math.inf, -math.inf])
        return self.r.choice([0.5, -1.5, 2.0, 0.25, -3.0, 1.0, 0.0, 1.75])

    def dim(self, t, extra=0):
        """A dim of t (negative half of the time); a 0-dim tensor takes 0 or -1."""
        n = max(t.dim(), 1) + extra
        if self.coin(0.02):
            return n + 1          # out of range: both must raise IndexError
        d = self.r.randrange(n)
        return d - n if self.coin(0.3) else d

    def bshape(self, shape):
        """A shape that broadcasts with shape: a suffix of it with some sizes 1, sometimes
        with more leading dims; rarely one that does not broadcast."""
        out = [1 if self.coin(0.3) else s for s in shape[self.r.randrange(len(shape) + 1):]]
        if self.coin(0.15) and len(shape) < 4:
            out = [self.r.choice([1, 2, 3])] + out
        if out and self.coin(0.03):
            d = self.r.randrange(len(out))
            out[d] = out[d] + 2
        return out

    def operand(self, x, dtype=None, scalar_ok=True, kinds=None):
        """A second operand for tensor env id x: a Python scalar, another tensor of the program
        that broadcasts with it, or a new one (of dtype, default a random one)."""
        if scalar_ok and self.coin(0.3):
            return self.scalar(kinds)
        shape = list(self.t(x).shape)
        if self.coin(0.4):
            other = self.pick(lambda t: (dtype is None or NAMES[t.dtype] == dtype) and broadcasts(t.shape, shape))
            if other is not None:
                return ref(other)
        return self.new(dtype or self.r.choice([NAMES[self.t(x).dtype], self.dtype()]), self.bshape(shape))


def broadcasts(a, b):
    try:
        torch.broadcast_shapes(a, b)
        return True
    except RuntimeError:
        return False


def shares_memory(a, b):
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


def expanded(t):
    """Some element is read through two indices (a stride 0): in-place ops on it raise."""
    return torch._debug_has_internal_overlap(t) == 1


def writable(t):
    """No two elements share memory (not an expanded or unfolded view): an in-place op on it
    has one defined result. Dims sorted by stride: each one steps past the previous one's
    extent."""
    dims = sorted((st, sz) for st, sz in zip(t.stride(), t.shape) if sz > 1)
    if t.numel() == 0 or not dims:
        return True
    extent = 1
    for stride, size in dims:
        if stride < extent:
            return False
        extent = stride * size
    return True


def is_float(t):
    return t.is_floating_point()


def has_int_min(*ts):
    """True if an integer tensor holds its type's smallest value: min // -1 traps (SIGFPE) on
    the CPU for int32/int64, so integer divisions of such values are not generated."""
    return any(isinstance(t, torch.Tensor) and t.dtype in (torch.int32, torch.int64)
               and t.numel() and bool((t == torch.iinfo(t.dtype).min).any()) for t in ts)


# elementwise unary ----------------------------------------------------------------------------

def on_one_tensor(more=None, pred=None):
    """A generator for an op on one tensor of the program that satisfies pred: the tensor,
    then the arguments and keywords more(g, tensor) gives."""
    def gen(g):
        x = g.pick(pred)
        if x is None:
            return None
        got = more(g, g.t(x)) if more else ([], {})
        return None if got is None else ([ref(x)] + got[0], got[1])
    return gen


def in_place_target(g):
    """A tensor an in-place op may write, or rarely an expanded one (the op must raise)."""
    return lambda t: writable(t) or expanded(t) and g.coin(0.05)


def gen_unary(pred=None, inplace=False):
    def gen(g):
        target = in_place_target(g)
        x = g.pick(lambda t: (pred is None or pred(t)) and (not inplace or target(t)))
        return None if x is None else ([ref(x)], {})
    return gen


TRANSCENDENTAL = {
    "exp": torch.exp, "log": torch.log, "sqrt": torch.sqrt, "tanh": torch.tanh, "sigmoid": torch.sigmoid,
    "sin": torch.sin, "cos": torch.cos, "log1p": torch.log1p, "expm1": torch.expm1, "erf": torch.erf,
    "rsqrt": torch.rsqrt, "atan": torch.atan, "log2": torch.log2, "exp2": torch.exp2,
    "gelu": F.gelu, "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"), "silu": F.silu,
    "softplus": F.softplus, "elu": F.elu, "mish": F.mish, "logsigmoid": F.logsigmoid,
    "selu": F.selu, "hardswish": F.hardswish, "hardsigmoid": F.hardsigmoid, "softsign": F.softsign,
    "reciprocal": torch.reciprocal, "asinh": torch.asinh, "sinh": torch.sinh,
}
EXACT_UNARY = {
    "abs": torch.abs, "neg": torch.neg, "floor": torch.floor, "ceil": torch.ceil, "round": torch.round,
    "trunc": torch.trunc, "sign": torch.sign, "relu": torch.relu, "square": torch.square,
    "frac": torch.frac, "nan_to_num": torch.nan_to_num, "logical_not": torch.logical_not,
    "bitwise_not": torch.bitwise_not, "isnan": torch.isnan, "isinf": torch.isinf,
    "isfinite": torch.isfinite, "signbit": torch.signbit, "relu6": F.relu6,
    "leaky_relu": lambda x: F.leaky_relu(x, 0.25), "hardtanh": F.hardtanh,
    "clamp": lambda x: torch.clamp(x, -1.5, 2.0), "clamp_min": lambda x: torch.clamp_min(x, 0.5),
    "round_decimals": lambda x: torch.round(x, decimals=1), "positive": torch.positive,
    "threshold": lambda x: F.threshold(x, 0.5, -2.0),
}
for _name, _fn in TRANSCENDENTAL.items():
    register(_name, _fn, gen_unary(), "transc", 0.4)
for _name, _fn in EXACT_UNARY.items():
    register(_name, _fn, gen_unary(), "ew", 0.4)
for _name in ["exp_", "relu_", "neg_", "abs_", "floor_", "sigmoid_", "tanh_", "sqrt_", "clamp_", "zero_",
              "round_", "logical_not_", "bitwise_not_", "sign_", "reciprocal_"]:
    _args = (-1.0, 1.5) if _name == "clamp_" else ()
    register(_name, (lambda n, a: lambda x: getattr(x, n)(*a))(_name, _args), gen_unary(inplace=True),
             "transc" if _name in ("exp_", "sigmoid_", "tanh_", "sqrt_", "reciprocal_") else "ew", 0.3)


# elementwise binary ---------------------------------------------------------------------------

OPERATORS = {  # Python operators: a scalar on either side
    "+": (operator.add, "ew"), "-": (operator.sub, "ew"), "*": (operator.mul, "ew"),
    "/": (operator.truediv, "ew"), "//": (operator.floordiv, "ew"), "%": (operator.mod, "ew"),
    "**": (operator.pow, "transc"), "&": (operator.and_, "exact"), "|": (operator.or_, "exact"),
    "^": (operator.xor, "exact"), "<": (operator.lt, "exact"), "<=": (operator.le, "exact"),
    ">": (operator.gt, "exact"), ">=": (operator.ge, "exact"), "==": (operator.eq, "exact"),
    "!=": (operator.ne, "exact"),
}
DIVISIONS = {"//", "%", "div_floor", "div_trunc", "fmod", "remainder", "floor_divide"}
TORCH_BINARY = {  # tensor first; scalar second where the op takes one
    "add_alpha": (lambda a, b: torch.add(a, b, alpha=2), "ew", True),
    "sub_alpha": (lambda a, b: torch.sub(a, b, alpha=0.5), "ew", True),
    "div_floor": (lambda a, b: torch.div(a, b, rounding_mode="floor"), "ew", True),
    "div_trunc": (lambda a, b: torch.div(a, b, rounding_mode="trunc"), "ew", True),
    "maximum": (torch.maximum, "exact", False), "minimum": (torch.minimum, "exact", False),
    "fmax": (torch.fmax, "exact", False), "fmin": (torch.fmin, "exact", False),
    "atan2": (torch.atan2, "transc", False), "fmod": (torch.fmod, "ew", True),
    "remainder": (torch.remainder, "ew", True), "hypot": (torch.hypot, "transc", False),
    "copysign": (torch.copysign, "exact", True), "logical_and": (torch.logical_and, "exact", False),
    "logical_or": (torch.logical_or, "exact", False), "logical_xor": (torch.logical_xor, "exact", False),
    "xlogy": (torch.xlogy, "transc", True), "floor_divide": (torch.floor_divide, "ew", True),
    "lerp": (lambda a, b: torch.lerp(a, b, 0.25), "fma", False),
    "isclose": (lambda a, b: torch.isclose(a, b), "exact", False),
    "bitwise_and": (torch.bitwise_and, "exact", True), "eq_fn": (torch.eq, "exact", True),
}


def gen_binary(name, scalar_ok, either_side):
    def gen(g):
        x = g.pick()
        if x is None:
            return None
        y = g.operand(x, scalar_ok=scalar_ok)
        if name in DIVISIONS and g.t(x).dtype in (torch.int32, torch.int64):
            if has_int_min(g.t(x)) or (isinstance(y, dict) and "ref" in y and has_int_min(g.t(y["ref"]))):
                return None
            if isinstance(y, dict) and "new" in y and g.coin(0.8):
                y["new"]["fill"] = "nonzero"       # mostly: an integer divisor of 0 raises
        args = [ref(x), y]
        if either_side and not isinstance(y, dict) and g.coin(0.5):
            args.reverse()
        return args, {}
    return gen


for _name, (_fn, _mode) in OPERATORS.items():
    register(_name, _fn, gen_binary(_name, True, True), _mode, 0.6)
for _name, (_fn, _mode, _scalar) in TORCH_BINARY.items():
    register(_name, _fn, gen_binary(_name, _scalar, False), _mode, 0.4)


def gen_binary_inplace(g):
    x = g.pick(in_place_target(g))
    return None if x is None else ([ref(x), g.operand(x)], {})


for _name, _mode in [("add_", "ew"), ("sub_", "ew"), ("mul_", "ew"), ("div_", "ew"), ("pow_", "transc"),
                     ("copy_", "exact"), ("clamp_min_", "exact"), ("lerp_", "fma")]:
    _fn = (lambda n: lambda a, b: getattr(a, n)(b) if n != "lerp_" else a.lerp_(b, 0.5))(_name)
    register(_name, _fn, gen_binary_inplace, _mode, 0.5 if _name != "copy_" else 1.0)


def gen_ternary(g):
    x = g.pick()
    if x is None:
        return None
    return [ref(x), g.operand(x, scalar_ok=False), g.operand(x, scalar_ok=False)], {}


register("addcmul", lambda a, b, c: torch.addcmul(a, b, c, value=0.5), gen_ternary, "fma", 0.3)
register("addcdiv", lambda a, b, c: torch.addcdiv(a, b, c, value=2), gen_ternary, "fma", 0.3)
register("clamp_tensors", lambda a, lo, hi: torch.clamp(a, lo, hi), gen_ternary, "exact", 0.3)


def gen_ternary_inplace(g):
    x = g.pick(writable)
    if x is None:
        return None
    return [ref(x), g.operand(x, scalar_ok=False), g.operand(x, scalar_ok=False)], {}


register("addcmul_", lambda a, b, c: a.addcmul_(b, c), gen_ternary_inplace, "fma", 0.3)


def gen_where(g):
    x = g.pick()
    if x is None:
        return None
    shape = list(g.t(x).shape)
    cond = g.pick(lambda t: t.dtype == torch.bool and broadcasts(t.shape, shape)) if g.coin(0.5) else None
    cond = ref(cond) if cond is not None else g.new("bool", g.bshape(shape))
    return [cond, ref(x), g.operand(x)], {}


register("where", torch.where, gen_where, "exact", 1.0)


# reductions ------------------------------------------------------------------------------------

def gen_reduce(dims="many", keepdim=True, dtype_kw=False, extra=None):
    def gen(g):
        x = g.pick()
        if x is None:
            return None
        t, kw = g.t(x), {}
        if dims == "many" and g.coin(0.3):
            kw["dim"] = None if g.coin(0.3) else sorted({g.dim(t) % max(t.dim(), 1)
                                                       for _ in range(g.r.randint(1, 3))})
        elif dims != "none" and (dims == "one" or g.coin(0.7)):
            kw["dim"] = g.dim(t)
        if keepdim and "dim" in kw and g.coin(0.4):
            kw["keepdim"] = True
        if dtype_kw and g.coin(0.2):
            # (a float to an integer type has no defined value for NaN, Inf or huge values)
            kw["dtype"] = {"dtype_name": g.r.choice(["float32", "bfloat16"] + ([] if is_float(t) else ["int64"]))}
        if extra:
            kw.update(extra(g, t))
        return [ref(x)], kw
    return gen


register("sum", torch.sum, gen_reduce(dtype_kw=True), "reduce", 1.0)
register("mean", torch.mean, gen_reduce(dtype_kw=True), "reduce", 0.8)
register("nansum", torch.nansum, gen_reduce(), "reduce", 0.3)
register("amax", torch.amax, gen_reduce(), "exact", 0.6)
register("amin", torch.amin, gen_reduce(), "exact", 0.4)
register("max_all", torch.max, gen_reduce(dims="none"), "exact", 0.3)
register("min_dim", torch.min, gen_reduce(dims="one"), "index_pair", 0.4)
register("max_dim", torch.max, gen_reduce(dims="one"), "index_pair", 0.5)
register("argmax", torch.argmax, gen_reduce(dims="opt"), "argindex", 0.6)
register("argmin", torch.argmin, gen_reduce(dims="opt"), "argindex", 0.4)
register("prod", torch.prod, gen_reduce(dims="opt", dtype_kw=True), "prod", 0.5)
register("var", torch.var, gen_reduce(extra=lambda g, t: {"correction": g.r.choice([0, 1, 2])}), "var", 0.6)
register("std", torch.std, gen_reduce(extra=lambda g, t: {"correction": g.r.choice([0, 1])}), "std", 0.4)
register("var_mean", torch.var_mean, gen_reduce(), "var", 0.3)
register("logsumexp", torch.logsumexp, gen_reduce(dims="one"), "logsoftmax", 0.4)
register("norm", lambda x, **kw: torch.linalg.vector_norm(x, **kw),
         gen_reduce(extra=lambda g, t: {"ord": g.r.choice([1, 2, math.inf, 3])}), "reduce", 0.4)
register("all", torch.all, gen_reduce(dims="opt"), "exact", 0.3)
register("any", torch.any, gen_reduce(dims="opt"), "exact", 0.3)
register("count_nonzero", torch.count_nonzero, gen_reduce(dims="opt", keepdim=False), "exact", 0.3)
register("cumsum", torch.cumsum, gen_reduce(dims="one", keepdim=False, dtype_kw=True), "reduce", 0.6)
register("cumprod", torch.cumprod, gen_reduce(dims="one", keepdim=False), "prod", 0.3)
register("cummax", torch.cummax, gen_reduce(dims="one", keepdim=False), "index_pair", 0.3)
register("logcumsumexp", torch.logcumsumexp, gen_reduce(dims="one", keepdim=False), "logsoftmax", 0.2)
register("cumsum_", lambda x, dim: x.cumsum_(dim), on_one_tensor(lambda g, t: ([g.dim(t)], {}), writable),
         "reduce", 0.2)
register("aminmax", lambda x, **kw: torch.aminmax(x, **kw), gen_reduce(dims="opt"), "exact", 0.2)


# matmuls ----------------------------------------------------------------------------------------

def operand_with_shape(g, shape, dtype):
    """An env tensor of this shape and dtype if there is one, else a new one."""
    i = g.pick(lambda t: list(t.shape) == list(shape) and NAMES[t.dtype] == dtype) if g.coin(0.5) else None
    return ref(i) if i is not None else g.new(dtype, shape)


def mm_dtype(g):
    return g.r.choice(FLOATS) if g.coin(0.9) else g.r.choice(["int64", "int32", "bool"])


def other_dtype(g, dtype):
    return dtype if g.coin(0.95) else g.dtype()    # rarely mixed: both must raise


def gen_matmul(g):
    dt = mm_dtype(g)
    ra, rb = g.r.randint(1, 4), g.r.randint(1, 4)
    k = g.size()
    batch = [g.size() for _ in range(max(ra, rb) - 2)] if max(ra, rb) > 2 else []
    a = (batch[len(batch) - (ra - 2):] if ra > 2 else []) + ([g.size()] if ra > 1 else []) + [k]
    b = (batch[len(batch) - (rb - 2):] if rb > 2 else []) + [k] + ([g.size()] if rb > 1 else [])
    if ra > 2 and rb > 2 and g.coin(0.3):
        a[0] = 1                                   # batch dims broadcast
    return [operand_with_shape(g, a, dt), g.new(other_dtype(g, dt), b)], {}


def gen_mm(batch, bias):
    def gen(g):
        dt = mm_dtype(g)
        n, k, m = g.size(), g.size(), g.size()
        lead = [g.size()] if batch else []
        args = [operand_with_shape(g, lead + [n, k], dt), g.new(other_dtype(g, dt), lead + [k, m])]
        kw = {}
        if bias:
            args.insert(0, g.new(dt, g.bshape(lead + [n, m])))
            kw = {"beta": g.r.choice([1, 0.5, 0]), "alpha": g.r.choice([1, 2.0])}
        return args, kw
    return gen


def gen_mv(g):
    dt = mm_dtype(g)
    n, k = g.size(), g.size()
    return [operand_with_shape(g, [n, k], dt), g.new(dt, [k])], {}


def gen_dot(g):
    dt = mm_dtype(g)
    k = g.size()
    return [operand_with_shape(g, [k], dt), g.new(dt, [k])], {}


def gen_outer(g):
    return [g.new(g.dtype(), [g.size()]), g.new(g.dtype(), [g.size()])], {}


def gen_linear(g):
    x = g.pick(lambda t: t.dim() >= 1 and is_float(t))
    if x is None:
        return None
    t, out = g.t(x), g.size()
    dt = NAMES[t.dtype]
    bias = g.new(dt, [out]) if g.coin(0.6) else None
    return [ref(x), g.new(dt, [out, t.shape[-1]]), bias], {}


register("matmul", torch.matmul, gen_matmul, "mm", 1.2)
register("mm", torch.mm, gen_mm(False, False), "mm", 0.5)
register("bmm", torch.bmm, gen_mm(True, False), "mm", 0.5)
register("addmm", torch.addmm, gen_mm(False, True), "mm", 0.5)
register("baddbmm", torch.baddbmm, gen_mm(True, True), "mm", 0.3)
register("mv", torch.mv, gen_mv, "mm", 0.3)
register("dot", torch.dot, gen_dot, "mm", 0.3)
register("outer", torch.outer, gen_outer, "ew", 0.2)
register("linear", F.linear, gen_linear, "mm", 0.5)


# softmax and norms --------------------------------------------------------------------------------

def gen_softmax(g):
    x = g.pick()
    if x is None:
        return None
    kw = {"dim": g.dim(g.t(x))}
    if g.coin(0.2):
        kw["dtype"] = {"dtype_name": "float32"}
    return [ref(x)], kw


def gen_norm(rms):
    def gen(g):
        x = g.pick()
        if x is None:
            return None
        t = g.t(x)
        k = g.r.randint(0, min(t.dim(), 2))
        shape = list(t.shape[t.dim() - k:])
        if shape and g.coin(0.03):
            shape[-1] += 1                          # does not match: both raise
        dt = NAMES[t.dtype] if g.coin(0.9) else g.dtype(floats=True)
        # no NaN/Inf in weight and bias: a normalised 0 times an infinite weight is NaN, but
        # the CPU's fused x * scale + shift gives +-inf there
        weight = g.new(dt, shape, specials=False) if g.coin(0.6) else None
        args = [ref(x), shape, weight]
        if not rms:
            args.append(g.new(dt, shape, specials=False) if g.coin(0.6) else None)
        return args, {"eps": g.r.choice([1e-5, 1e-3])}
    return gen


register("softmax", torch.softmax, gen_softmax, "softmax", 0.8)
register("log_softmax", torch.log_softmax, gen_softmax, "logsoftmax", 0.6)
register("layer_norm", F.layer_norm, gen_norm(False), "norm", 0.8)
register("rms_norm", F.rms_norm, gen_norm(True), "norm", 0.4)
register("normalize", lambda x, dim: F.normalize(x, dim=dim), on_one_tensor(lambda g, t: ([g.dim(t)], {}), is_float),
         "norm", 0.2)


# gather, scatter, index, cat ---------------------------------------------------------------------

def gen_gather(g):
    x = g.pick()
    if x is None:
        return None
    t = g.t(x)
    d = g.dim(t)
    shape = [g.r.randint(0, s) for s in t.shape] if t.dim() else []
    if t.dim() and -t.dim() <= d < t.dim():
        shape[d] = g.size()
    high = t.shape[d] if t.dim() and -t.dim() <= d < t.dim() else 1
    return [ref(x), d, g.index(shape, high)], {}


def gen_index_select(g):
    x = g.pick()
    if x is None:
        return None
    t = g.t(x)
    d = g.dim(t)
    high = t.shape[d] if t.dim() and -t.dim() <= d < t.dim() else 1
    return [ref(x), d, g.index([g.size()] if g.coin(0.9) else [], high)], {}


def scatter_args(g, unique, inplace=False):
    """(self, dim, index, src) for scatter-like ops: index no larger than src and (off dim)
    than self; unique: no index repeated along dim (a repeated one picks an undefined
    writer)."""
    x = g.pick((lambda t: t.dim() >= 1 and writable(t)) if inplace else (lambda t: t.dim() >= 1))
    if x is None:
        return None
    t = g.t(x)
    d = g.r.randrange(t.dim())
    high = t.shape[d]
    shape = [g.r.randint(0, s) for s in t.shape]
    shape[d] = g.r.randint(0, high) if unique else g.size()
    fill = ["unique", d, high] if unique and high else ["index", 0, high]
    index = g.new("int64", shape, fill, layout=False)
    src = g.new(NAMES[t.dtype] if g.coin(0.9) else g.dtype(), [s + g.r.choice([0, 0, 1]) for s in shape])
    return [ref(x), d - t.dim() if g.coin(0.3) else d, index, src]


def gen_scatter(unique, value=False, inplace=False, reduce=None):
    def gen(g):
        args = scatter_args(g, unique, inplace)
        if args is None:
            return None
        kw = {}
        if value:
            args[3] = g.scalar("float" if is_float(g.t(args[0]["ref"])) else "int")
        if reduce:
            kw = {"reduce": g.r.choice(reduce), "include_self": g.coin(0.5)}
        return args, kw
    return gen


def gen_index_1d(unique, value=False, inplace=False):
    """(self, dim, index, source or value) for index_add/index_copy/index_fill."""
    def gen(g):
        x = g.pick((lambda t: writable(t)) if inplace else None)
        if x is None:
            return None
        t = g.t(x)
        d = g.r.randrange(max(t.dim(), 1))
        high = t.shape[d] if t.dim() else 1
        n = g.r.randint(0, high) if unique else g.size()
        index = g.new("int64", [n], ["unique", 0, high] if unique and high else ["index", 0, high], layout=False)
        if value:
            return [ref(x), d, index, g.scalar("float" if is_float(t) else "int")], {}
        shape = list(t.shape)
        if shape:
            shape[d] = n
        return [ref(x), d, index, g.new(NAMES[t.dtype], shape)], {}
    return gen


def gen_masked_fill(inplace):
    def gen(g):
        x = g.pick(writable if inplace else None)
        if x is None:
            return None
        t = g.t(x)
        mask = g.new("bool", g.bshape(list(t.shape)) if not inplace else list(t.shape[g.r.randint(0, t.dim()):]))
        value = g.scalar("float" if is_float(t) else g.r.choice(["int", "bool"]))
        if g.coin(0.2):
            value = g.new(NAMES[t.dtype], [])
        return [ref(x), mask, value], {}
    return gen


def gen_masked_select(g):
    x = g.pick()
    return None if x is None else ([ref(x), g.new("bool", g.bshape(list(g.t(x).shape)))], {})


def gen_masked_scatter(g):
    x = g.pick(writable)
    if x is None:
        return None
    t = g.t(x)
    return [ref(x), g.new("bool", list(t.shape)), g.new(NAMES[t.dtype], [t.numel() + g.r.choice([0, 0, 2])])], {}


def gen_advanced_index(g):
    x = g.pick(lambda t: t.dim() >= 1)
    if x is None:
        return None
    t = g.t(x)
    kind = g.r.choice(["first", "second", "mask", "pair"])
    if kind == "second" and t.dim() < 2:
        kind = "first"
    if kind == "pair" and t.dim() < 2:
        kind = "first"
    size = t.shape[1] if kind == "second" else t.shape[0]
    if kind == "mask":
        return [ref(x), g.new("bool", list(t.shape[:g.r.randint(1, t.dim())]), layout=False)], {"kind": kind}
    idx = g.index(g.shape(g.r.randint(0, 2)), size, low=-size)
    if kind == "pair":
        return [ref(x), idx, g.index(g.bshape(idx["new"]["shape"]), t.shape[1], low=-t.shape[1])], {"kind": kind}
    return [ref(x), idx], {"kind": kind}


def advanced_index(x, i, j=None, kind="first"):
    if kind == "second":
        return x[:, i]
    if kind == "pair":
        return x[i, j]
    return x[i]


def gen_index_put(g):
    x = g.pick(lambda t: t.dim() >= 1 and writable(t))
    if x is None:
        return None
    t = g.t(x)
    accumulate = g.coin(0.5)
    n = g.size() if accumulate else g.r.randint(0, t.shape[0])
    fill = ["index", 0, t.shape[0]] if accumulate or not t.shape[0] else ["unique", 0, t.shape[0]]
    index = g.new("int64", [n], fill, layout=False)
    values = g.new(NAMES[t.dtype], g.bshape([n] + list(t.shape[1:])))
    return [ref(x), index, values], {"accumulate": accumulate}


def gen_cat(stack):
    def gen(g):
        x = g.pick()
        if x is None:
            return None
        t = g.t(x)
        shape = list(t.shape)
        d = g.dim(t, extra=1 if stack else 0)
        parts = [ref(x)]
        for _ in range(g.r.randint(0, 2)):
            s = list(shape)
            if not stack and s and -len(s) <= d < len(s) and g.coin(0.7):
                s[d] = g.size()
            if g.coin(0.05):
                s = [0]                              # cat's legacy empty 1-D tensor
            parts.append(g.new(NAMES[t.dtype] if g.coin(0.8) else g.dtype(), s))
        g.r.shuffle(parts)
        return [parts], {"dim": d}
    return gen


register("gather", torch.gather, gen_gather, "exact", 0.8)
register("index_select", torch.index_select, gen_index_select, "exact", 0.8)
register("take", torch.take, on_one_tensor(lambda g, t: ([g.index([g.size()], t.numel(), low=-t.numel())], {})),
         "exact", 0.3)
register("scatter", torch.scatter, gen_scatter(True), "exact", 0.5)
register("scatter_value", torch.scatter, gen_scatter(False, value=True), "exact", 0.3)
register("scatter_add", torch.scatter_add, gen_scatter(False), "accumulate", 0.5)
register("scatter_reduce", torch.scatter_reduce,
         gen_scatter(False, reduce=["sum", "prod", "mean", "amax", "amin"]), "accumulate", 0.5)
register("scatter_", lambda x, d, i, s: x.scatter_(d, i, s), gen_scatter(True, inplace=True), "exact", 0.4)
register("index_add", lambda x, d, i, s: torch.index_add(x, d, i, s, alpha=2), gen_index_1d(False),
         "accumulate", 0.4)
register("index_add_", lambda x, d, i, s: x.index_add_(d, i, s), gen_index_1d(False, inplace=True),
         "accumulate", 0.3)
register("index_copy", torch.index_copy, gen_index_1d(True), "exact", 0.3)
register("index_fill", torch.index_fill, gen_index_1d(False, value=True), "exact", 0.3)
register("index_fill_", lambda x, d, i, v: x.index_fill_(d, i, v), gen_index_1d(False, True, True), "exact", 0.3)
register("masked_fill", torch.masked_fill, gen_masked_fill(False), "exact", 0.6)
register("masked_fill_", lambda x, m, v: x.masked_fill_(m, v), gen_masked_fill(True), "exact", 0.5)
register("masked_select", torch.masked_select, gen_masked_select, "exact", 0.4)
register("masked_scatter_", lambda x, m, s: x.masked_scatter_(m, s), gen_masked_scatter, "exact", 0.3)
register("index", advanced_index, gen_advanced_index, "exact", 0.8)
register("index_put_", lambda x, i, v, accumulate: x.index_put_((i,), v, accumulate=accumulate),
         gen_index_put, "accumulate", 0.5)
register("cat", torch.cat, gen_cat(False), "exact", 0.8)
register("stack", torch.stack, gen_cat(True), "exact", 0.4)
register("nonzero", torch.nonzero, gen_unary(), "exact", 0.3)
def gen_embedding(g):
    w = g.pick(lambda t: t.dim() == 2 and is_float(t))
    return None if w is None else ([g.index(g.shape(g.r.randint(0, 2)), g.t(w).shape[0]), ref(w)], {})


def gen_one_hot(g):
    return [g.index(g.shape(g.r.randint(0, 2)), 4), g.r.choice([-1, 4, 5])], {}   # -1: from the largest


def at_least(rank):
    return lambda t: t.dim() >= rank


register("flip", torch.flip,
         on_one_tensor(lambda g, t: ([sorted({g.r.randrange(max(t.dim(), 1)) for _ in range(2)})], {})), "exact", 0.4)
register("roll", torch.roll, on_one_tensor(lambda g, t: ([g.r.randint(-6, 6), g.dim(t)], {})), "exact", 0.3)
register("tril", torch.tril, on_one_tensor(lambda g, t: ([g.r.randint(-2, 2)], {}), at_least(2)), "exact", 0.3)
register("triu", torch.triu, on_one_tensor(lambda g, t: ([g.r.randint(-2, 2)], {}), at_least(2)), "exact", 0.3)
register("repeat", lambda x, sizes: x.repeat(sizes),
         on_one_tensor(lambda g, t: ([[g.r.randint(0, 3) for _ in range(t.dim() + g.r.randint(0, 1))]], {})),
         "exact", 0.3)
register("repeat_interleave", torch.repeat_interleave,
         on_one_tensor(lambda g, t: ([g.r.randint(0, 3), g.dim(t)], {})), "exact", 0.3)
register("embedding", F.embedding, gen_embedding, "exact", 0.3)
register("one_hot", F.one_hot, gen_one_hot, "exact", 0.2)


# views and copies ---------------------------------------------------------------------------------

def reshape_target(g, shape):
    """A random shape with the same number of elements; sometimes with a -1."""
    n = math.prod(shape)
    if n == 0:
        out = [g.r.randint(0, 3) for _ in range(g.r.randint(1, 3))]
        out[g.r.randrange(len(out))] = 0
        return out
    out, rest = [], n
    for p in (2, 3, 5):
        while rest % p == 0 and g.coin(0.7):
            out.append(p)
            rest //= p
    if rest > 1:
        out.append(rest)
    # merge some factors, add size-1 dims, shuffle
    while len(out) > 4:
        out = [out[0] * out[1]] + out[2:]
    if g.coin(0.3) and len(out) < 4:
        out.insert(g.r.randint(0, len(out)), 1)
    g.r.shuffle(out)
    if out and g.coin(0.3):
        out[g.r.randrange(len(out))] = -1
    return out


def any_dim(g, t):
    """A dim of a tensor with dims (None for a 0-dim one: the op does not apply)."""
    return g.r.randrange(t.dim()) if t.dim() else None


def narrow_args(g, t):
    d = any_dim(g, t)
    if d is None:
        return None
    start = g.r.randint(0, t.shape[d])
    return [d, start, g.r.randint(0, t.shape[d] - start)]


def flatten_args(g, t):
    start = g.r.randrange(max(t.dim(), 1))
    return [start, g.r.randint(start, max(t.dim() - 1, start))]


def expand_args(g, t):
    """A shape to expand t to: size-1 dims grown (to 0 too), -1 kept, maybe a new leading dim."""
    shape = [g.r.choice([0, 2, 3]) if s == 1 and g.coin(0.6) else (-1 if g.coin(0.3) else s) for s in t.shape]
    if len(shape) < 4 and g.coin(0.3):
        shape = [g.r.randint(0, 3)] + shape
    return [shape]


def select_args(g, t):
    d = any_dim(g, t)
    return None if d is None else [d, g.r.randint(-t.shape[d], t.shape[d] - 1) if t.shape[d] else 0]


def slice_args(g, t):
    d = any_dim(g, t)
    return None if d is None else [d, g.r.randint(-4, 4), g.r.choice([None, g.r.randint(-4, 5)]), g.r.randint(1, 3)]


def diagonal_args(g, t):
    return None if t.dim() < 2 else [g.r.randint(-2, 2)] + g.r.sample(range(t.dim()), 2)


def unfold_args(g, t):
    d = any_dim(g, t)
    return None if d is None else [d, g.r.randint(0, t.shape[d]), g.r.randint(1, 2)]


def unflatten_args(g, t):
    d = any_dim(g, t)
    return None if d is None else [d, reshape_target(g, [t.shape[d]])]


VIEW_ARGS = {  # each view's arguments after the tensor (None: it does not apply)
    "reshape": lambda g, t: [reshape_target(g, list(t.shape))],
    "view": lambda g, t: [reshape_target(g, list(t.shape))],
    "permute": lambda g, t: [g.r.sample(range(t.dim()), t.dim())],
    "transpose": lambda g, t: [g.dim(t), g.dim(t)],
    "narrow": narrow_args,
    "unsqueeze": lambda g, t: [g.dim(t, extra=1)],
    "squeeze": lambda g, t: [] if g.coin(0.3) else [g.dim(t)],
    "flatten": flatten_args,
    "expand": expand_args,
    "select": select_args,
    "slice": slice_args,
    "movedim": lambda g, t: [g.dim(t), g.dim(t)],
    "diagonal": diagonal_args,
    "unfold": unfold_args,
    "unflatten": unflatten_args,
}


def gen_view(kind):
    def more(g, t):
        args = VIEW_ARGS[kind](g, t)
        return None if args is None else (args, {})
    return on_one_tensor(more)


def slice_dim(x, d, start, stop, step):
    return x[(slice(None),) * d + (slice(start, stop, step),)]


for _name, _fn in [("reshape", torch.reshape), ("view", lambda x, s: x.view(s)), ("permute", torch.permute),
                   ("transpose", torch.transpose), ("narrow", torch.narrow), ("unsqueeze", torch.unsqueeze),
                   ("squeeze", torch.squeeze), ("flatten", torch.flatten), ("expand", lambda x, s: x.expand(s)),
                   ("select", torch.select), ("slice", slice_dim), ("movedim", torch.movedim),
                   ("diagonal", torch.diagonal), ("unfold", lambda x, d, s, k: x.unfold(d, s, k)),
                   ("unflatten", torch.unflatten)]:
    register(_name, _fn, gen_view(_name), "exact", 0.8)
register("t_", lambda x: x.t_(), gen_unary(lambda t: t.dim() <= 2), "exact", 0.15)
register("unsqueeze_", lambda x, d: x.unsqueeze_(d),
         on_one_tensor(lambda g, t: ([g.dim(t, extra=1)], {}), lambda t: t.dim() < 4), "exact", 0.15)
register("transpose_", lambda x, a, b: x.transpose_(a, b), gen_view("transpose"), "exact", 0.15)
register("split", torch.split, on_one_tensor(lambda g, t: ([g.r.randint(1, 3), g.dim(t)], {}), at_least(1)),
         "exact", 0.3)
register("chunk", torch.chunk, on_one_tensor(lambda g, t: ([g.r.randint(1, 3), g.dim(t)], {}), at_least(1)),
         "exact", 0.2)
register("unbind", torch.unbind, on_one_tensor(lambda g, t: ([g.dim(t)], {}), at_least(1)), "exact", 0.2)
register("contiguous", lambda x: x.contiguous(), gen_unary(), "exact", 0.5)
register("clone", lambda x, mf: x.clone(memory_format=mf), on_one_tensor(lambda g, t: (
    [{"mf": "channels_last" if t.dim() == 4 and g.coin(0.5) else "preserve"}], {})), "exact", 0.5)


def gen_to_dtype(g):
    x = g.pick()
    if x is None:
        return None
    t, target = g.t(x), g.dtype()
    # A float that is NaN, infinite or out of the target's range has no defined integer value.
    if is_float(t) and target in INTS and t.numel() and not bool((t.isfinite() & (t.abs() < 2 ** 31)).all()):
        return None
    return [ref(x), {"dtype_name": target}], {}


def gen_view_dtype(g):
    x = g.pick()
    if x is None:
        return None
    size = g.t(x).element_size()
    same = [n for n, d in DTYPES.items() if d.itemsize == size]
    return [ref(x), {"dtype_name": g.r.choice(same if g.coin(0.8) else list(DTYPES))}], {}


register("to", lambda x, dt: x.to(dt), gen_to_dtype, "exact", 0.8)
register("view_dtype", lambda x, dt: x.view(dt), gen_view_dtype, "exact", 0.3)


def gen_copy_into(g):
    """dst.copy_(src): dst a (possibly strided) tensor of the program, src a tensor in
    another layout and maybe another dtype that broadcasts to it."""
    x = g.pick(in_place_target(g))
    if x is None:
        return None
    t = g.t(x)
    dt = NAMES[t.dtype] if g.coin(0.6) else g.dtype()
    if t.dtype in (torch.int32, torch.int64) and dt in FLOATS:
        dt = NAMES[t.dtype]               # float -> int of NaN/Inf has no defined result
    return [ref(x), g.new(dt, g.bshape(list(t.shape)))], {}


register("copy_into", lambda d, s: d.copy_(s), gen_copy_into, "exact", 0.8)
register("fill_", lambda x, v: x.fill_(v),
         on_one_tensor(lambda g, t: ([g.scalar("float" if is_float(t) else "int")], {}), writable), "exact", 0.3)


def gen_out(g):
    """An out= variant: the result written into a tensor of the program (a view, maybe of
    another shape or dtype: resized with a warning, or an error)."""
    kind = g.r.choice(["add", "mul", "exp", "sum", "matmul", "cat", "clamp"])
    x = g.pick(lambda t: is_float(t) or kind in ("add", "mul", "cat"))
    o = g.pick(lambda t: writable(t))
    if x is None or o is None:
        return None
    if kind in ("sum", "matmul", "cat") and shares_memory(g.t(o), g.t(x)):
        return None       # an out= that is also an input of a reduction: undefined values
    t = g.t(x)
    if kind == "matmul":
        args = [ref(x), g.new(NAMES[t.dtype], [t.shape[-1] if t.dim() else 0, g.size()])]
    elif kind in ("add", "mul"):
        args = [ref(x), g.operand(x, scalar_ok=False)]
    elif kind == "cat":
        args = [[ref(x), g.new(NAMES[t.dtype], list(t.shape))]]
    else:
        args = [ref(x)]
    return args + [ref(o)], {"kind": kind}


def out_variant(*args, kind):
    *ins, out = args
    fn = {"add": torch.add, "mul": torch.mul, "exp": torch.exp, "sum": lambda x, out: torch.sum(x, 0, out=out),
          "matmul": torch.matmul, "cat": torch.cat, "clamp": lambda x, out: torch.clamp(x, -1, 1, out=out)}[kind]
    return fn(*ins, out=out)


register("out=", out_variant, gen_out, "mm", 0.8)


# factories and random ops --------------------------------------------------------------------------

def gen_factory(g):
    kind = g.r.choice(["zeros", "ones", "full", "arange", "linspace", "eye", "zeros_like", "full_like", "empty"])
    dt = g.dtype()
    kw = {"dtype": {"dtype_name": dt}}
    if kind == "arange":
        return [kind, g.r.choice([0, -2, 1.5]), g.r.choice([3, 5.5, 0, -1]), g.r.choice([1, 0.5, 2, -1])], kw
    if kind == "linspace":
        return [kind, g.r.choice([0.0, -1.0]), g.r.choice([1.0, 3.0]), g.r.randint(0, 6)], \
            {"dtype": {"dtype_name": g.dtype(floats=True)}}
    if kind == "eye":
        return [kind, g.size(), g.size()], kw
    if kind.endswith("_like"):
        x = g.pick()
        return None if x is None else ([kind, ref(x)], {})
    return [kind, g.shape()] + ([g.scalar("int" if dt in INTS else None)] if kind == "full" else []), kw


def factory(kind, *args, device, dtype=None):
    if kind in ("zeros_like", "full_like"):
        return torch.zeros_like(args[0]) if kind == "zeros_like" else torch.full_like(args[0], 2)
    fn = {"zeros": torch.zeros, "ones": torch.ones, "full": torch.full, "arange": torch.arange,
          "linspace": torch.linspace, "eye": torch.eye, "empty": torch.empty}[kind]
    out = fn(*args, dtype=dtype, device=device)
    return out.zero_() if kind == "empty" else out     # empty's values are not defined


register("factory", factory, gen_factory, "transc", 0.6, needs_device=True)


def gen_random(g):
    kind = g.r.choice(["dropout", "rand_like", "randn_like", "bernoulli", "uniform_", "normal_",
                       "randint_like", "randperm", "random_"])
    if kind == "randperm":
        return [kind, g.r.randint(0, 8)], {}
    if kind == "bernoulli":
        return [kind, g.new(g.dtype(floats=True), g.shape(), "prob")], {}
    x = g.pick(is_float if kind in ("dropout", "rand_like", "randn_like", "uniform_", "normal_") else None)
    if x is None or (kind.endswith("_") and not writable(g.t(x))):
        return None
    return [kind, ref(x)], {"p": g.r.choice([0.0, 0.5, 1.0])} if kind == "dropout" else {}


def random_op(kind, x, device, p=0.5):
    if kind == "randperm":
        return torch.randperm(x, device=device)
    return {"dropout": lambda: F.dropout(x, p, training=True), "rand_like": lambda: torch.rand_like(x),
            "randn_like": lambda: torch.randn_like(x), "bernoulli": lambda: torch.bernoulli(x),
            "uniform_": lambda: x.uniform_(-1, 2), "normal_": lambda: x.normal_(),
            "randint_like": lambda: torch.randint_like(x, -3, 4),
            "random_": lambda: x.random_(0, 5)}[kind]()


register("random", random_op, gen_random, "random", 0.5, needs_device=True)


# sort and topk ----------------------------------------------------------------------------------------

def gen_sort(g):
    x = g.pick()
    return None if x is None else ([ref(x)], {"dim": g.dim(g.t(x)), "descending": g.coin(0.5), "stable": g.coin(0.5)})


def gen_topk(g):
    x = g.pick()
    if x is None:
        return None
    t = g.t(x)
    d = g.dim(t)
    n = t.shape[d] if t.dim() and -t.dim() <= d < t.dim() else 1
    return [ref(x), g.r.randint(0, n + (1 if g.coin(0.05) else 0))], \
        {"dim": d, "largest": g.coin(0.5), "sorted": g.coin(0.8)}


def gen_kthvalue(g):
    x = g.pick()
    if x is None:
        return None
    t = g.t(x)
    d = g.dim(t)
    n = t.shape[d] if t.dim() and -t.dim() <= d < t.dim() else 1
    return [ref(x), g.r.randint(1, max(n, 1))], {"dim": d, "keepdim": g.coin(0.3)}


register("sort", torch.sort, gen_sort, "sort", 0.8)
register("argsort", torch.argsort, gen_sort, "sort", 0.4)
register("topk", torch.topk, gen_topk, "sort", 0.6)
register("kthvalue", torch.kthvalue, gen_kthvalue, "sort", 0.3)
# Not on expanded inputs: PyTorch's CPU median(dim) (which neuron runs as a host library
# kernel) reads garbage there: tensor([4.]).expand(3).median(0) is 0.0.
register("median_dim", torch.median, on_one_tensor(lambda g, t: ([g.dim(t), g.coin(0.3)], {}), writable), "sort", 0.3)
register("unique", lambda x: torch.unique(x, sorted=True, return_inverse=True, return_counts=True),
         gen_unary(), "exact", 0.3)


# losses, convolution, pooling, attention -----------------------------------------------------------

def gen_pointwise_loss(g):
    x = g.pick(is_float)
    if x is None:
        return None
    t = g.t(x)
    return [ref(x), g.new(NAMES[t.dtype], list(t.shape))], {"reduction": g.r.choice(["mean", "sum", "none"])}


def gen_cross_entropy(nll):
    def gen(g):
        dt = g.dtype(floats=True)
        n, c = g.size(), g.r.randint(1, 5)
        shape = [n, c] if g.coin(0.8) else [c]
        target = g.index(shape[:-1], c)
        kw = {"reduction": g.r.choice(["mean", "sum", "none"])}
        if not nll and g.coin(0.3):
            kw["label_smoothing"] = 0.1
        if g.coin(0.2):
            kw["ignore_index"] = 0
        return [g.new(dt, shape), target], kw
    return gen


register("mse_loss", F.mse_loss, gen_pointwise_loss, "reduce", 0.3)
register("l1_loss", F.l1_loss, gen_pointwise_loss, "reduce", 0.2)
register("smooth_l1_loss", F.smooth_l1_loss, gen_pointwise_loss, "reduce", 0.2)
register("bce_with_logits", F.binary_cross_entropy_with_logits, gen_pointwise_loss, "logsoftmax", 0.2)
register("cross_entropy", F.cross_entropy, gen_cross_entropy(False), "logsoftmax", 0.4)
register("nll_loss", F.nll_loss, gen_cross_entropy(True), "reduce", 0.2)


def gen_conv(nd):
    def gen(g):
        dt = g.dtype(floats=True)
        groups = g.r.choice([1, 1, 2])
        cin, cout = groups * g.r.randint(1, 2), groups * g.r.randint(1, 2)
        k = [g.r.randint(1, 3) for _ in range(nd)]
        x = [g.r.randint(1, 2), cin] + [g.r.randint(1, 6) for _ in range(nd)]
        if g.coin(0.2):
            x = x[1:]                                  # unbatched
        kw = {"stride": g.r.randint(1, 2), "padding": g.r.randint(0, 1), "dilation": g.r.randint(1, 2),
              "groups": groups}
        bias = g.new(dt, [cout]) if g.coin(0.5) else None
        return [g.new(dt, x), g.new(dt, [cout, cin // groups] + k), bias], kw
    return gen


def gen_pool(nd):
    def gen(g):
        x = g.pick(lambda t: t.dim() in (nd + 1, nd + 2) and is_float(t) and all(s > 0 for s in t.shape))
        if x is None:
            return None
        t = g.t(x)
        k = g.r.randint(1, min(min(t.shape[-nd:]), 3))
        return [ref(x), k], {"stride": g.r.randint(1, 2), "kind": g.r.choice(["max", "avg"]), "nd": nd}
    return gen


def pool(x, k, stride, kind, nd):
    fn = {("max", 1): F.max_pool1d, ("avg", 1): F.avg_pool1d, ("max", 2): F.max_pool2d, ("avg", 2): F.avg_pool2d}
    return fn[kind, nd](x, k, stride)


def gen_sdpa(g):
    dt = g.dtype(floats=True)
    b, h, L, S, e = g.r.randint(1, 2), g.r.randint(1, 2), g.size(), g.r.randint(1, 5), g.r.randint(1, 4)
    ev = e if g.coin(0.7) else g.r.randint(1, 4)
    # no NaN/Inf: the CPU's math path multiplies masked-out values by 0 (inf * 0 = nan), a
    # flash kernel never reads them
    args = [g.new(dt, [b, h, L, e], specials=False), g.new(dt, [b, h, S, e], specials=False),
            g.new(dt, [b, h, S, ev], specials=False)]
    kw = {}
    choice = g.r.choice(["none", "causal", "bool", "float"])
    if choice == "causal":
        kw["is_causal"] = True
    elif choice == "bool":
        kw["attn_mask"] = g.new("bool", g.bshape([L, S]), layout=False)
    elif choice == "float":
        kw["attn_mask"] = g.new(dt, g.bshape([L, S]), specials=False)
    if g.coin(0.2):
        kw["scale"] = 0.5
    return args, kw


register("conv1d", F.conv1d, gen_conv(1), "mm", 0.3)
register("conv2d", F.conv2d, gen_conv(2), "mm", 0.3)
register("pool1d", pool, gen_pool(1), "reduce", 0.3)
register("pool2d", pool, gen_pool(2), "reduce", 0.3)
register("sdpa", F.scaled_dot_product_attention, gen_sdpa, "attn", 0.4)


# --- generation ----------------------------------------------------------------------------------------

def generate_input(g):
    dt = g.dtype()
    return g.new(dt, g.shape(), "auto", layout=True)["new"]


def choose_op(g, ops=None):
    """One op dict for the program so far, or None if none applies after a few tries."""
    names = ops or list(OPS)
    weights = [OPS[n].weight for n in names]
    for _ in range(20):
        name = g.r.choices(names, weights=weights)[0]
        got = OPS[name].gen(g)
        if got is not None:
            args, kw = got
            return {"op": name, "args": args, "kw": kw}
    return None


# --- execution and comparison -------------------------------------------------------------------------

class Mismatch(Exception):
    pass


@dataclass
class Outcome:
    executions: int = 0              # ops run on both sides
    failure: str = None              # what differs (None: the program passed)
    failed_op: int = None            # its index in spec["ops"] (-1: inputs, len: final state)
    notes: list = field(default_factory=list)
    raised: str = None               # the exception both sides raised, ending the program
    failed_name: str = None          # the failing op's name
    empty_operand: bool = False      # the failing op had a zero-size tensor operand


def resolve(a, env, device):
    """An op's JSON arguments as Python values: {"ref": id} a tensor of the program, {"new":
    spec} a new tensor on device, {"dtype_name": name}, {"mf": memory format}; {"literal": t} is
    a tensor itself (alternative_cpu_results' copies)."""
    if isinstance(a, dict):
        if "literal" in a:
            return a["literal"]
        if "ref" in a:
            return env[a["ref"]]
        if "new" in a:
            return make_tensor(a["new"], device)
        if "dtype_name" in a:
            return DTYPES[a["dtype_name"]]
        if "mf" in a:
            return torch.channels_last if a["mf"] == "channels_last" else torch.preserve_format
        return {k: resolve(v, env, device) for k, v in a.items()}
    if isinstance(a, list):
        return [resolve(v, env, device) for v in a]
    return a


def outputs(result):
    if isinstance(result, torch.Tensor):
        return [result]
    if isinstance(result, (tuple, list)) and all(isinstance(r, torch.Tensor) for r in result):
        return list(result)
    raise TypeError(f"op returned {type(result).__name__}")


def call(op, env, device):
    """The op's outputs on device and on the host, or the exception it raised (a neuron
    error may surface only at the synchronisation, in .cpu())."""
    entry = OPS[op["op"]]
    args = resolve(op["args"], env, device)
    kw = resolve(op["kw"], env, device)
    if entry.needs_device:
        kw["device"] = device
    try:
        outs = outputs(entry.fn(*args, **kw))
        return outs, ([o.cpu() for o in outs] if device != "cpu" else outs)
    except Exception as e:  # noqa: BLE001 - the exception is the outcome compared
        return e, None


def family(e):
    for f in (IndexError, ValueError, TypeError, RuntimeError):
        if isinstance(e, f):
            return f.__name__
    return type(e).__name__


def maxabs(tensors):
    m = 1.0
    for t in tensors:
        if isinstance(t, torch.Tensor) and t.numel() and t.dtype != torch.bool:
            f = t.detach().float().abs()
            f = f[f.isfinite()]
            if f.numel():
                m = max(m, f.max().item())
    return m


def flat_tensors(args):
    out = []
    for a in args:
        if isinstance(a, torch.Tensor):
            out.append(a)
        elif isinstance(a, (list, tuple)):
            out += flat_tensors(a)
        elif isinstance(a, dict):
            out += flat_tensors(list(a.values()))
    return out


def tolerance(mode, dtype, pre, n):
    """(rtol, atol) for one op's float result: the rounding of the result's dtype plus the
    float32 error of what the op accumulates (n terms of magnitude up to m)."""
    e, m = EPS[dtype], maxabs(pre)
    if mode in ("exact", "ew"):
        return e, E32
    if mode == "transc":
        return max(2 * e, 16 * E32), 16 * E32 * m
    if mode == "reduce":
        return 2 * e, 4 * E32 * n * m + e
    if mode == "fma":          # a + v * b * c: two or three roundings, products of magnitude m * m
        return 2 * e, 4 * E32 * m * m + e
    if mode == "accumulate":   # duplicate indices: the CPU adds in the tensor's own dtype, one by one
        return 2 * e, 4 * e * m + 4 * E32 * n * m
    if mode == "prod":         # the CPU rounds each partial product (in the half types too)
        return (2 + n) * e, 4 * E32 * n * m + E32
    if mode == "var":
        return 2 * e, 8 * E32 * n * m * m + e
    if mode == "std":
        return 2 * e, math.sqrt(8 * E32 * n) * m + e
    if mode == "mm":
        return 2 * e, 4 * E32 * n * m * m + e
    if mode in ("softmax", "logsoftmax", "attn"):
        return 4 * e, 16 * E32 * n * m + 4 * e * m
    if mode == "norm":
        return 4 * e, 64 * E32 * n * m + 8 * e * m
    return 2 * e, 16 * E32 * n * m


def bits_equal(c, d):
    if c.shape != d.shape or c.dtype != d.dtype:
        return False
    if c.is_floating_point():
        as_int = {torch.float32: torch.int32, torch.bfloat16: torch.int16, torch.float16: torch.int16}[c.dtype]
        return torch.equal(c.view(as_int), d.view(as_int))
    return torch.equal(c, d)


def values_close(c, d, mode, pre, n):
    """None if d (neuron, on the host) is c's value within the op's tolerance, else why not."""
    if bits_equal(c, d):
        return None
    if not c.is_floating_point():
        return "values differ" + diff_summary(c, d)
    rtol, atol = (0.0, 0.0) if mode == "exact" else tolerance(mode, c.dtype, pre, n)
    try:
        torch.testing.assert_close(d, c, rtol=rtol, atol=atol, equal_nan=True)
    except AssertionError as err:
        return (f"values differ (rtol {rtol:.2g}, atol {atol:.2g}): {str(err).splitlines()[0]}"
                + diff_summary(c, d, rtol, atol))
    return None


def diff_summary(c, d, rtol=0.0, atol=0.0):
    """The first few positions where d is not c (within rtol and atol), with both values."""
    if c.shape != d.shape:
        return ""
    if c.is_floating_point():
        bad = ~torch.isclose(d.double(), c.double(), rtol=rtol, atol=atol, equal_nan=True)
    else:
        bad = c != d
    idx = bad.nonzero()[:3].tolist()
    return "".join(f"{'; ' if k == 0 else ', '}at {tuple(i)}: neuron {d[tuple(i)].item()!r}, CPU {c[tuple(i)].item()!r}"
                   for k, i in enumerate(idx))


def strides_differ(c, d):
    """Strides matter only for dims of size > 1 and non-empty tensors."""
    if c.numel() == 0:
        return False
    return any(sc != sd for s, sc, sd in zip(c.shape, c.stride(), d.stride()) if s > 1)


def aliases(t, env):
    """The env ids whose storage t's storage is."""
    p = t.untyped_storage().data_ptr()
    return {i for i, e in env.items() if p and e.untyped_storage().data_ptr() == p}


# ops whose indices differ legitimately: compared through the values they pick
INDEX_DIM = {  # where an index-returning op takes its dim
    "median_dim": lambda op: op["args"][1],
}


def gather_along(x, dim, idx):
    """x's values at idx along dim (dim None: idx into the flattened x)."""
    if dim is None or x.dim() == 0:
        return x.flatten()[idx.flatten()].reshape(idx.shape)
    return x.gather(dim, idx if idx.dim() == x.dim() else idx.unsqueeze(dim))


def nan_equal(a, b):
    return a.shape == b.shape and bool(((a == b) | (a != a) & (b != b)).all())


def check_indices(op, pre, cpu, dev, notes):
    """The index output of argmax-like and sort-like ops. A stable sort defines every
    index; otherwise neuron's indices must pick the values the CPU's pick (ties, NaNs and
    unstable sorts may order equal values differently; topk(sorted=False) any order)."""
    name, kw = op["op"], op["kw"]
    c_idx, d_idx = cpu[-1], dev[-1]
    if bits_equal(c_idx, d_idx):
        return None
    if name in ("sort", "argsort") and kw.get("stable"):
        return "stable sort indices differ" + diff_summary(c_idx, d_idx)
    x = pre[0]
    dim = INDEX_DIM[name](op) if name in INDEX_DIM else kw.get("dim")
    try:
        got = gather_along(x, dim, d_idx)
        want = dev[0] if name == "topk" else gather_along(x, dim, c_idx)
    except (RuntimeError, IndexError) as e:
        return f"indices invalid: {e}" + diff_summary(c_idx, d_idx)
    if not nan_equal(got, want):
        return "indices pick other values" + diff_summary(want, got)
    if name in ("argmax", "argmin", "max_dim", "min_dim") and not (x.is_floating_point() and x.isnan().any()):
        notes.append(f"{name}: not the first of equal values")
    return None


def check_random(op, pre, cpu, dev):
    """Random ops: the properties of the distribution, not the values."""
    kind = op["args"][0]
    d = dev[0]
    if kind == "dropout":
        p = op["kw"].get("p", 0.5)
        x = pre[0]
        dropped = (d == 0) | d.isnan() & ~x.isfinite()          # NaN * 0 and Inf * 0 are NaN
        if p == 1:
            return None if dropped.all() else "dropout(p=1) left values"
        kept = torch.isclose(d.float(), (x / (1 - p)).float(), rtol=EPS[x.dtype], atol=0, equal_nan=True)
        return None if (kept | dropped).all() else "dropout values are neither 0 nor x/(1-p)"
    if kind in ("rand_like",):
        return None if ((d >= 0) & (d <= 1)).all() else "rand_like out of [0, 1]"
    if kind == "uniform_":
        return None if ((d >= -1) & (d <= 2)).all() else "uniform_ out of [-1, 2]"
    if kind in ("randn_like", "normal_"):
        return None if d.float().isfinite().all() else "normal values not finite"
    if kind == "bernoulli":
        p = pre[0]
        ok = ((d == 0) | (d == 1)) & ((p != 0) | (d == 0)) & ((p != 1) | (d == 1))
        return None if ok.all() else "bernoulli values not in {0, 1} or against p in {0, 1}"
    if kind == "randint_like":
        return None if ((d >= -3) & (d < 4)).all() else "randint_like out of range"
    if kind == "random_":
        return None if ((d >= 0) & (d < 5)).all() else "random_ out of [0, 5)"
    if kind == "randperm":
        return None if torch.equal(d.sort().values, torch.arange(len(d))) else "randperm is not a permutation"
    return None


def compare_structure(cpu, dev_outs, dev, cpu_env, dev_env):
    """Why the op's neuron outputs are not the CPU's outputs in kind: count, device, dtype,
    shape, which tensors of the program they alias, and a view's strides (a fresh output's
    layout is the kernel's choice: see relayout)."""
    if len(cpu) != len(dev):
        return f"{len(dev)} outputs, CPU {len(cpu)}"
    for k, (c, d_out, d) in enumerate(zip(cpu, dev_outs, dev)):
        where = f"output {k}: " if len(cpu) > 1 else ""
        if d_out.device.type != DEVICE:
            return f"{where}on {d_out.device}"
        if d.dtype != c.dtype or d.shape != c.shape:
            return f"{where}{d.dtype} {tuple(d.shape)}, CPU {c.dtype} {tuple(c.shape)}"
        cpu_aliases, dev_aliases = aliases(c, cpu_env), aliases(d_out, dev_env)
        if dev_aliases != cpu_aliases:
            return f"{where}aliases tensors {sorted(dev_aliases)} of the program, CPU {sorted(cpu_aliases)}"
        if cpu_aliases and c.numel() and (strides_differ(c, d_out) or c.storage_offset() != d_out.storage_offset()):
            return (f"{where}view strides {d_out.stride()} offset {d_out.storage_offset()}, "
                    f"CPU {c.stride()} offset {c.storage_offset()} (shape {tuple(c.shape)})")
    return None


def compare_values(op, pre, cpu, dev, notes):
    """Why the values of the op's neuron outputs (on the host) are not the CPU's, or None."""
    mode = OPS[op["op"]].mode
    n = max([t.numel() for t in pre] + [1])
    for k, (c, d) in enumerate(zip(cpu, dev)):
        is_index = (mode in ("sort", "index_pair") and k == len(cpu) - 1) or mode == "argindex"
        if mode == "random":
            why = check_random(op, pre, cpu, dev)
        elif is_index:
            why = check_indices(op, pre, cpu, dev, notes)
        elif op["op"] == "topk" and not op["kw"].get("sorted") and c.dim():
            dim = op["kw"]["dim"]
            why = values_close(c.sort(dim).values, d.sort(dim).values, "exact", pre, n)
        else:
            why = values_close(c, d, "exact" if mode in ("sort", "index_pair", "argindex") else mode, pre, n)
        if why:
            return (f"output {k}: " if len(cpu) > 1 else "") + why
    return None


def relayout(cpu, dev_outs, cpu_env, notes, name):
    """Fresh neuron outputs in the CPU's strides where they differ (noted): later ops whose
    behaviour depends on strides (view, contiguous) then behave alike on both sides."""
    for k, (c, d) in enumerate(zip(cpu, dev_outs)):
        if strides_differ(c, d) and not aliases(c, cpu_env):
            notes.append(f"{name}: a fresh output's strides differ from the CPU's")
            fresh = torch.empty_strided(c.shape, c.stride(), dtype=c.dtype, device=DEVICE)
            fresh.copy_(c)
            dev_outs[k] = fresh


# Other CPU results accepted for an op: var_mean's mean on the CPU comes from a Welford
# update that turns a single infinity into NaN (x - mean = inf - inf); torch.mean's is inf.
ALTERNATIVES = {
    "var_mean": lambda x, correction=1, **kw: (torch.var(x, correction=correction, **kw), torch.mean(x, **kw)),
}


def strided_copy(t):
    """t's values in a layout whose last dim has stride 2."""
    if t.dim() == 0:
        return t.clone()
    big = torch.zeros(*t.shape[:-1], 2 * t.shape[-1], dtype=t.dtype)
    big[..., ::2] = t
    return big[..., ::2]


def input_rewrites(op, pre, result_dtype):
    """Ways to rewrite an op's tensor inputs under which PyTorch's CPU result is as valid as
    the CPU's own (each a function of one tensor):
    - contiguous or strided: contiguous operands run through vectorised loops, strided ones
      through scalar loops, which differ for some edge values (gelu(inf), fmod of huge values);
    - 0-dim float operands converted to the result's type: the CPU reads a 0-dim operand as
      an unrounded scalar, a device (as CUDA) converts it (bf16 x // fp16 0-dim y:
      -10.25 // -0.568359375 is 18 on the CPU, 17 in bf16);
    - float16/bfloat16 in float32 (rounded once at the end): the CPU rounds some intermediates
      to the half type (prod accumulates in it, trunc(a / b) rounds a / b);
    - float64 (rounded once): neuron may be the more exact (layer_norm of a row of 3e38: the
      CPU's float32 variance overflows to NaN, the normalised value is 0);
    - a reduction's dtype= as documented, the input converted first (the CPU's mean of float16
      with dtype=bfloat16 does not: mean([-179.75, 32.53, 281, -82.94, 6.82]) is 11.5625 on the
      CPU, 11.25 = sum(dtype=bfloat16) / 5 on neuron)."""
    rewrites = [lambda t: t.clone().contiguous(), strided_copy]
    if any(t.dim() == 0 and t.is_floating_point() and t.dtype != result_dtype for t in pre) \
            and result_dtype.is_floating_point:
        rewrites.append(lambda t: t.to(result_dtype) if t.dim() == 0 and t.is_floating_point() else t.clone())
    if result_dtype in (torch.float16, torch.bfloat16):
        rewrites.append(lambda t: t.float() if t.dtype in (torch.float16, torch.bfloat16) else t.clone())
    if result_dtype.is_floating_point:
        rewrites.append(lambda t: t.double() if t.is_floating_point() else t.clone())
    if isinstance(op["kw"].get("dtype"), dict):
        dtype = DTYPES[op["kw"]["dtype"]["dtype_name"]]
        rewrites.append(lambda t: t.to(dtype) if t.is_floating_point() else t.clone())
    return rewrites


def alternative_cpu_results(op, pre, dev):
    """The op's other valid CPU results (input_rewrites, ALTERNATIVES), each output in the
    dtype of neuron's."""
    entry, calls = OPS[op["op"]], []
    if op["op"] in ALTERNATIVES:
        calls.append(lambda: ALTERNATIVES[op["op"]](*op["args"], **resolve(op["kw"], {}, "cpu")))
    for rewrite in input_rewrites(op, pre, dev[0].dtype):
        args = resolve(swap_tensors(op["args"], rewrite), {}, "cpu")
        kw = resolve(swap_tensors(op["kw"], rewrite), {}, "cpu")
        if entry.needs_device:
            kw["device"] = "cpu"
        calls.append(lambda args=args, kw=kw: entry.fn(*args, **kw))
    results = []
    for call_it in calls:
        try:
            outs = outputs(call_it())
        except Exception:  # noqa: BLE001 - a rewrite the op does not take
            continue
        results.append([o.to(d.dtype) if o.is_floating_point() and d.is_floating_point() else o
                        for o, d in zip(outs, dev)])
    return results


def swap_tensors(a, make):
    """a with every tensor reference replaced by a literal tensor from make(); used only on
    already resolved pre-op snapshots (see run_op)."""
    if isinstance(a, torch.Tensor):
        return {"literal": make(a)}
    if isinstance(a, list):
        return [swap_tensors(v, make) for v in a]
    if isinstance(a, dict):
        return {k: swap_tensors(v, make) for k, v in a.items()}
    return a


def snapshot(a, env):
    """The op's arguments with every tensor replaced by a CPU clone of its current value."""
    if isinstance(a, dict):
        if "ref" in a:
            return env[a["ref"]].clone()
        if "new" in a:
            return make_tensor(a["new"], "cpu")
        return {k: snapshot(v, env) for k, v in a.items()}
    if isinstance(a, list):
        return [snapshot(v, env) for v in a]
    return a


def resync(dev_outs, cpu):
    """Give neuron's outputs the CPU's exact bits: a tolerated difference must not grow in
    later ops. An output with internal overlap (an expanded view) is a view of a tensor
    already synchronised."""
    for d, c in zip(dev_outs, cpu):
        if d.numel() and not bits_equal(c, d.cpu()) and writable(d):
            with torch.no_grad():
                d.copy_(c)


def run_op(op, cpu_env, dev_env, outcome):
    """Runs one op on both sides and compares; returns the CPU outputs, or raises Mismatch,
    or returns None when both sides raised (ending the program)."""
    pre_args = snapshot(op["args"], cpu_env)
    pre = flat_tensors(pre_args) + flat_tensors(snapshot(op["kw"], cpu_env))
    outcome.empty_operand = any(t.numel() == 0 for t in pre)
    cpu, _ = call(op, cpu_env, "cpu")
    dev_outs, dev = call(op, dev_env, DEVICE)
    outcome.executions += 1
    if isinstance(cpu, Exception) or isinstance(dev_outs, Exception):
        if not isinstance(cpu, Exception):
            raise Mismatch(f"neuron raises {type(dev_outs).__name__}: {first_line(dev_outs)}; the CPU returns")
        if not isinstance(dev_outs, Exception):
            if cpu_limitation(cpu):
                outcome.notes.append(f"{op['op']}: neuron returns where the CPU has no kernel")
                outcome.raised = f"{type(cpu).__name__}: {first_line(cpu)}"
                return None
            raise Mismatch(f"the CPU raises {type(cpu).__name__}: {first_line(cpu)}; neuron returns")
        if family(cpu) != family(dev_outs):
            raise Mismatch(f"neuron raises {type(dev_outs).__name__}: {first_line(dev_outs)}; "
                           f"the CPU {type(cpu).__name__}: {first_line(cpu)}")
        if first_line(cpu) != first_line(dev_outs):
            outcome.notes.append(f"{op['op']}: messages differ")
        outcome.raised = f"{type(cpu).__name__}: {first_line(cpu)}"
        return None
    if op["op"] == "out=":
        restride_resized_out(cpu, dev_outs, outcome.notes)
    why = compare_structure(cpu, dev_outs, dev, cpu_env, dev_env)
    if why:
        raise Mismatch(why)
    why = compare_values(op, pre, cpu, dev, outcome.notes)
    if why and OPS[op["op"]].mode != "random" and matches_another_cpu_result(op, pre_args, pre, dev):
        outcome.notes.append(f"{op['op']}: neuron matches another valid CPU result")
        why = None
    if why:
        raise Mismatch(why)
    resync(dev_outs, cpu)
    relayout(cpu, dev_outs, cpu_env, outcome.notes, op["op"])
    return cpu, dev_outs


def matches_another_cpu_result(op, pre_args, pre, dev):
    for alt in alternative_cpu_results({**op, "args": pre_args}, pre, dev):
        if len(alt) == len(dev) and all(a.dtype == d.dtype and a.shape == d.shape for a, d in zip(alt, dev)) \
                and compare_values(op, pre, alt, dev, []) is None:
            return True
    return False


def restride_resized_out(cpu, dev_outs, notes):
    """An out= tensor that had to be resized takes the strides the op gives it, which
    PyTorch's CPU kernels choose from the inputs' layout: noted, and given the CPU's."""
    for c, d in zip(cpu, dev_outs):
        if d.shape == c.shape and (strides_differ(c, d) or c.storage_offset() != d.storage_offset()):
            notes.append("out=: the resized out's strides differ from the CPU's")
            d.as_strided_(c.shape, c.stride(), c.storage_offset())


def cpu_limitation(e):
    """A CPU error that is a limit of PyTorch's CPU kernels rather than of the op: a dtype
    without a CPU kernel, or a check the message says is the CPU's."""
    msg = str(e)
    return (isinstance(e, NotImplementedError) and "not implemented for" in msg) or "(CPU)" in msg


def first_line(e):
    return str(e).strip().split("\n")[0][:200]


def run(spec, choose=None, max_ops=None):
    """Replays spec (or, with choose, builds its ops one by one from the CPU values so far,
    appending them to spec["ops"]) on the CPU and on neuron. Returns an Outcome."""
    outcome = Outcome()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        envs = make_inputs(spec, outcome)
        if envs and run_ops(spec, envs, outcome, choose, max_ops):
            why = final_state_differs(*envs)
            if why:
                outcome.failure, outcome.failed_op = f"final state: {why}", len(spec["ops"])
    return outcome


def make_inputs(spec, outcome):
    """The inputs on the CPU and on neuron ({id: tensor} each), or None if they differ."""
    cpu_env, dev_env = {}, {}
    for i, tspec in enumerate(spec["inputs"]):
        cpu_env[i], dev_env[i] = make_tensor(tspec, "cpu"), make_tensor(tspec, DEVICE)
        host = dev_env[i].cpu()
        why = (compare_structure([cpu_env[i]], [dev_env[i]], [host], {}, {})
               or strides_differ(cpu_env[i], dev_env[i]) and "strides differ"
               or values_close(cpu_env[i], host, "exact", [], 1))
        if why:
            outcome.failure, outcome.failed_op = f"input {i}: {why}", -1
            return None
    return cpu_env, dev_env


def run_ops(spec, envs, outcome, choose, max_ops):
    """Runs the ops on both sides; True if all ran and compared equal, False if the
    program ended early (a failure, an error both raise, an accepted difference)."""
    cpu_env, dev_env = envs
    next_id = len(spec["inputs"])
    for j in range(max_ops if choose else len(spec["ops"])):
        op = choose(cpu_env) if choose else spec["ops"][j]
        if op is None:
            break
        if choose:
            spec["ops"].append(op)
            op["out"] = []
        try:
            got = run_op(op, cpu_env, dev_env, outcome)
        except Mismatch as m:
            legit = accepted(op["op"], str(m))
            if legit:
                outcome.notes.append(f"{op['op']}: {legit}")
                outcome.raised = legit
            else:
                outcome.failure, outcome.failed_op, outcome.failed_name = f"op {j} ({op['op']}): {m}", j, op["op"]
            return False
        except Exception as e:  # noqa: BLE001 - reported as a failure to look at, not a crash of the run
            outcome.failure, outcome.failed_op, outcome.failed_name = \
                f"op {j} ({op['op']}): the comparison itself failed: {e!r}", j, op["op"]
            return False
        if got is None:
            return False
        cpu, dev_outs = got
        if choose:
            op["out"] = list(range(next_id, next_id + len(cpu)))
            next_id += len(cpu)
        for i, c, d in zip(op.get("out", []), cpu, dev_outs):
            cpu_env[i], dev_env[i] = c, d
    return True


def final_state_differs(cpu_env, dev_env):
    """Every tensor of the program, after all ops, as on the CPU (in-place ops write through
    views into their bases)."""
    for i in cpu_env:
        c, d = cpu_env[i], dev_env[i]
        if c.shape != d.shape or strides_differ(c, d):
            return f"tensor {i}: shape {tuple(d.shape)} strides {d.stride()}, CPU {tuple(c.shape)} {c.stride()}"
        h = d.cpu()
        if not (bits_equal(c, h) or (c.is_floating_point() and torch.equal(c.isnan(), h.isnan())
                                     and torch.equal(c.nan_to_num(), h.nan_to_num()))):
            return f"tensor {i} differs" + diff_summary(c, h)
    return None


def generate(seed):
    """A random program from seed: its spec and its outcome (generated while it runs)."""
    rng = random.Random(seed)
    spec = {"seed": seed, "inputs": [], "ops": []}
    g = Gen(rng, {})
    for _ in range(rng.randint(1, 3)):
        spec["inputs"].append(generate_input(g))

    def choose(env):
        g.env = env
        return choose_op(g)
    return spec, run(spec, choose=choose, max_ops=rng.randint(1, 6))


# --- known differences (real neuron bugs, reported; strict xfails in the corpus) --------------------

@dataclass
class Difference:
    """A difference between neuron and the CPU that the fuzzer knows: the failing op is one of
    ops, the failure matches pattern (re.search) and, with empty set, an operand was (True)
    or was not (False) zero-size."""
    ops: tuple
    pattern: str
    reason: str
    empty: bool = None

    def matches(self, name, failure, empty=None):
        return ((name in self.ops or "*" in self.ops) and re.search(self.pattern, failure) is not None
                and (self.empty is None or empty is None or self.empty == empty))


# Real neuron bugs found and not yet fixed, each a strict xfail in diff_fuzz_corpus.jsonl (the
# fixed ones' cases stay there as regression cases). The bounded run counts them apart, so
# that it fails on new differences only. None is open now.
KNOWN_BUGS: dict = {}
# Differences that are not neuron bugs: noted, and the program ends there.
ACCEPTED = {
    "empty-matmul-dtypes": Difference(
        ("matmul", "mm", "bmm", "addmm", "baddbmm", "mv", "dot", "linear"),
        r"neuron raises RuntimeError: expected .* same dtype.*; the CPU returns",
        "neuron checks the operand dtypes of an empty matmul, the CPU returns an empty result"),
    "index-put-check-order": Difference(
        ("index_put_",), r"neuron raises RuntimeError: shape mismatch.*the CPU IndexError: index is out of bounds",
        "index_put_ with both out-of-range indices and values of the wrong shape: both raise, neuron for the "
        "shape first"),
    "sdpa-masked-inf": Difference(
        ("sdpa",), r"CPU nan",
        "scaled_dot_product_attention with an infinite value in a masked-out position: the CPU's math path "
        "multiplies it by 0 (NaN), neuron's flash kernel never reads it"),
    "out-resized-overlap": Difference(
        ("out=",), r"neuron raises RuntimeError: unsupported operation: (some|more than one) element.*; the CPU ret",
        "an out= that aliases an input and must be resized: neuron raises the overlap error, the CPU resizes "
        "the out (new memory) and returns"),
    "conv-padding-inf": Difference(
        ("conv1d", "conv2d"), r"CPU nan",
        "convolution with an infinite weight over zero padding: the CPU's own paths disagree (batch 1 takes "
        "its im2col path, which multiplies the padding: inf * 0 = NaN; batch 2 and up take oneDNN, which "
        "skips it, as cuDNN does); neuron always skips it (conv1d(ones(n, 1, 3), [[[-inf, 0, 0]]], "
        "padding=1)[0, 0, 0]: CPU nan for n = 1, 0 for n = 2; neuron 0)"),
    "index-error-type": Difference(
        ("index_select", "index", "nll_loss", "cross_entropy", "take", "embedding"),
        r"neuron raises RuntimeError: .*; the CPU IndexError",
        "an out-of-range index found by a device kernel is a RuntimeError naming the op (raised at the next "
        "synchronisation, or at once with NEURON_LAUNCH_BLOCKING=1), as CUDA's device-side assert is; the CPU "
        "checks on the host and raises IndexError"),
    "sdpa-mask-rank": Difference(
        ("sdpa",), r"the CPU (raises )?IndexError: Dimension (specified as|out of range)",
        "scaled_dot_product_attention with a 0-dim or 1-D attn_mask: the CPU's flash kernel reads its size(-2) "
        "and raises IndexError; PyTorch's math path (the reference every backend falls back to) broadcasts the "
        "mask, and neuron gives its result"),
    "empty-dim-check": Difference(("roll", "cat"), r"neuron raises IndexError: Dimension out of range.*the CPU returns",
                                 "neuron checks the dim of roll on an empty tensor, or of cat of 1-D empty "
                                 "tensors; the CPU returns early (cat skips legacy empty tensors)"),
}


def accepted(name, failure):
    for reason, d in ACCEPTED.items():
        if d.matches(name, failure):
            return d.reason
    return None


def known_bug(outcome):
    """The KNOWN_BUGS key of the outcome's failure, or None."""
    for key, d in KNOWN_BUGS.items():
        if outcome.failed_name and d.matches(outcome.failed_name, outcome.failure, outcome.empty_operand):
            return key
    return None


# --- minimising -----------------------------------------------------------------------------------------

def arg_dicts(spec):
    """Every dict among the ops' arguments, nested ones included."""
    found = []

    def walk(a):
        if isinstance(a, dict):
            found.append(a)
            for v in a.values():
                walk(v)
        elif isinstance(a, list):
            for v in a:
                walk(v)
    for op in spec["ops"]:
        walk(op["args"])
        walk(op["kw"])
    return found


def referenced(spec):
    return {a["ref"] for a in arg_dicts(spec) if "ref" in a}


def signature(spec, outcome):
    """What kind of failure an outcome is: where (the failing op's name, "inputs" or "final")
    and its known bug, if any."""
    if outcome.failure is None:
        return None
    j = outcome.failed_op
    where = spec["ops"][j]["op"] if 0 <= j < len(spec["ops"]) else ("inputs" if j < 0 else "final")
    return where, known_bug(outcome)


def fails_alike(spec, want):
    trial = json.loads(json.dumps(spec))
    return signature(trial, run(trial)) == want


def minimise(spec):
    """A smaller spec failing alike (the same op, the same known bug): later ops dropped,
    then each op whose outputs nothing uses, the inputs nothing uses, layouts made
    contiguous, NaN/Inf values left out."""
    spec = json.loads(json.dumps(spec))
    o = run(json.loads(json.dumps(spec)))
    if o.failure is None:
        return spec
    want = signature(spec, o)
    if 0 <= o.failed_op < len(spec["ops"]):
        spec["ops"] = spec["ops"][:o.failed_op + 1]
    keep_last = 0 <= o.failed_op
    changed = True
    while changed:
        changed = False
        for j in reversed(range(len(spec["ops"]) - (1 if keep_last else 0))):
            trial = json.loads(json.dumps(spec))
            removed = trial["ops"].pop(j)
            if not set(removed.get("out", [])) & referenced(trial) and fails_alike(trial, want):
                spec, changed = trial, True
    trial = drop_unused_inputs(spec)
    if fails_alike(trial, want):
        spec = trial
    for path in tensor_specs(spec):
        for key in ("layout", "specials"):
            if path.get(key):
                saved = path.pop(key)
                if not fails_alike(spec, want):
                    path[key] = saved
    return spec


def drop_unused_inputs(spec):
    """spec without the inputs no op uses, the tensor ids renumbered."""
    spec = json.loads(json.dumps(spec))
    used = referenced(spec)
    keep = [i for i in range(len(spec["inputs"])) if i in used]
    ids = {old: new for new, old in enumerate(keep)}
    next_id = len(keep)
    for op in spec["ops"]:
        for i in op.get("out", []):
            ids[i] = next_id
            next_id += 1

    def renumber(a):
        if isinstance(a, dict):
            return {k: (ids[v] if k == "ref" else renumber(v)) for k, v in a.items()}
        if isinstance(a, list):
            return [renumber(v) for v in a]
        return a
    spec["inputs"] = [spec["inputs"][i] for i in keep]
    for op in spec["ops"]:
        op["args"], op["kw"] = renumber(op["args"]), renumber(op["kw"])
        op["out"] = [ids[i] for i in op.get("out", [])]
    return spec


def tensor_specs(spec):
    return list(spec["inputs"]) + [a["new"] for a in arg_dicts(spec) if "new" in a]


# --- running many -------------------------------------------------------------------------------------

@dataclass
class Report:
    programs: int = 0
    executions: int = 0
    failures: list = field(default_factory=list)     # (spec, outcome)
    known: list = field(default_factory=list)        # (KNOWN_BUGS key, spec, outcome)
    notes: dict = field(default_factory=dict)
    raised: int = 0
    seconds: float = 0.0


def fuzz(seed, programs=None, seconds=None, on_case=None, on_failure=None):
    """Runs programs seed*10**6 + k, k = 0, 1, ... until programs ran or seconds passed."""
    report, start = Report(), time.monotonic()
    k = 0
    while (programs is None or k < programs) and (seconds is None or time.monotonic() - start < seconds):
        case_seed = seed * 10 ** 6 + k
        if on_case:
            on_case(case_seed)
        spec, outcome = generate(case_seed)
        report.programs += 1
        report.executions += outcome.executions
        report.raised += outcome.raised is not None
        for n in outcome.notes:
            report.notes[n] = report.notes.get(n, 0) + 1
        if outcome.failure:
            key = known_bug(outcome)
            if key:
                report.known.append((key, spec, outcome))
            else:
                report.failures.append((spec, outcome))
                if on_failure:
                    on_failure(spec, outcome)
        k += 1
    report.seconds = time.monotonic() - start
    return report


def case_line(spec, outcome):
    return json.dumps({"failure": outcome.failure, "spec": spec}, separators=(",", ":"))


def worker(args):
    """Fuzzes in this process, writing each program's seed to args.last_case first so that
    the supervisor can name the program that crashed or hung the process. Prints each
    failure as a JSON line; appends a summary line to args.summary."""
    def on_case(case_seed):
        with open(args.last_case, "w") as f:
            f.write(str(case_seed))

    def on_failure(spec, outcome):
        print("FAIL " + case_line(minimise(spec) if args.minimise else spec, outcome), flush=True)

    rep = fuzz(args.seed, seconds=args.seconds, programs=args.programs, on_case=on_case, on_failure=on_failure)
    known = {}
    for key, spec, _ in rep.known:
        known.setdefault(key, {"count": 0, "first_seed": spec["seed"]})["count"] += 1
    summary = {"seed": args.seed, "programs": rep.programs, "executions": rep.executions,
               "seconds": round(rep.seconds, 1), "mismatches": len(rep.failures), "known_bugs": known,
               "ended_by_an_error_both_raise": rep.raised,
               "notes": dict(sorted(rep.notes.items(), key=lambda kv: -kv[1]))}
    with open(args.summary, "a") as f:
        f.write(json.dumps(summary) + "\n")


def supervise(args):
    """Runs worker processes until args.seconds passed: a worker that dies (a crash) or stops
    making progress for 120 s (a hang) is reported with the program it was running (replay
    it with --case-seed), and a new worker continues with the next seed. Prints the totals."""
    deadline, seed = time.monotonic() + args.seconds, args.seed
    last, summary = f"/tmp/diff_fuzz_last_{os.getpid()}", f"/tmp/diff_fuzz_summary_{os.getpid()}"
    crashes = 0
    while time.monotonic() < deadline - 1:
        cmd = [sys.executable, __file__, "--worker", "--seed", str(seed), "--last-case", last, "--summary", summary,
               "--seconds", str(int(deadline - time.monotonic()))] + (["--minimise"] if args.minimise else []) \
            + (["--programs", str(args.programs)] if args.programs else [])
        proc = subprocess.Popen(cmd)
        while proc.poll() is None:
            time.sleep(1)
            if os.path.exists(last) and time.time() - os.path.getmtime(last) > 120:
                proc.kill()
                proc.wait()
                print(f"HANG in the program of --case-seed {open(last).read()}", flush=True)
                crashes += 1
        if proc.returncode not in (0, -9):
            print(f"CRASH (exit {proc.returncode}) in the program of --case-seed {open(last).read()}", flush=True)
            crashes += 1
        seed += 1
    runs = [json.loads(line) for line in open(summary)] if os.path.exists(summary) else []
    for r in runs:
        print(json.dumps(r), flush=True)
    total = {k: sum(r[k] for r in runs) for k in ("programs", "executions", "seconds", "mismatches")}
    print(json.dumps({"total": total, "crashes_and_hangs": crashes,
                      "programs_per_second": round(total["programs"] / max(total["seconds"], 1e-9), 1)}), flush=True)
    for path in (last, summary):
        if os.path.exists(path):
            os.remove(path)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=60)
    p.add_argument("--programs", type=int)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--minimise", action="store_true", help="print failures minimised")
    p.add_argument("--replay", help="a JSON line (a case or {'spec': ...}) or a .jsonl file")
    p.add_argument("--case-seed", type=int, help="generate, print and run the program of this seed")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--last-case", help=argparse.SUPPRESS)
    p.add_argument("--summary", help=argparse.SUPPRESS)
    args = p.parse_args()
    if not args.worker and not args.replay and args.case_seed is None:
        supervise(args)
        return
    import openneuron  # noqa: F401  (also autoloaded by torch)
    if args.replay:
        lines = open(args.replay).read().splitlines() if os.path.exists(args.replay) else [args.replay]
        for line in lines:
            case = json.loads(line)
            spec = case.get("spec", case)
            o = run(spec)
            print(json.dumps({"id": case.get("id"), "failure": o.failure, "notes": o.notes, "raised": o.raised}))
            if args.minimise and o.failure:
                print(json.dumps({"spec": minimise(spec)}, separators=(",", ":")))
        return
    if args.case_seed is not None:
        spec, o = generate(args.case_seed)
        print(json.dumps(spec))
        print(o)
        return
    worker(args)


if __name__ == "__main__":
    main()
