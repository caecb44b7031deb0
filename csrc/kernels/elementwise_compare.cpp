// Comparisons and logical ops: inputs of one dtype, Bool out.
#include "elementwise_binary.h"
#include "openneuron/kernels/kernels.h"

namespace openneuron::kernels::detail {
namespace {

#define ON_CMP(NAME, EXPR)                                  \
  template <class C> struct NAME {                          \
    C alpha; Ctx ctx;                                       \
    ON_INLINE bool operator()(C a, C b) const { return EXPR; }        \
  };
ON_CMP(EqF, a == b)
ON_CMP(NeF, a != b)
ON_CMP(LtF, a < b)
ON_CMP(LeF, a <= b)
ON_CMP(GtF, a > b)
ON_CMP(GeF, a >= b)
ON_CMP(LogicalAndF, (a != C(0)) && (b != C(0)))
ON_CMP(LogicalOrF, (a != C(0)) || (b != C(0)))
#undef ON_CMP

}  // namespace

onrt_kernel_fn compare_kernel(BinaryOp op, DType out, DType in) {
  switch (op) {
    case BinaryOp::Eq: return pick_bool_out<EqF>(out, in);
    case BinaryOp::Ne: return pick_bool_out<NeF>(out, in);
    case BinaryOp::Lt: return pick_bool_out<LtF>(out, in);
    case BinaryOp::Le: return pick_bool_out<LeF>(out, in);
    case BinaryOp::Gt: return pick_bool_out<GtF>(out, in);
    case BinaryOp::Ge: return pick_bool_out<GeF>(out, in);
    case BinaryOp::LogicalAnd: return pick_bool_out<LogicalAndF>(out, in);
    case BinaryOp::LogicalOr: return pick_bool_out<LogicalOrF>(out, in);
    default: return nullptr;
  }
}

}  // namespace openneuron::kernels::detail
