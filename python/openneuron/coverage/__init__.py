"""Architecture coverage: does each Hugging Face architecture run unchanged on neuron?

`python -m openneuron.coverage` builds a tiny random model for every architecture in the
installed Transformers' mappings, runs greedy `generate` on the CPU and on neuron, and
classifies each: pass / pass-with-fallback / mismatch / error. See docs/model-coverage.md.
"""
