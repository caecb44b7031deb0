"""FP8 (float8_e4m3fn, float8_e5m2): a trn3 feature. On trn2 (the default profile) creating
an FP8 tensor fails with a clear error; on trn3 storage, conversion and torch._scaled_mm work
and equal the CPU's results. Each case runs in a fresh process: the platform profile is fixed
when the runtime starts."""

import textwrap

from conftest import run_python


def test_trn2_refuses_fp8_naming_the_platform_and_the_way_out():
    code = textwrap.dedent("""
        import torch
        for make in (lambda: torch.zeros(2, dtype=torch.float8_e4m3fn, device="neuron"),
                     lambda: torch.ones(2).to(torch.float8_e5m2).to("neuron"),
                     lambda: torch.ones(2, device="neuron").to(torch.float8_e4m3fn)):
            try:
                make()
                print("created")
            except TypeError as e:
                print("refused:", e)
        print("carries on:", (torch.ones(2, device="neuron") * 2).cpu().tolist())
    """)
    r = run_python(code, OPENNEURON_PLATFORM="trn2")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len([line for line in lines if line.startswith("refused:")]) == 3, r.stdout
    assert "trn3" in lines[0] and "OPENNEURON_PLATFORM=trn3" in lines[0], lines[0]
    assert lines[-1] == "carries on: [2.0, 2.0]"


def test_trn3_stores_converts_and_runs_scaled_mm_like_the_cpu():
    code = textwrap.dedent("""
        import torch
        torch.manual_seed(0)
        x = torch.randn(32, 64)
        for dt in (torch.float8_e4m3fn, torch.float8_e5m2):
            d = x.to("neuron").to(dt)
            assert d.dtype == dt and d.device.type == "neuron"
            assert torch.equal(d.cpu().float(), x.to(dt).float()), dt
            assert torch.equal(d.float().cpu(), x.to(dt).float()), dt
        a = torch.randn(16, 64).to(torch.float8_e4m3fn)
        b = torch.randn(32, 64).to(torch.float8_e4m3fn).t()
        sa, sb = torch.tensor(0.5), torch.tensor(2.0)
        ref = torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)
        out = torch._scaled_mm(a.to("neuron"), b.to("neuron"), scale_a=sa.to("neuron"),
                               scale_b=sb.to("neuron"), out_dtype=torch.bfloat16)
        assert out.device.type == "neuron" and out.dtype == torch.bfloat16
        torch.testing.assert_close(out.cpu(), ref)
        print("ok")
    """)
    r = run_python(code, OPENNEURON_PLATFORM="trn3")
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stdout + r.stderr
