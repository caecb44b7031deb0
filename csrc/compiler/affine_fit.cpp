// AffineFit: per-field slope and intercept through two points, in exact integers.
#include "openneuron/compiler/affine_fit.h"

namespace openneuron::compiler {

std::optional<AffineFit> AffineFit::fit(const std::vector<int64_t>& a, int64_t na,
                                        const std::vector<int64_t>& b, int64_t nb) {
  if (a.size() != b.size() || na == nb) return std::nullopt;
  AffineFit f;
  f.slope_.resize(a.size());
  f.intercept_.resize(a.size());
  const __int128 dn = static_cast<__int128>(nb) - na;
  for (size_t i = 0; i < a.size(); ++i) {
    const __int128 dv = static_cast<__int128>(b[i]) - a[i];
    if (dv % dn != 0) return std::nullopt;
    const __int128 slope = dv / dn;
    const __int128 intercept = a[i] - slope * na;
    if (slope > INT64_MAX || slope < INT64_MIN || intercept > INT64_MAX || intercept < INT64_MIN)
      return std::nullopt;
    f.slope_[i] = static_cast<int64_t>(slope);
    f.intercept_[i] = static_cast<int64_t>(intercept);
  }
  return f;
}

std::optional<std::vector<int64_t>> AffineFit::at(int64_t n) const {
  std::vector<int64_t> out(slope_.size());
  for (size_t i = 0; i < out.size(); ++i) {
    const __int128 v = static_cast<__int128>(slope_[i]) * n + intercept_[i];
    if (v > INT64_MAX || v < INT64_MIN) return std::nullopt;
    out[i] = static_cast<int64_t>(v);
  }
  return out;
}

}  // namespace openneuron::compiler
