// How many Philox counters each random op's launch consumes: the one place the torch
// bridge asks, so it reserves generator ranges without knowing the engines' draw layout.
#include <algorithm>
#include <string>
#include <vector>

#include "openneuron/compiler/compiler.h"
#include "openneuron/kernels/kernels.h"

namespace openneuron::compiler {

int64_t philox_offset_increment(Op op, std::initializer_list<int64_t> dims) {
  const std::vector<int64_t> d(dims);
  auto expect = [&](size_t n) {
    if (d.size() != n) {
      throw CompileError(std::string("philox_offset_increment(") + op_name(op) + "): expected " +
                         std::to_string(n) + " sizes, got " + std::to_string(d.size()));
    }
  };
  using kernels::RandomExtraOp;
  switch (op) {
    // One counter per element, more than the engine draws (4 per counter): the ranges
    // these ops have always reserved, kept so seeded streams stay as they were.
    case Op::Uniform:
    case Op::Normal:
    case Op::Bernoulli:
    case Op::RandInt:
      expect(1);
      return d[0];
    case Op::Dropout:
      expect(1);
      return kernels::random_extra_offset_increment(RandomExtraOp::Dropout, d[0]);
    case Op::BernoulliTensor:
      expect(1);
      return kernels::random_extra_offset_increment(RandomExtraOp::BernoulliTensor, d[0]);
    case Op::Exponential:
      expect(1);
      return kernels::random_extra_offset_increment(RandomExtraOp::Exponential, d[0]);
    case Op::Geometric:
      expect(1);
      return kernels::random_extra_offset_increment(RandomExtraOp::Geometric, d[0]);
    case Op::LogNormal:
      expect(1);
      return kernels::random_extra_offset_increment(RandomExtraOp::LogNormal, d[0]);
    case Op::Randperm:
      expect(1);
      return kernels::random_extra_offset_increment(RandomExtraOp::Randperm, d[0]);
    case Op::Multinomial: {
      // (max(categories, samples) + 1) / 2 counters per row, and one more.
      expect(3);
      return d[0] * ((std::max(d[1], d[2]) + 1) / 2) + 1;
    }
    case Op::Attention:
    case Op::AttentionBackward:
      expect(4);
      return kernels::attention_offset_increment(d[0], d[1], d[2], d[3]);
    default:
      throw CompileError(std::string("philox_offset_increment: ") + op_name(op) +
                         " draws no random numbers");
  }
}

}  // namespace openneuron::compiler
