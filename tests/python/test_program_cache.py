"""The eager program cache is bounded: a process that keeps seeing new shapes (a growing
sequence length) keeps only the most recently used programs, recompiles an evicted one
when it comes back, and gets the same results."""

import textwrap

from conftest import run_python

# Shapes 2..31 once each, shape 1 after every one of them (always recently used), then
# shape 2 again (long evicted when the cache is small).
LOOP = textwrap.dedent("""
    import torch, openneuron
    base = openneuron.compile_cache_stats()
    def run(n):
        x = torch.arange(n, dtype=torch.float32)
        got = (x.to("neuron") * 3 + 1).cpu()
        assert torch.equal(got, x * 3 + 1), n
    run(1)
    after_one = openneuron.compile_cache_stats()["misses"] - base["misses"]
    for n in range(2, 32):
        run(n)
        run(1)
    run(2)
    s = openneuron.compile_cache_stats()
    print("capacity", s["capacity"], "entries", s["entries"], "per_shape", after_one,
          "evictions", s["evictions"] - base["evictions"], "misses", s["misses"] - base["misses"])
""")


def stats(proc):
    assert proc.returncode == 0, proc.stderr
    words = proc.stdout.split()
    return {words[i]: int(words[i + 1]) for i in range(0, len(words), 2)}


def test_least_recently_used_programs_are_evicted():
    bounded = stats(run_python(LOOP, OPENNEURON_PROGRAM_CACHE_ENTRIES=8))
    unbounded = stats(run_python(LOOP, OPENNEURON_PROGRAM_CACHE_ENTRIES=""))
    k = unbounded["per_shape"]  # programs one shape compiles
    assert k >= 1 and unbounded["misses"] == 31 * k and unbounded["evictions"] == 0, unbounded
    assert bounded["capacity"] == 8 and bounded["entries"] == 8, bounded
    assert bounded["evictions"] >= 31 * k - 8, bounded
    # Shape 1, used after every other shape, was never evicted; shape 2 was, and came
    # back: exactly one shape's programs compiled twice.
    assert bounded["misses"] == unbounded["misses"] + k, (bounded, unbounded)


def test_a_bad_capacity_keeps_the_default_with_a_warning():
    proc = run_python(LOOP, OPENNEURON_PROGRAM_CACHE_ENTRIES="many")
    assert stats(proc)["capacity"] == 16384
    assert "OPENNEURON_PROGRAM_CACHE_ENTRIES='many' is not a positive integer" in proc.stderr, proc.stderr
