// Graph, signature, program cache, validation errors, multi-node graphs with
// scratch intermediates, and execution through the runtime.
#include <thread>

#include "test_util.h"

namespace ontest {
namespace {

TEST(Graph, OpNamesAndSingleOp) {
  EXPECT_STREQ(op_name(Op::Add), "Add");
  EXPECT_STREQ(op_name(Op::NllLossBackward), "NllLossBackward");
  auto t = make_type(DType::Float32, {2, 3});
  Graph g = Graph::single_op(Op::Add, {ValueType::of(t), ValueType::of(t), ValueType::of(t)}, 2);
  EXPECT_EQ(g.inputs(), (std::vector<ValueId>{0, 1}));
  EXPECT_EQ(g.outputs(), (std::vector<ValueId>{2}));
  ASSERT_EQ(g.nodes().size(), 1u);
  EXPECT_EQ(g.nodes()[0].op, Op::Add);
}

TEST(Graph, SignatureDistinguishesEverythingThatMatters) {
  auto t = make_type(DType::Float32, {2, 3});
  auto tt = make_type(DType::Float32, {2, 3}, {1, 2});
  auto b = make_type(DType::BFloat16, {2, 3});
  auto sig = [](Op op, std::vector<ValueType> v, int nin, std::vector<int64_t> attrs = {}) {
    return Graph::single_op(op, v, nin, attrs).signature();
  };
  const std::string base = sig(Op::Add, {ValueType::of(t), ValueType::of(t), ValueType::of(t)}, 2);
  EXPECT_EQ(base, sig(Op::Add, {ValueType::of(t), ValueType::of(t), ValueType::of(t)}, 2));
  EXPECT_NE(base, sig(Op::Sub, {ValueType::of(t), ValueType::of(t), ValueType::of(t)}, 2));
  EXPECT_NE(base, sig(Op::Add, {ValueType::of(tt), ValueType::of(t), ValueType::of(t)}, 2));
  EXPECT_NE(base, sig(Op::Add, {ValueType::of(b), ValueType::of(t), ValueType::of(t)}, 2));
  EXPECT_NE(base, sig(Op::Add, {ValueType::of(t), ValueType::scalar_float(), ValueType::of(t)}, 2));
  EXPECT_NE(sig(Op::Add, {ValueType::of(t), ValueType::scalar_int(), ValueType::of(t)}, 2),
            sig(Op::Add, {ValueType::of(t), ValueType::scalar_float(), ValueType::of(t)}, 2));
  EXPECT_NE(sig(Op::Sum, {ValueType::of(t), ValueType::of(t)}, 1, {1}),
            sig(Op::Sum, {ValueType::of(t), ValueType::of(t)}, 1, {2}));
  EXPECT_LT(base.size(), 64u);  // compact
}

// The signature is the eager path's cache key: compact, and different whenever
// anything that changes the program differs. (Its speed is a benchmark's job.)
TEST(Graph, SignatureIsCompactAndDistinguishesLayouts) {
  auto t = make_type(DType::Float32, {8, 16, 32});
  auto tt = make_type(DType::Float32, {8, 16, 32});
  std::swap(tt.strides[1], tt.strides[2]);
  auto add = [](const TensorType& a) {
    return Graph::single_op(Op::Add, {ValueType::of(a), ValueType::of(a), ValueType::scalar_float(),
                                      ValueType::of(a)}, 3);
  };
  const std::string sig = add(t).signature();
  EXPECT_LT(sig.size(), 64u);
  EXPECT_EQ(sig, add(t).signature());
  EXPECT_NE(sig, add(tt).signature());
  EXPECT_NE(sig, add(make_type(DType::BFloat16, {8, 16, 32})).signature());
}

TEST(Compile, ErrorsNameOpAndOperands) {
  auto f = make_type(DType::Float32, {2, 3});
  auto g3 = make_type(DType::Float32, {3, 2});
  auto i64 = make_type(DType::Int64, {2, 3});
  auto expect_error = [](const Graph& g, const std::string& fragment) {
    try {
      compile(g);
      ADD_FAILURE() << "expected CompileError containing " << fragment;
    } catch (const CompileError& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  // Wrong operand count.
  expect_error(Graph::single_op(Op::Mul, {ValueType::of(f), ValueType::of(f)}, 1), "Mul: expected 2 inputs");
  // Shape mismatch.
  expect_error(Graph::single_op(Op::Mul, {ValueType::of(f), ValueType::of(g3), ValueType::of(f)}, 2),
               "Mul: input has sizes Float32[3, 2]");
  // Unsupported dtype.
  expect_error(Graph::single_op(Op::Exp, {ValueType::of(i64), ValueType::of(i64)}, 1),
               "Exp: unsupported dtype Int64 (operands: Int64[2, 3] -> Int64[2, 3])");
  expect_error(Graph::single_op(Op::Div, {ValueType::of(i64), ValueType::of(i64), ValueType::of(i64)}, 2),
               "Div: unsupported dtype Int64");
  // Scalar where a tensor output is required; scalar alpha required.
  expect_error(Graph::single_op(Op::Relu, {ValueType::of(f), ValueType::scalar_float()}, 1), "must be a tensor");
  expect_error(Graph::single_op(Op::Add, {ValueType::of(f), ValueType::of(f), ValueType::of(f), ValueType::of(f)}, 3),
               "alpha must be a scalar");
  // Bad attrs.
  expect_error(Graph::single_op(Op::Softmax, {ValueType::of(f), ValueType::of(f)}, 1, {5}), "dim 5 out of range");
  expect_error(Graph::single_op(Op::Gelu, {ValueType::of(f), ValueType::of(f)}, 1, {2}), "approximate");
  // Overlapping output.
  expect_error(Graph::single_op(Op::Neg, {ValueType::of(f), ValueType::of(make_type(DType::Float32, {2, 3}, {0, 1}))}, 1),
               "overlapping");
  // Graph wiring.
  Graph bad;
  ValueId a = bad.add_input(ValueType::of(f));
  ValueId t = bad.add_value(ValueType::of(f));
  ValueId o = bad.add_value(ValueType::of(f));
  bad.add_node(Op::Neg, {t}, {o});
  bad.add_node(Op::Neg, {a}, {t});
  bad.mark_output(o);
  expect_error(bad, "before it is defined");
  Graph never;
  never.add_input(ValueType::of(f));
  never.mark_output(never.add_value(ValueType::of(f)));
  expect_error(never, "never written");
}

TEST(Compile, AViewPastItsBaseIsAnError) {
  Graph g;
  const ValueId base = g.add_input(ValueType::of(make_type(DType::UInt8, {32})));
  const ValueId out = g.add_value(ValueType::of(make_type(DType::Float32, {4})));
  g.mark_output(out);
  const ValueId v = g.add_view(base, make_type(DType::Float32, {4}), 20);  // bytes 20..36
  g.add_node(Op::Neg, {v}, {out});
  try {
    compile(g);
    ADD_FAILURE() << "a view past its base compiled";
  } catch (const CompileError& e) {
    EXPECT_NE(std::string(e.what()).find("reaches past its base"), std::string::npos) << e.what();
  }
}

TEST(Compile, MultiNodeGraphUsesScratchWithReuse) {
  // out = relu(a * b + c) - a, with three intermediates.
  const int64_t n = 1000;
  auto t = make_type(DType::Float32, {n});
  auto a = HostTensor::make(DType::Float32, {n}).randomize(1);
  auto b = HostTensor::make(DType::Float32, {n}).randomize(2);
  auto c = HostTensor::make(DType::Float32, {n}).randomize(3);
  auto out = HostTensor::make(DType::Float32, {n});
  Graph g;
  ValueId va = g.add_input(ValueType::of(t)), vb = g.add_input(ValueType::of(t)), vc = g.add_input(ValueType::of(t));
  ValueId m = g.add_value(ValueType::of(t)), s = g.add_value(ValueType::of(t)), r = g.add_value(ValueType::of(t));
  ValueId vo = g.add_value(ValueType::of(t));
  g.add_node(Op::Mul, {va, vb}, {m});
  g.add_node(Op::Add, {m, vc}, {s});
  g.add_node(Op::Relu, {s}, {r});
  g.add_node(Op::Sub, {r, va}, {vo});
  g.mark_output(vo);
  auto p = compile(g, CompileOptions{false});  // unfused: every intermediate in scratch
  EXPECT_EQ(p->num_args, 5);
  EXPECT_EQ(p->instructions.size(), 4u);
  // m dies when s is written, so r reuses m's range: two 4000-byte buffers, 64-aligned.
  EXPECT_EQ(p->scratch_bytes, 2u * 4032u);
  ASSERT_EQ(run_graph(g, {a.arg(), b.arg(), c.arg(), out.arg()}), "");
  for (int64_t i = 0; i < n; ++i) {
    const float mv = float(a.get(i)) * float(b.get(i));
    const float sv = mv + float(c.get(i));
    const float want = (sv < 0 ? 0.0f : sv) - float(a.get(i));
    ASSERT_EQ(out.get(i), want) << i;
  }
}

TEST(Compile, ScalarInputsShareSlotsAndZeroSizeOps) {
  auto t = make_type(DType::Float32, {0, 4});
  auto p = compile(Graph::single_op(Op::Add, {ValueType::of(t), ValueType::of(t), ValueType::scalar_float(), ValueType::of(t)}, 3));
  EXPECT_EQ(p->instructions.size(), 0u);  // nothing to do
  EXPECT_EQ(p->num_args, 4);
  EXPECT_EQ(p->scratch_bytes, 0u);
}

TEST(ProgramCache, HitsMissesAndFailuresNotCached) {
  ProgramCache& cache = ProgramCache::global();
  cache.clear();
  auto t = make_type(DType::Float32, {4, 4});
  Graph g1 = Graph::single_op(Op::Add, {ValueType::of(t), ValueType::of(t), ValueType::of(t)}, 2);
  Graph g2 = Graph::single_op(Op::Mul, {ValueType::of(t), ValueType::of(t), ValueType::of(t)}, 2);
  auto p1 = cache.get_or_compile(g1);
  auto p1b = cache.get_or_compile(g1);
  auto p2 = cache.get_or_compile(g2);
  EXPECT_EQ(p1.get(), p1b.get());
  EXPECT_NE(p1.get(), p2.get());
  CacheStats s = cache.stats();
  EXPECT_EQ(s.hits, 1);
  EXPECT_EQ(s.misses, 2);
  EXPECT_EQ(s.entries, 2);
  EXPECT_GT(s.compile_seconds, 0.0);
  auto i = make_type(DType::Int64, {4, 4});
  Graph bad = Graph::single_op(Op::Exp, {ValueType::of(i), ValueType::of(i)}, 1);
  EXPECT_THROW(cache.get_or_compile(bad), CompileError);
  EXPECT_THROW(cache.get_or_compile(bad), CompileError);  // retried, raises again
  s = cache.stats();
  EXPECT_EQ(s.entries, 2);
  EXPECT_EQ(s.misses, 2);
  cache.clear();
  EXPECT_EQ(cache.stats().entries, 0);
}

TEST(ProgramCache, ConcurrentLookupsAgree) {
  ProgramCache& cache = ProgramCache::global();
  cache.clear();
  auto t = make_type(DType::Float32, {3});
  Graph g = Graph::single_op(Op::Neg, {ValueType::of(t), ValueType::of(t)}, 1);
  std::vector<std::shared_ptr<const Program>> got(8);
  std::vector<std::thread> ts;
  for (int k = 0; k < 8; ++k) ts.emplace_back([&, k] { got[k] = cache.get_or_compile(g); });
  for (auto& th : ts) th.join();
  for (int k = 1; k < 8; ++k) EXPECT_EQ(got[k].get(), got[0].get());
  EXPECT_EQ(cache.stats().entries, 1);
  cache.clear();
}

// A one-element add runs as a single instruction called directly (its cost is
// measured by benchmarks/dispatch_latency.py, not asserted here).
TEST(Overhead, TinyOpIsOneDirectInstruction) {
  auto a = HostTensor::make(DType::Float32, {1}).randomize(1);
  auto out = HostTensor::make(DType::Float32, {1});
  auto p = compile(Graph::single_op(Op::Add, {a.vt(), a.vt(), ValueType::scalar_float(), out.vt()}, 3));
  ASSERT_EQ(p->instructions.size(), 1u);
  EXPECT_EQ(p->scratch_bytes, 0u);
  const Instruction& ins = p->instructions[0];
  std::vector<onrt_arg> args = {a.arg(), a.arg(), farg(1.0), out.arg()};
  std::vector<onrt_arg> local;
  for (int s : ins.arg_slots) local.push_back(args[s]);
  char err[128];
  ASSERT_EQ(ins.fn(ins.params.data(), local.data(), err, sizeof err), 0) << err;
  EXPECT_EQ(out.get(0), 2 * float(a.get(0)));
}

// Through the real runtime: device memory, a stream, launch, synchronize.
TEST(Runtime, LaunchThroughStreams) {
  ASSERT_EQ(onrt_init(), ONRT_OK) << onrt_last_error();
  onrt_stream_t stream;
  ASSERT_EQ(onrt_stream_get_default(0, &stream), ONRT_OK) << onrt_last_error();
  const int64_t n = 4096;
  auto ha = HostTensor::make(DType::Float32, {n}).randomize(1);
  auto hb = HostTensor::make(DType::Float32, {n}).randomize(2);
  auto t = make_type(DType::Float32, {n});
  // (a + 2b) * a via an intermediate in scratch (unfused).
  Graph g;
  ValueId va = g.add_input(ValueType::of(t)), vb = g.add_input(ValueType::of(t));
  ValueId al = g.add_input(ValueType::scalar_float());
  ValueId s = g.add_value(ValueType::of(t)), o = g.add_value(ValueType::of(t));
  g.add_node(Op::Add, {va, vb, al}, {s});
  g.add_node(Op::Mul, {s, va}, {o});
  g.mark_output(o);
  auto p = compile(g, CompileOptions{false});
  ASSERT_GT(p->scratch_bytes, 0u);
  void *da, *db, *dout, *dscratch;
  const size_t bytes = n * 4;
  ASSERT_EQ(onrt_malloc(0, bytes, stream, &da), ONRT_OK);
  ASSERT_EQ(onrt_malloc(0, bytes, stream, &db), ONRT_OK);
  ASSERT_EQ(onrt_malloc(0, bytes, stream, &dout), ONRT_OK);
  ASSERT_EQ(onrt_malloc(0, p->scratch_bytes, stream, &dscratch), ONRT_OK);
  ASSERT_EQ(onrt_memcpy(da, ha.ptr(), bytes, ONRT_COPY_HOST_TO_DEVICE, stream), ONRT_OK);
  ASSERT_EQ(onrt_memcpy(db, hb.ptr(), bytes, ONRT_COPY_HOST_TO_DEVICE, stream), ONRT_OK);
  onrt_arg args[5];
  args[0].ptr = da;
  args[1].ptr = db;
  args[2].f = 2.0;
  args[3].ptr = dout;
  args[4].ptr = dscratch;
  ASSERT_EQ(onrt_program_launch(stream, p->handle, args, p->num_args), ONRT_OK) << onrt_last_error();
  ASSERT_EQ(onrt_stream_synchronize(stream), ONRT_OK) << onrt_last_error();
  auto hout = HostTensor::make(DType::Float32, {n});
  ASSERT_EQ(onrt_memcpy(hout.ptr(), dout, bytes, ONRT_COPY_DEVICE_TO_HOST, stream), ONRT_OK);
  for (int64_t i = 0; i < n; ++i) {
    const float sv = std::fma(2.0f, float(hb.get(i)), float(ha.get(i)));
    ASSERT_EQ(hout.get(i), sv * float(ha.get(i))) << i;
  }
  // A failing kernel surfaces as a stream error naming the instruction.
  auto ti = make_type(DType::Int64, {2});
  auto pdiv = ProgramCache::global().get_or_compile(
      Graph::single_op(Op::DivTrunc, {ValueType::of(ti), ValueType::of(ti), ValueType::of(ti)}, 2));
  int64_t hx[2] = {4, 5}, hy[2] = {1, 0};
  ASSERT_EQ(onrt_memcpy(da, hx, 16, ONRT_COPY_HOST_TO_DEVICE, stream), ONRT_OK);
  ASSERT_EQ(onrt_memcpy(db, hy, 16, ONRT_COPY_HOST_TO_DEVICE, stream), ONRT_OK);
  onrt_arg dargs[3];
  dargs[0].ptr = da;
  dargs[1].ptr = db;
  dargs[2].ptr = dout;
  ASSERT_EQ(onrt_program_launch(stream, pdiv->handle, dargs, 3), ONRT_OK);
  EXPECT_NE(onrt_stream_synchronize(stream), ONRT_OK);
  EXPECT_NE(std::string(onrt_last_error()).find("ZeroDivisionError"), std::string::npos) << onrt_last_error();
  for (void* ptr : {da, db, dout, dscratch}) EXPECT_EQ(onrt_free(ptr), ONRT_OK);
}

}  // namespace
}  // namespace ontest
