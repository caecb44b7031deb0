// The elementwise fusion pass: a fused program must give the unfused program's
// results bit for bit, on chains, on every float dtype and layout, and on random
// graphs of views that write in place and overlap.
#include <cstring>
#include <random>

#include "test_util.h"

namespace {

using namespace ontest;

struct FuseRun {
  std::shared_ptr<const Program> program;
  std::string error;
};

FuseRun run_with(const Graph& g, std::vector<onrt_arg> args, bool fuse) {
  FuseRun r;
  r.program = compile(g, CompileOptions{fuse});
  std::vector<uint64_t> scratch;
  if (r.program->scratch_bytes > 0) {
    scratch.assign(r.program->scratch_bytes / 8 + 8, 0);
    onrt_arg a{};
    a.ptr = scratch.data();
    args.push_back(a);
  }
  EXPECT_EQ(static_cast<int32_t>(args.size()), r.program->num_args);
  run_on_host(*r.program, args.data(), static_cast<int32_t>(args.size()), &r.error);
  return r;
}

onrt_arg ptr(void* p) {
  onrt_arg a{};
  a.ptr = p;
  return a;
}

void fill_random(HostTensor& t, std::mt19937& rng) {
  std::uniform_real_distribution<double> u(-3.0, 3.0);
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, u(rng));
}

// silu(x) * y + alpha * z, then tanh, then gelu: one chain over a transposed x and
// a broadcast z. Every float dtype; the intermediates never reach memory.
TEST(Fuse, ChainIsOneInstructionAndBitEqual) {
  for (DType dt : {DType::Float32, DType::BFloat16, DType::Float16}) {
    std::mt19937 rng(7);
    const std::vector<int64_t> sizes = {6, 37};
    HostTensor x = HostTensor::make(dt, sizes, {1, 6});  // transposed
    HostTensor y = HostTensor::make(dt, sizes);
    HostTensor z = HostTensor::make(dt, sizes, {0, 1});  // broadcast rows
    fill_random(x, rng);
    fill_random(y, rng);
    fill_random(z, rng);
    Graph g;
    const ValueId vx = g.add_input(ValueType::of(x.type));
    const ValueId vy = g.add_input(ValueType::of(y.type));
    const ValueId vz = g.add_input(ValueType::of(z.type));
    const ValueId alpha = g.add_input(ValueType::scalar_float());
    const auto T = ValueType::of(make_type(dt, sizes));
    const ValueId a = g.add_value(T), b = g.add_value(T), c = g.add_value(T), d = g.add_value(T);
    const ValueId out = g.add_value(T);
    g.add_node(Op::Silu, {vx}, {a});
    g.add_node(Op::Mul, {a, vy}, {b});
    g.add_node(Op::Add, {b, vz, alpha}, {c});
    g.add_node(Op::Tanh, {c}, {d});
    g.add_node(Op::Gelu, {d}, {out}, {1});
    g.mark_output(out);
    HostTensor got = HostTensor::make(dt, sizes), want = HostTensor::make(dt, sizes);
    const auto args = [&](HostTensor& o) {
      return std::vector<onrt_arg>{ptr(x.ptr()), ptr(y.ptr()), ptr(z.ptr()), farg(-0.37),
                                   ptr(o.ptr())};
    };
    const FuseRun fused = run_with(g, args(got), true);
    const FuseRun plain = run_with(g, args(want), false);
    ASSERT_EQ(fused.error, "");
    ASSERT_EQ(plain.error, "");
    EXPECT_EQ(fused.program->instructions.size(), 1u) << dtype_name(dt);
    EXPECT_EQ(fused.program->fused_groups, 1);
    EXPECT_EQ(fused.program->scratch_bytes, 0u);  // no intermediate is stored
    EXPECT_EQ(plain.program->instructions.size(), 5u);
    EXPECT_EQ(std::memcmp(got.ptr(), want.ptr(), got.numel() * dtype_size(dt)), 0)
        << dtype_name(dt);
  }
}

// A result another node reads later is stored; a node the pass cannot fuse ends
// the run; a conversion (Copy to bfloat16) is a step like any other.
TEST(Fuse, StoresResultsReadOutsideTheGroup) {
  const std::vector<int64_t> sizes = {300};
  std::mt19937 rng(3);
  HostTensor x = HostTensor::make(DType::Float32, sizes);
  fill_random(x, rng);
  Graph g;
  const ValueId vx = g.add_input(ValueType::of(x.type));
  const auto F = ValueType::of(make_type(DType::Float32, sizes));
  const auto H = ValueType::of(make_type(DType::BFloat16, sizes));
  const ValueId e = g.add_value(F), h = g.add_value(H), f = g.add_value(H), s = g.add_value(F);
  const ValueId out = g.add_value(F);
  g.add_node(Op::Exp, {vx}, {e});
  g.add_node(Op::Copy, {e}, {h});
  g.add_node(Op::Neg, {h}, {f});
  g.add_node(Op::Floor, {e}, {s});  // not fusable: e must be in memory
  g.add_node(Op::Sub, {s, vx}, {out});
  g.mark_output(f);
  g.mark_output(out);
  HostTensor gf = HostTensor::make(DType::BFloat16, sizes),
             wf = HostTensor::make(DType::BFloat16, sizes);
  HostTensor go = HostTensor::make(DType::Float32, sizes),
             wo = HostTensor::make(DType::Float32, sizes);
  const FuseRun fused = run_with(g, {ptr(x.ptr()), ptr(gf.ptr()), ptr(go.ptr())}, true);
  const FuseRun plain = run_with(g, {ptr(x.ptr()), ptr(wf.ptr()), ptr(wo.ptr())}, false);
  ASSERT_EQ(fused.error, "");
  ASSERT_EQ(plain.error, "");
  EXPECT_EQ(fused.program->fused_groups, 1);
  EXPECT_EQ(fused.program->instructions.size(), 3u);  // [exp, copy, neg], floor, sub
  EXPECT_EQ(std::memcmp(gf.ptr(), wf.ptr(), 300 * 2), 0);
  EXPECT_EQ(std::memcmp(go.ptr(), wo.ptr(), 300 * 4), 0);
}

// Random graphs over views of four buffers (two inputs written in place, an output,
// an intermediate): full, shifted-by-half and transposed views that overlap each
// other, broadcast reads, unfusable nodes between runs. Fused and unfused programs
// must leave every buffer bit-equal.
TEST(Fuse, RandomGraphsOfOverlappingViewsMatchUnfused) {
  constexpr int64_t kRows = 4, kCols = 8, kElems = 2 * kRows * kCols;
  std::mt19937 rng(11);
  const auto base_type = make_type(DType::Float32, {kElems});
  const std::vector<TensorType> layouts = {
      make_type(DType::Float32, {kRows, kCols}),              // offset 0 or half
      make_type(DType::Float32, {kRows, kCols}, {1, kRows}),  // transposed block
      make_type(DType::Float32, {kRows, kCols}, {0, 1}),      // broadcast row (reads only)
  };
  const std::vector<Op> ops = {Op::Neg, Op::Exp, Op::Tanh, Op::Sigmoid, Op::Relu, Op::Silu,
                               Op::Add, Op::Sub, Op::Mul,  Op::Maximum, Op::Copy, Op::Floor};
  int fused_programs = 0;
  for (int trial = 0; trial < 300; ++trial) {
    Graph g;
    const ValueId A = g.add_input(ValueType::of(base_type));
    const ValueId B = g.add_input(ValueType::of(base_type));
    const ValueId s = g.add_input(ValueType::scalar_float());
    const ValueId O = g.add_value(ValueType::of(base_type));
    const ValueId T = g.add_value(ValueType::of(base_type));
    g.mark_output(O);
    auto view = [&](ValueId base, bool for_write) {
      const int layout = std::uniform_int_distribution<int>(0, for_write ? 1 : 2)(rng);
      const int64_t shift = layouts[layout].strides[0] == 0 ? kCols : kRows * kCols / 2;
      const int64_t offset = std::uniform_int_distribution<int>(0, 2)(rng) * shift;
      return g.add_view(base, layouts[layout], offset * 4);
    };
    const ValueId bases[] = {A, B, O, T};
    auto pick = [&](bool for_write) { return view(bases[rng() % 4], for_write); };
    // The intermediate and the output start defined.
    for (ValueId b : {T, O})
      for (int64_t half : {0, 1})
        g.add_node(Op::Copy, {g.add_view(A, layouts[0], half * kRows * kCols * 4)},
                   {g.add_view(b, layouts[0], half * kRows * kCols * 4)});
    const int n = std::uniform_int_distribution<int>(2, 12)(rng);
    for (int i = 0; i < n; ++i) {
      const Op op = ops[rng() % ops.size()];
      const ValueId out = pick(true);
      switch (op) {
        case Op::Add:
        case Op::Sub:
          g.add_node(op, {pick(false), pick(false), s}, {out});
          break;
        case Op::Mul:
        case Op::Maximum:
          g.add_node(op, {pick(false), rng() % 3 ? pick(false) : s}, {out});
          break;
        default:
          g.add_node(op, {pick(false)}, {out});
          break;
      }
    }
    // The intermediate is observable through the output's second half.
    g.add_node(Op::Copy, {g.add_view(T, layouts[0], 0)},
               {g.add_view(O, layouts[0], kRows * kCols * 4)});

    std::vector<float> a(kElems), b(kElems);
    std::uniform_real_distribution<float> u(-2.f, 2.f);
    for (auto* v : {&a, &b})
      for (float& e : *v) e = u(rng);
    std::vector<float> a1 = a, b1 = b, a2 = a, b2 = b, o1(kElems, 9.f), o2(kElems, 9.f);
    const FuseRun fused =
        run_with(g, {ptr(a1.data()), ptr(b1.data()), farg(0.5), ptr(o1.data())}, true);
    const FuseRun plain =
        run_with(g, {ptr(a2.data()), ptr(b2.data()), farg(0.5), ptr(o2.data())}, false);
    ASSERT_EQ(fused.error, "") << to_text(g);
    ASSERT_EQ(plain.error, "");
    fused_programs += fused.program->fused_groups > 0;
    ASSERT_EQ(std::memcmp(a1.data(), a2.data(), kElems * 4), 0) << "trial " << trial << "\n"
                                                                << to_text(g);
    ASSERT_EQ(std::memcmp(b1.data(), b2.data(), kElems * 4), 0) << "trial " << trial << "\n"
                                                                << to_text(g);
    ASSERT_EQ(std::memcmp(o1.data(), o2.data(), kElems * 4), 0) << "trial " << trial << "\n"
                                                                << to_text(g);
  }
  EXPECT_GT(fused_programs, 100);  // the pass had work in most trials
}

// Malformed FusedElementwise nodes are compile errors, not crashes.
TEST(Fuse, MalformedNodeIsACompileError) {
  const auto t = ValueType::of(make_type(DType::Float32, {4}));
  Graph g = Graph::single_op(Op::FusedElementwise, {t, t}, 1, {1, 0, 1, 1, 0, 0, 5, 0, -1, 1});
  EXPECT_THROW(compile(g), CompileError);  // step reads register 5 of 1
  Graph h = Graph::single_op(Op::FusedElementwise, {t, t}, 1, {1, 0});
  EXPECT_THROW(compile(h), CompileError);
  // Ids out of range reach compile()'s checks, not the pass.
  Graph bad;
  const ValueId x = bad.add_input(t);
  bad.add_node(Op::Neg, {x}, {7});
  bad.add_node(Op::Exp, {7}, {x});
  bad.mark_output(9);
  EXPECT_THROW(compile(bad), CompileError);
}

}  // namespace
