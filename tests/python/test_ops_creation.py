"""Creation, copies and views on neuron against the CPU: factories (zeros, full, arange),
host <-> device and device copies (transposed, strided, broadcast, conjugate), views, dtype
conversion, item()."""

import pytest
import torch

import openneuron
from helpers import same_error

pytestmark = pytest.mark.usefixtures("no_fallback")

X = torch.randn(17, 33)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int8, torch.int64, torch.bool])
@pytest.mark.parametrize("make", [
    lambda a: a.t(),  # 2-D transpose
    lambda a: a[:130].t(),  # sliced source, sides not a multiple of the tile
    lambda a: a.view(5, 52, 200).transpose(1, 2),  # batched
    lambda a: a.view(5, 52, 10, 20).permute(0, 2, 1, 3),  # heads permute, inner run kept
    lambda a: a.t()[3:150:2],  # strided rows
    lambda a: a[:, :1].expand(260, 140).t(),  # broadcast source
])
def test_transposed_copies_are_exact(neuron, dtype, make):
    # Sides above every dtype's tile (32-128 elements) exercise the tiled transposed copy.
    a = (torch.randn(260, 200) * 50).to(dtype)
    cpu = make(a).contiguous()
    dev = make(a.to("neuron")).contiguous()
    assert dev.is_contiguous()
    assert torch.equal(dev.cpu(), cpu)


def test_copies_views_and_dtype_conversion(neuron):
    d = X.to(neuron)
    assert torch.equal(d.cpu(), X)
    assert torch.equal(d.t().contiguous().cpu(), X.t().contiguous())
    assert torch.equal(d[2:5, 1:10:3].cpu(), X[2:5, 1:10:3])
    assert torch.equal(d.view(33, 17).cpu(), X.view(33, 17))
    assert torch.equal(d.unsqueeze(0).expand(2, 17, 33).cpu(), X.unsqueeze(0).expand(2, 17, 33))
    assert torch.equal(d.to(torch.bfloat16).cpu(), X.to(torch.bfloat16))
    assert torch.equal(d.to(torch.int32).cpu(), X.to(torch.int32))
    assert torch.equal(d.to("neuron:1").cpu(), X)
    e = torch.zeros(17, 33, device=neuron)
    e[:, 3] = 7.0
    expected = torch.zeros(17, 33)
    expected[:, 3] = 7.0
    assert torch.equal(e.cpu(), expected)
    d.t().copy_(torch.ones(33, 17))
    assert torch.equal(d.cpu(), torch.ones(17, 33))


def test_creation_ops(neuron):
    assert torch.equal(torch.zeros(3, 4, device=neuron).cpu(), torch.zeros(3, 4))
    assert torch.equal(torch.full((2, 2), 3.5, device=neuron).cpu(), torch.full((2, 2), 3.5))
    assert torch.equal(torch.arange(2, 11, 3, device=neuron).cpu(), torch.arange(2, 11, 3))
    assert torch.equal(torch.arange(0, 1, 0.25, device=neuron).cpu(), torch.arange(0, 1, 0.25))
    assert torch.ones(5, dtype=torch.int64, device=neuron).sum().item() == 5


def test_arange_integer_dtype_fractional_step_like_the_cpu(neuron):
    # ATen's checks and length: an int64 step that truncates to 0 raises ValueError; the
    # narrower integer types count the length from the real bounds and repeat start.
    for dt, args in [(torch.int32, (1.5, 5.5, 0.5)), (torch.int16, (0, 3, 0.5)),
                     (torch.uint8, (0, 3, 0.5)), (torch.int64, (0, 2.5, 1.2))]:
        assert torch.equal(torch.arange(*args, dtype=dt, device=neuron).cpu(),
                           torch.arange(*args, dtype=dt)), (dt, args)
    for dt, args, error in [(torch.int64, (0, 3, 0.5), ValueError), (torch.int64, (1.5, 5.5, 0.5), ValueError),
                            (torch.int32, (0, 3, -0.5), RuntimeError), (torch.float32, (0, 1, 0), RuntimeError)]:
        messages = []
        for device in ("cpu", neuron):
            with pytest.raises(error) as raised:
                torch.arange(*args, dtype=dt, device=device)
            messages.append(str(raised.value))
        assert messages[0] == messages[1], (dt, args, messages)


def test_item_and_scalars(neuron):
    assert torch.tensor(3.25, device=neuron).item() == 3.25
    assert torch.tensor(True, device=neuron).item() is True
    assert torch.tensor([7], dtype=torch.int32, device=neuron).item() == 7


def test_conjugate_views_copy_correctly(neuron):
    x = torch.randn(5, dtype=torch.complex64)
    d = x.to(neuron)
    torch.testing.assert_close(d.conj().cpu(), x.conj())
    torch.testing.assert_close(d.conj().resolve_conj().cpu(), x.conj().resolve_conj())
    y = torch.empty(5, dtype=torch.complex64, device=neuron)
    y.copy_(d.conj())
    torch.testing.assert_close(y.cpu(), x.conj())


_MATH_VIEWS = {
    "plain": lambda t: t,
    "neg": lambda t: t._neg_view(),
    "conj": lambda t: t.conj(),
    "neg_conj": lambda t: t.conj()._neg_view(),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.complex64])
@pytest.mark.parametrize("src_view", list(_MATH_VIEWS))
@pytest.mark.parametrize("dst_view", list(_MATH_VIEWS))
@pytest.mark.parametrize("transpose", [False, True])
def test_copies_between_math_views_honour_both_sides_bits(neuron, dtype, src_view, dst_view,
                                                          transpose):
    """Writing through a negative or conjugate view stores the negated/conjugated value; a
    source's bits are applied, for every layout (test_copy_transpose_math_view in PyTorch)."""
    torch.manual_seed(0)
    src = torch.randn(6, 5, dtype=dtype)
    results = []
    for device in ("cpu", neuron):
        s = _MATH_VIEWS[src_view](src.to(device))
        s = s.t() if transpose else s
        dst = torch.zeros(5 if transpose else 6, 5 if not transpose else 6, dtype=dtype,
                          device=device)
        _MATH_VIEWS[dst_view](dst).copy_(s)
        results.append(dst.cpu())
    assert torch.equal(results[1], results[0])


def test_a_neuron_source_into_a_cpu_math_view(neuron):
    src = torch.randn(4, 3, dtype=torch.complex64)
    dst = torch.zeros(4, 3, dtype=torch.complex64)
    dst.conj()._neg_view().copy_(src.to(neuron).t().contiguous().t())
    assert torch.equal(dst, -src.conj())


@pytest.mark.parametrize("view_dtype", [torch.float64, torch.complex128, torch.int64])
def test_float64_dtype_views_copy_bit_for_bit(neuron, view_dtype):
    """A float64 tensor on neuron is a dtype view of other data (float64 storage is
    float32): its copies move 8-byte values unchanged, for every layout."""
    base = torch.randn(4, 6, 8).permute(1, 0, 2)
    want = base.view(view_dtype)
    got = base.to(neuron).view(view_dtype)
    assert got.dtype == view_dtype and got.stride() == want.stride()
    assert torch.equal(got.cpu(), want)
    back = torch.zeros(6, 4, 8, device=neuron).view(view_dtype).transpose(0, 1)
    back.copy_(want.transpose(0, 1))
    assert torch.equal(back.cpu(), want.transpose(0, 1))


def test_conj_physical_in_place(neuron):
    x = torch.randn(7, dtype=torch.complex64)
    d = x.to(neuron)
    d.conj_physical_()
    assert torch.equal(d.cpu(), x.conj_physical())
    c = x.to(neuron).conj()
    c.conj_physical_()  # visible values conjugated, the lazy bit kept
    assert c.is_conj() and torch.equal(c.cpu(), x)


def test_bool_fills_take_any_nonzero_value_as_true(neuron):
    """nn.Transformer builds its causal-mask probe with torch.full(..., -inf, dtype=bool)."""
    for value in (float("-inf"), float("nan"), 1e20, 0.0, 0.5):
        want = torch.full((2, 3), value, dtype=torch.bool)
        assert torch.equal(torch.full((2, 3), value, dtype=torch.bool, device=neuron).cpu(), want)
    mask = torch.tensor([True, False, True])
    got = torch.zeros(3, dtype=torch.bool, device=neuron).masked_fill(mask.to(neuron), float("inf"))
    assert torch.equal(got.cpu(), mask)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int16, torch.int8, torch.uint8, torch.int64])
def test_float_to_int_conversion_of_out_of_range_values_is_the_cpus(neuron, dtype):
    """C++ leaves it undefined; the CPU's kernels give INT32_MIN (narrowed) for signed
    types below 64 bits and go through int64 for uint8: neuron gives the same."""
    big = torch.finfo(torch.float32).max
    v = torch.tensor([-big, -2.0, -1.5, -0.5, 0.0, 0.5, 1.5, 2.0, 3e9, -3e9, big])
    assert v.to(neuron).to(dtype).cpu().tolist() == v.to(dtype).tolist()


def test_cat_into_an_out_it_cannot_be_cast_to_is_a_type_error(neuron):
    same_error(lambda a, o: torch.cat([a, a], out=o), torch.ones(2, dtype=torch.bfloat16),
               torch.empty(4, dtype=torch.bool))


def test_cat_layouts_and_legacy_empty_inputs_as_the_cpu(neuron):
    # Channels-last inputs give a channels-last result (into a resized out= too); legacy
    # empty [0] tensors are skipped whatever the dim.
    x = torch.randn(4, 3, 8, 8).contiguous(memory_format=torch.channels_last)
    y = torch.randn(4, 3, 8, 8).contiguous(memory_format=torch.channels_last)
    for dim in range(4):
        cpu = torch.cat((x, y), dim=dim)
        dev = torch.cat((x.to(neuron), y.to(neuron)), dim=dim)
        assert dev.stride() == cpu.stride()
        assert torch.equal(dev.cpu(), cpu)
        out = torch.empty(0, device=neuron)
        assert torch.cat((x.to(neuron), y.to(neuron)), dim=dim, out=out).stride() == cpu.stride()
    mixed = torch.cat((x.to(neuron), y.to(neuron).contiguous()), dim=1)
    assert mixed.is_contiguous()
    empty = torch.randn(0)
    for ts in ((x[:, :1], empty), (empty, x[:, :1]), (empty, empty)):
        cpu = torch.cat(ts, dim=1)
        dev = torch.cat([t.to(neuron) for t in ts], dim=1)
        assert dev.shape == cpu.shape and torch.equal(dev.cpu(), cpu)


def test_arange_into_an_out_of_another_shape(neuron):
    # An out with the right number of elements keeps its shape and strides and takes the
    # values in its logical order; a wrong count warns as on the CPU and is resized.
    res = torch.rand(3, 3, 30, device=neuron).to(torch.int64).permute(2, 0, 1)
    torch.arange(0, 270, out=res)
    assert res.stride() == (1, 90, 30)
    assert torch.equal(res.flatten().cpu(), torch.arange(270))
    line = torch.zeros(1, 49, device=neuron)
    with pytest.warns(UserWarning, match="The out tensor will be resized"):
        torch.arange(-1, 1, 2.0 / 49, dtype=torch.float32, out=line)
    # Values within an ulp: the CPU's vector loop adds lanes to a float base.
    torch.testing.assert_close(line.cpu(), torch.arange(-1, 1, 2.0 / 49, dtype=torch.float32))


def test_roll_without_shifts_is_the_cpus_error(neuron):
    same_error(lambda t: t.roll(shifts=(), dims=()), torch.arange(4.0))
