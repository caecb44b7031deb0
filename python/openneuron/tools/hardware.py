"""Documented Trainium figures, for projections only (never presented as measurements).

Source: AWS's public Trainium documentation, as collected in the project's notes
(shared/notes/torchneuron-behaviour.md, "Hardware figures"). Dense peaks per chip.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Chip:
    name: str
    bf16_tflops: float  # dense, per chip
    fp8_tflops: float  # dense, per chip
    hbm_tb_per_s: float  # per chip
    hbm_gib: float
    physical_cores: int
    logical_cores: int  # what the runtime exposes by default; one workload runs per core

    def peak_flops(self, precision: str) -> float:
        if precision == "bf16":
            return self.bf16_tflops * 1e12
        if precision == "fp8":
            return self.fp8_tflops * 1e12
        raise ValueError(f"no documented peak for precision {precision!r} (bf16, fp8)")


CHIPS = {
    # Trainium2: 8 NeuronCores, grouped two by two into 4 logical cores by default.
    "trainium2": Chip("Trainium2", bf16_tflops=667, fp8_tflops=1299, hbm_tb_per_s=2.9,
                      hbm_gib=96, physical_cores=8, logical_cores=4),
    # Trainium3: FP8 figure is MXFP8/MXFP4.
    "trainium3": Chip("Trainium3", bf16_tflops=671, fp8_tflops=2517, hbm_tb_per_s=4.9,
                      hbm_gib=144, physical_cores=8, logical_cores=8),
}
