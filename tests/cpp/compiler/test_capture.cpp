// CaptureBuilder: the launches of an "eager run" on host memory, replayed as one
// compiled graph on other input memory, must give what the eager run gives.
#include <algorithm>
#include <random>

#include "openneuron/compiler/capture.h"
#include "test_util.h"

namespace {

using namespace ontest;

onrt_arg ptr_arg(void* p) {
  onrt_arg a{};
  a.ptr = p;
  return a;
}
onrt_arg float_arg(double v) {
  onrt_arg a{};
  a.f = v;
  return a;
}

// Runs one op eagerly on host memory and records the launch.
void eager(CaptureBuilder& cap, Op op, const std::vector<ValueType>& types, int num_inputs,
           const std::vector<onrt_arg>& args) {
  Graph g = Graph::single_op(op, types, num_inputs);
  ASSERT_EQ(run_graph(g, args), "") << op_name(op);
  cap.record(g, args.data(), static_cast<int>(args.size()));
}

// Replays the captured graph: input storages from `storages`, fresh output buffers.
std::vector<std::vector<char>> replay(const CaptureBuilder& cap,
                                      const std::vector<void*>& storages) {
  std::vector<onrt_arg> args;
  for (const auto& s : cap.input_slots())
    args.push_back(s.storage >= 0 ? ptr_arg(storages[s.storage]) : s.constant);
  std::vector<std::vector<char>> outs;
  for (uint64_t n : cap.output_bytes()) outs.emplace_back(n, '\x7f');
  for (auto& o : outs) args.push_back(ptr_arg(o.data()));
  EXPECT_EQ(run_graph(cap.graph(), args), "");
  return outs;
}

TEST(Capture, InPlaceOpsAndSlicesReplayOnNewInputs) {
  const int64_t n = 8;
  const auto t = make_type(DType::Float32, {n});
  std::vector<float> x(n), buf(2 * n), tmp(n);
  for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(i) - 3.5f;
  CaptureBuilder cap;
  EXPECT_EQ(cap.add_input_storage(x.data(), sizeof(float) * n), 0);
  cap.on_alloc(buf.data(), sizeof(float) * 2 * n);
  cap.on_alloc(tmp.data(), sizeof(float) * n);
  const auto T = ValueType::of(t);
  // buf[:n] = -x; tmp = x + 2 * buf[:n]; buf[n:] = tmp * x; buf[:n] *= buf[n:] (in place).
  eager(cap, Op::Neg, {T, T}, 1, {ptr_arg(x.data()), ptr_arg(buf.data())});
  eager(cap, Op::Add, {T, T, ValueType::scalar_float(), T}, 3,
        {ptr_arg(x.data()), ptr_arg(buf.data()), float_arg(2.0), ptr_arg(tmp.data())});
  eager(cap, Op::Mul, {T, T, T}, 2,
        {ptr_arg(tmp.data()), ptr_arg(x.data()), ptr_arg(buf.data() + n)});
  cap.on_free(tmp.data());
  eager(cap, Op::Mul, {T, T, T}, 2,
        {ptr_arg(buf.data()), ptr_arg(buf.data() + n), ptr_arg(buf.data())});
  const auto where = cap.locate_output(buf.data() + n, sizeof(float) * n);
  ASSERT_FALSE(cap.failed()) << cap.failure();
  EXPECT_EQ(where.kind, CaptureBuilder::Location::Output);
  EXPECT_EQ(where.offset, static_cast<int64_t>(sizeof(float) * n));
  EXPECT_EQ(cap.locate_output(x.data() + 2, 4).kind, CaptureBuilder::Location::Input);
  EXPECT_EQ(cap.launches(), 4);

  const std::string listing = to_text(cap.graph());
  EXPECT_NE(listing.find("view of %"), std::string::npos) << listing;
  EXPECT_NE(listing.find("Mul("), std::string::npos) << listing;
  EXPECT_NE(to_text(*compile(cap.graph(), CompileOptions{false})).find("4 instructions"),
            std::string::npos);
  // Fused, the four ops are one pass; the temporary never reaches memory.
  EXPECT_NE(to_text(*compile(cap.graph())).find("1 instructions"), std::string::npos);

  std::vector<float> y(n);
  for (int64_t i = 0; i < n; ++i) y[i] = 0.25f * static_cast<float>(i * i) + 1.0f;
  auto outs = replay(cap, {y.data()});
  ASSERT_EQ(outs.size(), 1u);
  const float* got = reinterpret_cast<const float*>(outs[0].data());
  for (int64_t i = 0; i < n; ++i) {
    const float neg = -y[i], prod = (y[i] + 2.0f * neg) * y[i];
    EXPECT_EQ(got[n + i], prod) << i;
    EXPECT_EQ(got[i], neg * prod) << i;
  }
}

TEST(Capture, UnknownMemoryFailsTheCapture) {
  const auto T = ValueType::of(make_type(DType::Float32, {4}));
  std::vector<float> x(4, 1.f), stray(4), out(4);
  CaptureBuilder cap;
  cap.add_input_storage(x.data(), 16);
  cap.on_alloc(out.data(), 16);
  eager(cap, Op::Add, {T, T, ValueType::scalar_float(), T}, 3,
        {ptr_arg(x.data()), ptr_arg(stray.data()), float_arg(1.0), ptr_arg(out.data())});
  EXPECT_TRUE(cap.failed());
  EXPECT_NE(cap.failure().find("outside the graph's inputs"), std::string::npos) << cap.failure();
  // An operand reaching past its buffer's end is outside too.
  CaptureBuilder past;
  past.add_input_storage(x.data(), 8);
  past.on_alloc(out.data(), 16);
  eager(past, Op::Neg, {T, T}, 1, {ptr_arg(x.data()), ptr_arg(out.data())});
  EXPECT_TRUE(past.failed());
}

// Random programs over a first-fit arena that hands freed addresses out again, as
// the device's caching allocator does: the replay's memory plan must never let two
// live buffers overlap, so it gives the eager run's results bit for bit.
TEST(Capture, RandomProgramsOverReusedMemoryReplayExactly) {
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 40; ++trial) {
    constexpr int64_t kArena = 4096;  // floats
    std::vector<float> arena(kArena), input(64);
    for (auto& v : input) v = std::uniform_real_distribution<float>(-2, 2)(rng);
    struct Block {
      int64_t at, len;
    };
    std::vector<Block> used, live;
    auto alloc = [&](int64_t len) {
      int64_t at = 0;
      std::sort(used.begin(), used.end(), [](auto& a, auto& b) { return a.at < b.at; });
      for (const Block& b : used) {
        if (b.at >= at + len) break;
        at = std::max(at, b.at + b.len);
      }
      used.push_back({at, len});
      return Block{at, len};
    };
    auto release = [&](const Block& blk) {
      used.erase(std::find_if(used.begin(), used.end(), [&](auto& b) { return b.at == blk.at; }));
    };
    CaptureBuilder cap;
    cap.add_input_storage(input.data(), sizeof(float) * input.size());
    const int64_t len = 16 + static_cast<int64_t>(rng() % 48);
    const auto T = ValueType::of(make_type(DType::Float32, {len}));
    auto src = [&](uint32_t pick) -> float* {
      if (live.empty() || pick % 3 == 0) return input.data() + pick % (64 - len + 1);
      return arena.data() + live[pick % live.size()].at;
    };
    for (int step = 0; step < 12; ++step) {
      Block b = alloc(len + static_cast<int64_t>(rng() % 16));
      cap.on_alloc(arena.data() + b.at, sizeof(float) * b.len);
      float* a = src(rng());
      float* c = src(rng());
      float* out = arena.data() + b.at;
      if (rng() % 2) {
        eager(cap, Op::Add, {T, T, ValueType::scalar_float(), T}, 3,
              {ptr_arg(a), ptr_arg(c), float_arg(0.5), ptr_arg(out)});
      } else {
        eager(cap, Op::Mul, {T, T, T}, 2, {ptr_arg(a), ptr_arg(c), ptr_arg(out)});
      }
      live.push_back(b);
      if (live.size() > 2 && rng() % 2) {  // free one, never the newest
        const size_t k = rng() % (live.size() - 1);
        cap.on_free(arena.data() + live[k].at);
        release(live[k]);
        live.erase(live.begin() + static_cast<long>(k));
      }
    }
    const Block last = live.back();
    std::vector<float> want(arena.begin() + last.at, arena.begin() + last.at + len);
    const auto where = cap.locate_output(arena.data() + last.at, sizeof(float) * len);
    ASSERT_FALSE(cap.failed()) << cap.failure();
    // Replay on the same input values but in other memory, after scribbling over the arena.
    std::vector<float> input2(input);
    std::fill(arena.begin(), arena.end(), -1e9f);
    auto outs = replay(cap, {input2.data()});
    const float* got = reinterpret_cast<const float*>(outs[where.index].data() + where.offset);
    for (int64_t i = 0; i < len; ++i)
      ASSERT_EQ(got[i], want[i]) << "trial " << trial << " element " << i;
  }
}

}  // namespace
