"""OpenNeuron demo: the one-line change from "cpu" to "neuron".

Trains a small MLP and a 2-layer transformer on `neuron` and on the CPU from the same
initial weights, generates a few tokens with the transformer, trains the transformer again
under `torch.compile(backend="neuron")`, and reports losses, timings, compiles and the ops
that fell back to the CPU. Note: no `import openneuron` here:
`import torch` loads the backend.
"""

from __future__ import annotations

import copy
import time
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F


def time_steps(fn, steps: int, device: str) -> tuple[list[float], float]:
    fn()  # warm-up: first-call compilation and allocator growth
    if device == "neuron":
        torch.neuron.synchronize()
    start = time.perf_counter()
    losses = [fn() for _ in range(steps)]
    losses = [float(l) for l in losses]  # .item() synchronises
    return losses, time.perf_counter() - start


def mlp_training(device: str, model: nn.Module, data, steps: int):
    model = copy.deepcopy(model).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    x, y = data[0].to(device), data[1].to(device)

    def step():
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.detach()

    return time_steps(step, steps, device)


class TinyTransformer(nn.Module):
    def __init__(self, vocab=256, dim=128, heads=4, layers=2, seq=64):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(seq, dim)
        layer = nn.TransformerEncoderLayer(dim, heads, 4 * dim, dropout=0.0, batch_first=True,
                                           activation="gelu", norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(dim, vocab)

    def forward(self, idx):
        t = idx.shape[1]
        mask = nn.Transformer.generate_square_subsequent_mask(t, device=idx.device)
        h = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))
        return self.head(self.blocks(h, mask=mask, is_causal=True))


def transformer_training(device: str, model: nn.Module, tokens, steps: int,
                         compiled: bool = False):
    model = copy.deepcopy(model).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    idx = tokens.to(device)
    forward = torch.compile(model, backend="neuron") if compiled else model

    def step():
        opt.zero_grad()
        logits = forward(idx[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), idx[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        return loss.detach()

    losses, seconds = time_steps(step, steps, device)
    return model, losses, seconds


@torch.no_grad()
def generate(model: nn.Module, prompt, new_tokens: int) -> list[int]:
    model.eval()
    idx = prompt
    for _ in range(new_tokens):
        logits = model(idx)[:, -1]
        idx = torch.cat([idx, logits.argmax(-1, keepdim=True)], dim=1)
    return idx[0, prompt.shape[1]:].tolist()


def report_library_ops(calls: dict[str, int]) -> None:
    """Ops without a lowering of our own, run as PyTorch's CPU kernel on device memory."""
    print(f"  host library kernels: {sum(calls.values())} calls over {len(calls)} ops"
          + (f" ({', '.join(sorted(calls)[:6])})" if calls else ""))


def main() -> None:
    warnings.simplefilter("ignore")  # the fallback report below lists what the warnings say
    if not (hasattr(torch, "neuron") and torch.neuron.is_available()):
        raise SystemExit("the neuron device is not available: is OpenNeuron installed?")
    import openneuron  # only for the report's statistics, not needed to use the device

    props = torch.neuron.get_device_properties(0)
    print(f"device: {torch.accelerator.current_accelerator()} x{torch.neuron.device_count()} "
          f"- {props.name}, {props.total_memory / 2**30:.0f} GiB, threads={torch.get_num_threads()}")

    torch.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.GELU(),
                        nn.Linear(512, 10))
    data = (torch.randn(128, 256), torch.randint(0, 10, (128,)))
    steps = 20
    openneuron.reset_fallback_stats()
    openneuron.reset_library_stats()
    cpu_losses, cpu_s = mlp_training("cpu", mlp, data, steps)
    neu_losses, neu_s = mlp_training("neuron", mlp, data, steps)
    mlp_fallbacks = openneuron.fallback_stats()
    diff = max(abs(a - b) for a, b in zip(cpu_losses, neu_losses))
    print(f"\nMLP, {steps} SGD steps: loss {cpu_losses[0]:.4f} -> {neu_losses[-1]:.4f}, "
          f"max |loss_neuron - loss_cpu| = {diff:.2e}")
    print(f"  time per step: cpu {1e3 * cpu_s / steps:.2f} ms, neuron {1e3 * neu_s / steps:.2f} ms "
          f"(neuron/cpu = {neu_s / cpu_s:.2f})")
    print(f"  CPU fallbacks: {sum(mlp_fallbacks.values())} calls"
          + (f" ({', '.join(sorted(mlp_fallbacks))})" if mlp_fallbacks else ""))
    report_library_ops(openneuron.library_stats())

    torch.manual_seed(0)
    tf = TinyTransformer()
    tokens = torch.randint(0, 256, (8, 65))
    steps = 10
    openneuron.reset_fallback_stats()
    openneuron.reset_library_stats()
    cpu_model, cpu_losses, cpu_s = transformer_training("cpu", tf, tokens, steps)
    neu_model, neu_losses, neu_s = transformer_training("neuron", tf, tokens, steps)
    diff = max(abs(a - b) for a, b in zip(cpu_losses, neu_losses))
    print(f"\nTransformer (2 layers, dim 128), {steps} AdamW steps: loss {cpu_losses[0]:.4f} -> "
          f"{neu_losses[-1]:.4f}, max |loss_neuron - loss_cpu| = {diff:.2e}")
    print(f"  time per step: cpu {1e3 * cpu_s / steps:.2f} ms, neuron {1e3 * neu_s / steps:.2f} ms "
          f"(neuron/cpu = {neu_s / cpu_s:.2f})")
    prompt = tokens[:1, :8]
    t0 = time.perf_counter()
    cpu_tokens = generate(cpu_model, prompt, 16)
    t1 = time.perf_counter()
    neu_tokens = generate(neu_model, prompt.to("neuron"), 16)
    t2 = time.perf_counter()
    print(f"  greedy generation of 16 tokens: cpu {1e3 * (t1 - t0):.1f} ms, neuron "
          f"{1e3 * (t2 - t1):.1f} ms; same tokens: {cpu_tokens == neu_tokens}")
    fb = openneuron.fallback_stats()
    print(f"  CPU fallbacks: {sum(fb.values())} calls over {len(fb)} ops")
    for name, n in sorted(fb.items(), key=lambda kv: -kv[1])[:12]:
        print(f"    {name:<45} {n:>6}")
    report_library_ops(openneuron.library_stats())

    # The same training under torch.compile: Dynamo + AOTAutograd graphs on the same lowerings.
    torch.neuron.reset_dynamo_metrics()
    t0 = time.perf_counter()
    _, comp_losses, comp_s = transformer_training("neuron", tf, tokens, steps, compiled=True)
    total_s = time.perf_counter() - t0
    dyn = torch.neuron.get_dynamo_metrics()
    diff = max(abs(a - b) for a, b in zip(neu_losses, comp_losses))
    print(f"\nCompiled (torch.compile(backend='neuron')), same training: max |loss_compiled - "
          f"loss_eager| = {diff:.2e}")
    print(f"  time per step: {1e3 * comp_s / steps:.2f} ms (compiled/eager = {comp_s / neu_s:.2f}, "
          f"compiled/cpu = {comp_s / cpu_s:.2f}); first call incl. compiling "
          f"{total_s - comp_s:.2f} s")
    print(f"  graphs: {dyn['dynamo_graphs']} Dynamo, {dyn['forward_graphs']} forward + "
          f"{dyn['backward_graphs']} backward ({dyn['graph_ops']} ATen ops), "
          f"{dyn['compile_seconds']:.2f} s in the backend, {dyn['fallback_graphs']} with fallback ops")
    failures = "; ".join(dyn["capture_failures"]) or "none"
    print(f"  whole-graph programs: {dyn['whole_graph_programs']} ({dyn['recorded_launches']} eager "
          f"launches recorded into them), {dyn['whole_graph_calls']} calls as one program, "
          f"{dyn['op_by_op_calls']} op by op; not recorded: {failures}")

    cache = openneuron.compile_cache_stats()
    print(f"\nprogram cache: {cache['misses']} compilations ({1e3 * cache['compile_seconds']:.1f} ms "
          f"total), {cache['hits']} hits")
    print(f"memory: peak {torch.neuron.max_memory_allocated(0) / 2**20:.1f} MiB allocated, "
          f"{torch.neuron.memory_reserved(0) / 2**20:.1f} MiB reserved on neuron:0")



def distributed_demo() -> None:
    """DDP on 2 ranks with torchrun (examples/ddp_demo.py prints its own report)."""
    import os
    import subprocess
    import sys

    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ddp_demo.py")
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                           "--nproc_per_node=2", script], capture_output=True, text=True)
    print(proc.stdout.rstrip())
    if proc.returncode != 0:
        print(proc.stderr[-4000:])
        raise SystemExit(f"the 2-rank run failed (exit {proc.returncode})")


if __name__ == "__main__":
    main()
    distributed_demo()
