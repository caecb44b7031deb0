"""Matrix multiplication on neuron against the CPU: mm/addmm/bmm/linear, the float32 and
half-type GEMM layouts, addmm with beta=0, addr."""

import functools

import pytest
import torch
import torch.nn.functional as F

import helpers
from helpers import same_error
import openneuron
from conftest import run_python

pytestmark = pytest.mark.usefixtures("no_fallback")

# A NaN in either output fails the comparison (beta=0 must not let the output's NaN through).
same = functools.partial(helpers.same, equal_nan=False)


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-4), (torch.bfloat16, 2e-2)])
def test_matmul_family(neuron, dtype, tol):
    a, b, c = torch.randn(31, 64, dtype=dtype), torch.randn(64, 23, dtype=dtype), torch.randn(23, dtype=dtype)
    same(torch.mm, a, b, rtol=tol, atol=tol)
    same(lambda a, b: a.t().t() @ b.t().contiguous().t(), a, b, rtol=tol, atol=tol)
    same(lambda a, b, c: torch.addmm(c, a, b, beta=0.5, alpha=2.0), a, b, c, rtol=tol, atol=tol)
    same(lambda a, b: F.linear(a, b.t()), a, b, rtol=tol, atol=tol)
    x, y = torch.randn(3, 8, 16, dtype=dtype), torch.randn(3, 16, 5, dtype=dtype)
    same(torch.bmm, x, y, rtol=tol, atol=tol)


# Float32 GEMM goes to BLIS, split over the pool by batch, row blocks or column
# blocks; other layouts (and every layout on a CPU BLIS does not know) go to oneDNN.
# Sizes are above BLIS's split threshold.
GEMM_LAYOUTS = [
    ("rows", lambda a, b: a[:96, :130] @ b[:130, :200]),
    ("columns", lambda a, b: a[:40, :80] @ b[:80, :1000]),
    ("transposed", lambda a, b: a[:130, :96].t() @ b[:200, :130].t()),
    ("strided rows", lambda a, b: a[::2, :130] @ b[:130, ::1][:, :300]),
    ("general strides", lambda a, b: a[::2, ::2][:64, :130] @ b[::2, ::3][:130, :200]),
    ("vector", lambda a, b: a[:1, :300] @ b[:300, :700]),
    ("column", lambda a, b: a[:600, :300] @ b[:300, :1]),
    ("batch 1", lambda a, b: a[:128, :256].unsqueeze(0) @ b[:256, :128].unsqueeze(0)),
    ("batch", lambda a, b: a[:192, :64].reshape(3, 64, 64) @ b[:192, :100].reshape(3, 64, 100)),
    ("broadcast batch", lambda a, b: torch.bmm(a[:256, :64].reshape(4, 64, 64),
                                               b[:64, :200].expand(4, 64, 200))),
    ("addmm", lambda a, b: torch.addmm(b[:96, :200], a[:96, :130], b[:130, :200], beta=0.5, alpha=-2.0)),
    ("baddbmm", lambda a, b: torch.baddbmm(b[:64, :100].expand(3, 64, 100), a[:192, :64].reshape(3, 64, 64),
                                           b[:192, :100].reshape(3, 64, 100), beta=1.5, alpha=0.25)),
    # Dense but not row-major: a linear layer's transposed weight, a permuted batch.
    ("linear weight", lambda a, b: a[:64, :130] @ b.reshape(-1)[:200 * 130].reshape(200, 130).t()),
    ("permuted batch", lambda a, b: a[:192, :64].reshape(64, 3, 64).permute(1, 0, 2)
     @ b.reshape(-1)[:3 * 64 * 50].reshape(64, 3, 50).transpose(0, 1)),
    # Above 16 MFLOP oneDNN's problems are cut into one part per pool thread: by batch,
    # else by rows or columns (columns at multiples of 16).
    ("split rows", lambda a, b: a[:512, :300] @ b[:300, :200]),
    ("split columns", lambda a, b: a[:40, :300] @ b[:300, :1000]),
    ("split batch", lambda a, b: a[:512, :128].reshape(4, 128, 128) @ b[:512, :256].reshape(4, 128, 256)),
    ("split broadcast batch", lambda a, b: torch.bmm(a[:512, :128].reshape(4, 128, 128),
                                                     b[:128, :300].expand(4, 128, 300))),
    ("split strided addmm", lambda a, b: torch.addmm(b[:300, :600], a[::2, :200][:300], b[:200, :600],
                                                     beta=0.5, alpha=-2.0)),
]


@pytest.mark.parametrize("name,fn", GEMM_LAYOUTS)
def test_float32_gemm_layouts_match_cpu(neuron, name, fn):
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(1200, 1200, generator=g), torch.randn(1200, 1200, generator=g)
    same(fn, a, b, rtol=1e-4, atol=1e-4)


# Half types: oneDNN's half matmul where the host has one, else the float32 engine on
# converted operands (a dense operand converted in its own memory order), rounded once.
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("name,fn", GEMM_LAYOUTS)
def test_half_gemm_layouts_match_cpu(neuron, dtype, name, fn):
    g = torch.Generator().manual_seed(0)
    a, b = (torch.randn(1200, 1200, generator=g).to(dtype) for _ in range(2))
    same(fn, a, b, rtol=2e-2, atol=1e-1)


INF_TIMES_ZERO = """
import torch
def strided(t):  # on the device, every element 3 apart along the rows
    return torch.zeros(t.shape[0], 3 * t.shape[1], dtype=t.dtype, device="neuron")[:, ::3].copy_(t)
def gapped(t):  # on the device, a gap after each row
    return torch.zeros(t.shape[0], t.shape[1] + 1, dtype=t.dtype, device="neuron")[:, :-1].copy_(t)
for dt in (torch.float32, torch.bfloat16, torch.float16):
    for k in (1, 3, 5, 33):
        for n in (3, 4, 9):
            for zero in (True, False):  # inf * 0 = NaN; inf * x = inf
                a, b = torch.randn(3, k).to(dt), torch.randn(k, n).to(dt)
                a[2, k - 1] = float("inf")
                b[k - 1] = 0 if zero else b[k - 1].abs() + 1
                want = (a.float() @ b.float()).to(dt)
                for a_, b_ in ((a.to("neuron"), b.to("neuron")),
                               (a.t().contiguous().to("neuron").t(), b.to("neuron")),
                               (strided(a), b.to("neuron")), (a.to("neuron"), strided(b)),
                               (gapped(a), b.to("neuron")), (a.to("neuron"), gapped(b))):
                    got = (a_ @ b_).cpu()
                    assert torch.equal(got.isnan(), want.isnan()), (dt, k, n, a_.stride(), b_.stride(), got, want)
                    c = torch.ones(3, n, dtype=dt, device="neuron")
                    got = torch.addmm(c, a_, b_, beta=1, alpha=2).cpu()  # scaled, summed into C
                    assert torch.equal(got.isnan(), want.isnan()), (dt, k, n, "addmm", a_.stride(), got, want)
                # a gap between the matrices of a batch
                a3 = torch.zeros(4, 3, k, dtype=dt, device="neuron")[::2].copy_(a.expand(2, 3, k))
                got = torch.bmm(a3, b.expand(2, k, n).contiguous().to("neuron")).cpu()
                assert torch.equal(got[1].isnan(), want.isnan()), (dt, k, n, "batch gap", got, want)
print("ok")
"""


def cpu_flags():
    with open("/proc/cpuinfo") as f:
        return set(next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), []))


# Other hosts' kernels, simulated by capping oneDNN's ISA or picking BLIS's kernel family
# (BLIS 0.9 ids: 3 haswell, 6 zen3). oneDNN emulates bf16 on AVX-512 hosts without
# AVX512_BF16 and padded an odd K with zeros; BLIS's AVX2 small-matrix kernels skipped
# a zero of B in an odd-width edge. Either turned inf * 0 = NaN into inf or a number. With
# an odd K, oneDNN's bf16 matmul turned inf * x into NaN when the inf was the last of K
# (operands with strides or gaps, or column-major with alpha and beta).
@pytest.mark.parametrize("env", [{}, {"DNNL_MAX_CPU_ISA": "AVX512_CORE_VNNI"}, {"DNNL_MAX_CPU_ISA": "AVX512_CORE"},
                                 {"BLIS_ARCH_TYPE": "3"}, {"BLIS_ARCH_TYPE": "6"}], ids=str)
def test_inf_times_zero_is_nan_with_every_host_kernels(env):
    if "BLIS_ARCH_TYPE" in env and not {"avx2", "fma"} <= cpu_flags():
        pytest.skip("BLIS's AVX2 kernels need an AVX2 host")
    r = run_python(INF_TIMES_ZERO, **env)
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr[-3000:]


def test_float32_gemm_beta_zero_ignores_nan_output(neuron):
    # beta == 0 means C is not read: NaN in `input` or `out` must not leak through.
    a, b = torch.randn(200, 300), torch.randn(300, 250)
    nan = torch.full((200, 250), float("nan"))
    same(lambda c, a, b: torch.addmm(c, a, b, beta=0), nan, a, b, rtol=1e-4, atol=1e-4)
    out = torch.full((200, 250), float("nan"), device=neuron)
    torch.mm(a.to(neuron), b.to(neuron), out=out)
    torch.testing.assert_close(out.cpu(), a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_addr_rounds_like_cpu(neuron, dtype):
    # The CPU's addr computes beta*self + (alpha*vec1)*vec2 in the dtype with beta/alpha
    # rounded to it; where the two terms cancel, any other order is off by many bf16 ulps.
    g = torch.Generator().manual_seed(0)
    m = (torch.randn(5, 10, generator=g) * 5).to(dtype)
    v1, v2 = (torch.randn(5, generator=g) * 4).to(dtype), (torch.randn(10, generator=g) * 4).to(dtype)
    for beta, alpha in ((0.6, 0.2), (1, 1), (0, 0.3), (2.5, 1)):
        same(lambda a, b, c: torch.addr(a, b, c, beta=beta, alpha=alpha), m, v1, v2, rtol=0, atol=0)
        same(lambda a, b, c: torch.addr(a, b, c, beta=beta, alpha=alpha), m[0], v1, v2, rtol=0, atol=0)
    out = torch.empty(5, 10, dtype=dtype, device=neuron)
    torch.addr(m.to(neuron), v1.to(neuron), v2.to(neuron), beta=0.6, alpha=0.2, out=out)
    assert torch.equal(out.cpu(), torch.addr(m, v1, v2, beta=0.6, alpha=0.2))
    md = m.to(neuron)
    md.addr_(v1.to(neuron), v2.to(neuron), beta=0.6, alpha=0.2)
    assert torch.equal(md.cpu(), m.clone().addr_(v1, v2, beta=0.6, alpha=0.2))
    i = torch.randint(-5, 5, (5, 10), generator=g)
    same(lambda a, b, c: torch.addr(a, b, c, beta=2, alpha=3), i, i[:, 0], i[0], rtol=0, atol=0)


def test_matmul_into_an_out_of_another_dtype_raises_as_on_the_cpu(neuron):
    bf16_out = torch.empty(4, dtype=torch.bfloat16)
    same_error(lambda a, b, o: torch.mm(a, b, out=o), torch.randn(3, 2), torch.randn(2, 4), bf16_out)
    same_error(lambda a, b, o: torch.bmm(a, b, out=o), torch.randn(2, 3, 2), torch.randn(2, 2, 4), bf16_out)
    same_error(lambda c, a, b, o: torch.addmm(c, a, b, out=o), torch.randn(3, 4), torch.randn(3, 2),
               torch.randn(2, 4), bf16_out)
