"""OpenNeuron's benchmark suite: every figure is a ratio against a reference measured in
the same run (CPU eager, Inductor on the CPU, Gloo). Entry point: `python -m benchmarks.run`
(or `make bench` / `make bench-quick`); the report is docs/BENCHMARKS.md."""
