"""Op microbenchmarks by family, neuron eager against CPU eager (child process).

Each op runs on identical inputs on both devices, interleaved; fast ops repeat inside a
sample so the timer measures the op, not the clock. A separate call records whether the
op ran natively or fell back to the CPU.

    python -m benchmarks.ops --dtypes float32 --out ops.json
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Callable

import torch
import torch.nn.functional as F

from .columns import synchronize
from .timing import RepetitionPolicy, describe, measure
from .workloads import to_device

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}

# family -> op name -> (inputs(dtype) on CPU, fn(*inputs)). Sizes: ~0.1-10 ms on one core.
OpSpec = tuple[Callable[[torch.dtype], list], Callable[..., object]]


def _r(*shape):
    return lambda dt: [torch.randn(*shape).to(dt)]


def _rr(a, b):
    return lambda dt: [torch.randn(*a).to(dt), torch.randn(*b).to(dt)]


def _adamw_inputs(dt):
    params = [torch.randn(1024, 1024).to(dt) for _ in range(4)]
    return [params, [torch.randn_like(p) for p in params], [torch.zeros_like(p) for p in params],
            [torch.zeros_like(p) for p in params]]


def _adamw(params, grads, exp_avg, exp_avg_sq):
    steps = [torch.tensor(1.0, device=params[0].device) for _ in params]
    torch.optim._functional.adamw(params, grads, exp_avg, exp_avg_sq, [], steps, foreach=True,
                                  amsgrad=False, beta1=0.9, beta2=0.999, lr=1e-3,
                                  weight_decay=0.01, eps=1e-8, maximize=False)


def _sdpa_fwd_bwd(q, k, v):
    q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.autograd.backward(out, torch.ones_like(out))


def _rnn_inputs(kind: str):
    def make(dt):
        module = getattr(torch.nn, kind)(256, 256)
        return [torch.randn(128, 16, 256).to(dt), *[p.detach().to(dt) for p in module.parameters()]]
    return make


def _rnn(kind: str, backward: bool):
    """One layer over sequence 128, batch 16, hidden 256 (torch._VF, as nn.LSTM/nn.GRU call it)."""
    def run(x, *weights):
        if backward:
            weights = [w.detach().requires_grad_() for w in weights]
        h = x.new_zeros(1, x.size(1), 256)
        args = ((h, h) if kind == "LSTM" else h, list(weights), True, 1, 0.0, backward, False,
                False)
        out = (torch._VF.lstm if kind == "LSTM" else torch._VF.gru)(x, *args)[0]
        if backward:
            out.sum().backward()
        return out
    return run


FAMILIES: dict[str, dict[str, OpSpec]] = {
    "elementwise": {
        "add 1M": (_rr((1024, 1024), (1024, 1024)), torch.add),
        "mul 1M": (_rr((1024, 1024), (1024, 1024)), torch.mul),
        "gelu 1M": (_r(1024, 1024), F.gelu),
        "exp 1M": (_r(1024, 1024), torch.exp),
        "add broadcast 1M": (_rr((1024, 1024), (1024,)), torch.add),
    },
    "activation": {
        "softplus 1M": (_r(1024, 1024), F.softplus),
        "mish 1M": (_r(1024, 1024), F.mish),
        "hardswish 1M": (_r(1024, 1024), F.hardswish),
        "elu 1M": (_r(1024, 1024), F.elu),
        "leaky_relu 1M": (_r(1024, 1024), F.leaky_relu),
        "logsigmoid 1M": (_r(1024, 1024), F.logsigmoid),
        "log1p 1M": (lambda dt: [torch.rand(1024, 1024).to(dt)], torch.log1p),
        "tan 1M": (_r(1024, 1024), torch.tan),
        "mish_backward 1M": (_rr((1024, 1024), (1024, 1024)), torch.ops.aten.mish_backward),
    },
    "reduction": {
        "sum dim -1 1M": (_r(1024, 1024), lambda x: x.sum(-1)),
        "softmax 1M": (_r(1024, 1024), lambda x: torch.softmax(x, -1)),
        "layer_norm 1024x1024": (_r(1024, 1024), lambda x: F.layer_norm(x, (1024,))),
    },
    "matmul": {
        "mm 512^3": (_rr((512, 512), (512, 512)), torch.mm),
        "bmm 16x128x64x128": (_rr((16, 128, 64), (16, 64, 128)), torch.bmm),
        "linear 1024x768->3072": (_rr((1024, 768), (3072, 768)), F.linear),
    },
    "attention": {
        "sdpa causal 4x8x256x64": (
            lambda dt: [torch.randn(4, 8, 256, 64).to(dt) for _ in range(3)],
            lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True)),
        "sdpa causal 1x8x1024x64": (
            lambda dt: [torch.randn(1, 8, 1024, 64).to(dt) for _ in range(3)],
            lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True)),
        "sdpa fwd+bwd causal 4x8x256x64": (
            lambda dt: [torch.randn(4, 8, 256, 64).to(dt) for _ in range(3)], _sdpa_fwd_bwd),
    },
    "convolution": {
        "conv2d 8x64x56x56 k3": (
            _rr((8, 64, 56, 56), (64, 64, 3, 3)), lambda x, w: F.conv2d(x, w, padding=1)),
    },
    "indexing": {
        "embedding 4096 of 32000x512": (
            lambda dt: [torch.randint(0, 32000, (4096,)), torch.randn(32000, 512).to(dt)],
            F.embedding),
        "gather 1M": (
            lambda dt: [torch.randn(1024, 1024).to(dt), torch.randint(0, 1024, (1024, 1024))],
            lambda x, i: torch.gather(x, 1, i)),
    },
    "normalization": {
        "group_norm 8x64x56x56 g32": (_r(8, 64, 56, 56), lambda x: F.group_norm(x, 32)),
        "batch_norm train 8x64x56x56": (
            _r(8, 64, 56, 56), lambda x: F.batch_norm(x, None, None, training=True)),
    },
    "pooling and upsampling": {
        "max_pool2d 8x64x56x56 k3s2": (_r(8, 64, 56, 56),
                                       lambda x: F.max_pool2d(x, 3, 2, padding=1)),
        "upsample bilinear x2 8x64x56x56": (
            _r(8, 64, 56, 56),
            lambda x: F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False)),
    },
    "data movement": {
        "cat 2x1M dim 0": (_rr((1024, 1024), (1024, 1024)), lambda a, b: torch.cat([a, b])),
        "flip 1M": (_r(1024, 1024), lambda x: torch.flip(x, [1])),
        "triu 1024x1024": (_r(1024, 1024), torch.triu),
        "transpose contiguous 1M": (_r(1024, 1024), lambda x: x.t().contiguous()),
    },
    "loss": {
        "smooth_l1 1M": (_rr((1024, 1024), (1024, 1024)), F.smooth_l1_loss),
        "mse 1M": (_rr((1024, 1024), (1024, 1024)), F.mse_loss),
        "cross_entropy 4096x1000": (
            lambda dt: [torch.randn(4096, 1000).to(dt), torch.randint(0, 1000, (4096,))],
            F.cross_entropy),
    },
    "rnn": {
        "LSTM seq128 h256 b16": (_rnn_inputs("LSTM"), _rnn("LSTM", False)),
        "LSTM fwd+bwd seq128 h256 b16": (_rnn_inputs("LSTM"), _rnn("LSTM", True)),
        "GRU seq128 h256 b16": (_rnn_inputs("GRU"), _rnn("GRU", False)),
    },
    "random": {
        "dropout 1M": (_r(1024, 1024), lambda x: F.dropout(x, 0.1, training=True)),
    },
    "optimizer": {
        "AdamW foreach 4x1M": (_adamw_inputs, _adamw),
    },
    "copy": {
        # CPU reference: the same bytes copied in host memory.
        "to device 16 MiB": (_r(4096, 1024), None),
        "to host 16 MiB": (_r(4096, 1024), None),
    },
}


def _copy_steps(name: str, x: torch.Tensor) -> tuple[Callable, Callable]:
    """(CPU reference, neuron) steps for the copy family."""
    if name.startswith("to device"):
        return (lambda: x.clone()), (lambda: x.to("neuron"))
    on_device = x.to("neuron")
    return (lambda: x.clone()), (lambda: on_device.to("cpu"))


def fell_back(step: Callable[[], object]) -> list[str]:
    import openneuron

    torch.neuron.synchronize()
    openneuron.reset_fallback_stats()
    step()
    torch.neuron.synchronize()
    return sorted(openneuron.fallback_stats())


def bench_op(family: str, name: str, spec: OpSpec, dtype: torch.dtype,
             policy: RepetitionPolicy) -> dict:
    row = {"family": family, "op": name, "dtype": str(dtype).removeprefix("torch.")}
    make_inputs, fn = spec
    try:
        torch.manual_seed(0)
        cpu_inputs = make_inputs(dtype)
        if fn is None:
            cpu_step, neuron_step = _copy_steps(name, cpu_inputs[0])
        else:
            neuron_inputs = to_device(cpu_inputs, "neuron")
            cpu_step = lambda: fn(*cpu_inputs)  # noqa: E731
            neuron_step = lambda: fn(*neuron_inputs)  # noqa: E731
    except Exception as exc:
        row["error"] = describe(exc)
        return row
    timings = measure({"cpu_eager": cpu_step, "neuron_eager": neuron_step},
                      {"cpu_eager": lambda: None, "neuron_eager": lambda: synchronize("neuron")},
                      policy)
    row["cells"] = {}
    for col, t in timings.items():
        cell = {"status": "error" if t.error else "ok", "samples_s": t.samples,
                "calls_per_sample": t.calls_per_sample}
        if t.error:
            cell["error"] = t.error
        row["cells"][col] = cell
    if not timings["neuron_eager"].error:
        try:
            row["cells"]["neuron_eager"]["fallbacks"] = fell_back(neuron_step)
        except Exception as exc:
            row["cells"]["neuron_eager"]["observation_error"] = describe(exc)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dtypes", default="float32")
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--out", required=True)
    ap.add_argument("--families", default="", help="comma-separated subset of FAMILIES")
    args = ap.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    policy = RepetitionPolicy(warmup=2, min_reps=args.reps, max_reps=args.reps, budget_s=0,
                              min_sample_s=0.03, settle_s=0.02)
    rows = []
    start = time.monotonic()
    for dtype_name in args.dtypes.split(","):
        for family, ops in FAMILIES.items():
            if args.families and family not in args.families.split(","):
                continue
            for name, spec in ops.items():
                rows.append(bench_op(family, name, spec, DTYPES[dtype_name], policy))
    with open(args.out, "w") as f:
        json.dump({"rows": rows, "seconds": round(time.monotonic() - start, 2)}, f)


if __name__ == "__main__":
    main()
