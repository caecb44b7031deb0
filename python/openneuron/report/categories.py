"""Op categories for device time: a device program or kernel name ("Addmm", "Softmax",
"Add+Mul+Relu", "memcpy host-to-device", "graph[Mm,Add,...]") -> matmul, conv,
attention, elementwise, reduction, norm, copy, compiled graph or other."""

from __future__ import annotations

CATEGORIES = ("matmul", "conv", "attention", "elementwise", "reduction", "norm", "copy",
              "compiled graph", "other")

# Names of the compiler IR's ops (csrc/compiler/include/openneuron/compiler/graph.h),
# without a "Backward" suffix: backward kernels count with their forward.
_BY_NAME = {
    "matmul": {"Mm", "Addmm", "Bmm", "Matmul", "Linear", "Gemm"},
    "conv": {"Convolution", "ConvolutionBackwardInput", "ConvolutionBackwardWeight", "Conv"},
    "attention": {"Attention", "ScaledDotProductAttention", "Sdpa"},
    "norm": {"LayerNorm", "RmsNorm", "GroupNorm", "BatchNorm", "NormAll"},
    "reduction": {"Sum", "Mean", "Prod", "Amax", "Amin", "Var", "Std", "ArgMax", "ArgMin", "Cumsum",
                  "Cumprod", "Softmax", "LogSoftmax", "NllLoss", "Sort"},
    "copy": {"Copy", "Fill"},
    "elementwise": {
        "Neg", "Abs", "Exp", "Log", "Sqrt", "Rsqrt", "Reciprocal", "Sin", "Cos", "Tanh",
        "Sigmoid", "Relu", "Silu", "Erf", "Floor", "Ceil", "Round", "Sign", "LogicalNot",
        "Gelu", "Add", "Sub", "Mul", "Div", "Maximum", "Minimum", "Pow", "Remainder",
        "FloorDivide", "DivTrunc", "Atan2", "Eq", "Ne", "Lt", "Le", "Gt", "Ge",
        "LogicalAnd", "LogicalOr", "BitwiseAnd", "BitwiseOr", "BitwiseXor", "Where",
        "Addcmul", "Addcdiv", "Lerp", "Clamp", "Threshold", "Softplus", "Mish", "Hardswish",
        "Hardsigmoid", "LogSigmoid", "Elu", "LeakyRelu", "Hardtanh", "Exp2", "Expm1",
        "Log1p", "Log2", "Log10", "Trunc", "Frac", "Tan", "Asin", "Acos", "Atan", "Sinh",
        "Cosh", "Asinh", "Acosh", "Atanh", "IsInf", "IsFinite", "Fmod", "FusedElementwise",
        "PointwiseLoss", "Dropout", "FusedAdam", "FusedSgd",
    },
}
_CATEGORY_OF = {name: cat for cat, names in _BY_NAME.items() for name in names}


def category(name: str) -> str:
    if name.startswith("memcpy"):
        return "copy"
    if name.startswith("graph["):  # a whole compiled graph recorded as one program
        return "compiled graph"
    if "+" in name:  # a fused elementwise chain, "Add+Mul+Relu"
        parts = {category(p) for p in name.split("+")}
        return parts.pop() if len(parts) == 1 else "elementwise"
    base = name[: -len("Backward")] if name.endswith("Backward") else name
    return _CATEGORY_OF.get(base, _CATEGORY_OF.get(name, "other"))


def is_program(name: str) -> bool:
    """A multi-kernel program (a compiled graph) rather than one op's kernel."""
    return name.startswith("graph[")
