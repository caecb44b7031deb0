"""What `make bench-quick` and `make bench` measure, and how long they may take.

Repetition counts adapt to the time each row's calls take (see timing.RepetitionPolicy):
between min_reps and max_reps interleaved repetitions, aiming at budget_s of timed work per
row; a row that runs late stops at min_reps. The budgets are what keeps the full suite
under 30 minutes on a 2-core machine, Inductor's compile time included.
"""

from __future__ import annotations

from dataclasses import dataclass, field

ALL_MODELS = ["gpt2", "llama", "minilm", "vit", "resnet", "whisper", "unet"]

# Relative share of the model budget each model gets (its workloads, compile included).
MODEL_WEIGHT = {"gpt2": 3.0, "llama": 3.0, "minilm": 1.0, "vit": 1.5, "resnet": 2.0,
                "whisper": 2.0, "unet": 1.5}


@dataclass(frozen=True)
class Profile:
    name: str
    total_budget_s: float
    models: list[str]
    dtypes: list[str]
    model_policy: dict = field(default_factory=dict)  # RepetitionPolicy fields
    ops_dtypes: str = "float32"
    # Per-row ratios on a shared 2-core host swing 0.6-2x between repetitions (other
    # tenants' cache and memory traffic): 15 keep the median of a row at parity steady.
    ops_reps: int = 15
    dispatch_calls: int = 10_000
    dispatch_rounds: int = 7
    compile_workloads: list[str] = field(default_factory=list)
    collective_reps: int = 5
    collective_max_mib: int = 64


QUICK = Profile(
    name="quick",
    total_budget_s=285,
    models=["gpt2", "llama"],
    dtypes=["float32"],
    model_policy={"warmup": 1, "min_reps": 3, "max_reps": 5, "budget_s": 6.0},
    ops_reps=3,
    dispatch_calls=5_000,
    dispatch_rounds=5,
    compile_workloads=[],  # a cold Inductor compile alone takes a minute here: full only
    collective_reps=3,
    collective_max_mib=16,
)

FULL = Profile(
    name="full",
    total_budget_s=1740,
    models=ALL_MODELS,
    dtypes=["float32", "bfloat16"],
    model_policy={"warmup": 1, "min_reps": 3, "max_reps": 7, "budget_s": 10.0},
    ops_dtypes="float32,bfloat16",
    compile_workloads=["gpt2/forward b1 s128", "llama/train step b4 s128 AdamW"],
    collective_reps=5,
)

PROFILES = {p.name: p for p in (QUICK, FULL)}


def describe_repetitions(p: Profile) -> str:
    mp = p.model_policy
    return (f"models: first call timed apart, {mp['warmup']} more warm-up call(s), then "
            f"{mp['min_reps']}–{mp['max_reps']} interleaved repetitions (about "
            f"{mp['budget_s']:.0f} s of timed work per row; late rows stop at the minimum); "
            f"ops: {p.ops_reps} repetitions of ≥ 30 ms samples (sized from the fastest of up to three "
            f"timed batches), each after 20 ms idle (PyTorch's "
            f"OpenMP workers spin ~10 ms after each op: the next column must not share cores with "
            f"them); dispatch: {p.dispatch_rounds} "
            f"rounds of {p.dispatch_calls} calls; collectives: {p.collective_reps} repetitions "
            "per size")
