"""The eager program cache is bounded: a process that keeps seeing new shapes (a growing
sequence length) keeps only the most recently used programs, recompiles an evicted one
when it comes back, and gets the same results."""

import textwrap

from conftest import run_python

LOOP = textwrap.dedent("""
    import torch, openneuron
    base = openneuron.compile_cache_stats()
    for n in list(range(1, 31)) + [1]:  # 30 shapes, then the first again (evicted by then)
        x = torch.arange(n, dtype=torch.float32)
        got = (x.to("neuron") * 3 + 1).cpu()
        assert torch.equal(got, x * 3 + 1), n
    s = openneuron.compile_cache_stats()
    print("capacity", s["capacity"], "entries", s["entries"],
          "evictions", s["evictions"] - base["evictions"], "misses", s["misses"] - base["misses"])
""")


def stats(proc):
    assert proc.returncode == 0, proc.stderr
    words = proc.stdout.split()
    return {words[i]: int(words[i + 1]) for i in range(0, len(words), 2)}


def test_least_recently_used_programs_are_evicted():
    s = stats(run_python(LOOP, OPENNEURON_PROGRAM_CACHE_ENTRIES=8))
    assert s["capacity"] == 8
    assert s["entries"] == 8
    assert s["evictions"] >= 23, s  # at least one program per shape
    # With room for all, nothing is evicted; bounded, the first shape came back after
    # its programs were evicted and was compiled again.
    unbounded = stats(run_python(LOOP))
    assert unbounded["evictions"] == 0, unbounded
    assert s["misses"] > unbounded["misses"], (s, unbounded)


def test_a_bad_capacity_keeps_the_default_with_a_warning():
    proc = run_python(LOOP, OPENNEURON_PROGRAM_CACHE_ENTRIES="many")
    assert stats(proc)["capacity"] == 16384
    assert "OPENNEURON_PROGRAM_CACHE_ENTRIES='many' is not a positive integer" in proc.stderr, proc.stderr
