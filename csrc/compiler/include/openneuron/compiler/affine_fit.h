// Integers that follow one host int: symbolic sizes for recorded graphs.
//
// A graph recorded at two values of a host int n (a size under dynamic shapes)
// gives, field by field, each integer of the recording (sizes, strides, offsets,
// byte counts, scalar operands) as slope * n + intercept. The caller checks the
// fit against a third recording before it instantiates recordings for new n
// without running the graph op by op.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace openneuron::compiler {

class AffineFit {
 public:
  // nullopt when the lengths differ, na == nb, or a field's slope is not an integer.
  static std::optional<AffineFit> fit(const std::vector<int64_t>& a, int64_t na,
                                      const std::vector<int64_t>& b, int64_t nb);
  // Every field at n; nullopt if one overflows.
  std::optional<std::vector<int64_t>> at(int64_t n) const;
  size_t size() const { return slope_.size(); }

 private:
  std::vector<int64_t> slope_, intercept_;
};

}  // namespace openneuron::compiler
