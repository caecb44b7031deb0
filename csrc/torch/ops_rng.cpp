// Random sampling on the device generator: uniform_, normal_ (and normal with tensor
// mean/std), bernoulli, random_, exponential_, geometric_, log_normal_, dropout,
// randperm and multinomial. Each reserves its Philox counters (reserve_philox) and
// launches a compiler op of the rng family (lower_rng.cpp).
#include <ATen/native/DistributionTemplates.h>
#include <ATen/native/TensorFactories.h>

#include "op_helpers.h"

namespace openneuron::bridge {
namespace {

using at::Tensor;
using compiler::Op;

// ATen's own templates (DistributionTemplates.h) check the arguments and work out the
// range, so bounds, warnings and messages are the CPU's; these kernels then launch.
template <typename RNG>
struct UniformKernel {
  void operator()(at::TensorIteratorBase& iter, double from, double to,
                  std::optional<at::Generator> gen) {
    const at::Tensor self(iter.output(0));
    auto [seed, offset] = reserve_philox(self.device(), gen, Op::Uniform, {self.numel()});
    launch(Op::Uniform, {seed, offset, float_operand(from), float_operand(to)},
           {tensor_operand(self)});
  }
};

// Draws from [from, from + range); range 0 stands for 2^64. The kernel takes an
// exclusive int64 bound, so a range reaching past INT64_MAX never draws INT64_MAX itself.
void launch_randint(const at::Tensor& self, int64_t from, uint64_t range,
                    std::optional<at::Generator> gen) {
  const uint64_t room =
      static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) - static_cast<uint64_t>(from);
  const int64_t hi = range == 0 || range > room
                         ? std::numeric_limits<int64_t>::max()
                         : static_cast<int64_t>(static_cast<uint64_t>(from) + range);
  auto [seed, offset] = reserve_philox(self.device(), gen, Op::RandInt, {self.numel()});
  launch(Op::RandInt, {seed, offset, int_operand(from), int_operand(hi)}, {tensor_operand(self)});
}

template <typename RNG>
struct RandomFromToKernel {
  void operator()(at::TensorIteratorBase& iter, uint64_t range, int64_t from,
                  std::optional<at::Generator> gen) {
    launch_randint(at::Tensor(iter.output(0)), from, range, std::move(gen));
  }
  void operator()(at::TensorIteratorBase& iter, std::optional<at::Generator> gen) {
    launch_randint(at::Tensor(iter.output(0)), std::numeric_limits<int64_t>::lowest(), 0,
                   std::move(gen));
  }
};

at::Tensor& uniform_(at::Tensor& self, double from, double to, std::optional<at::Generator> gen) {
  return at::native::templates::uniform_impl_<UniformKernel, void>(self, from, to, std::move(gen));
}

at::Tensor& normal_(at::Tensor& self, double mean, double std, std::optional<at::Generator> gen) {
  TORCH_CHECK(std >= 0.0, "normal expects std >= 0.0, but found std ", std);
  if (self.numel() == 0) return self;
  auto [seed, offset] = reserve_philox(self.device(), gen, Op::Normal, {self.numel()});
  launch(Op::Normal, {seed, offset, float_operand(mean), float_operand(std)},
         {tensor_operand(self)});
  return self;
}

at::Tensor& bernoulli_float(at::Tensor& self, double p, std::optional<at::Generator> gen) {
  TORCH_CHECK(0 <= p && p <= 1, "bernoulli_ expects p to be in [0, 1], but got p=", p);
  if (self.numel() == 0) return self;
  auto [seed, offset] = reserve_philox(self.device(), gen, Op::Bernoulli, {self.numel()});
  launch(Op::Bernoulli, {seed, offset, float_operand(p)}, {tensor_operand(self)});
  return self;
}

at::Tensor& random_from_to(at::Tensor& self, int64_t from, std::optional<int64_t> to,
                           std::optional<at::Generator> gen) {
  return at::native::templates::random_from_to_impl<RandomFromToKernel, void>(self, from, to,
                                                                              std::move(gen));
}

at::Tensor& random_to(at::Tensor& self, int64_t to, std::optional<at::Generator> gen) {
  return random_from_to(self, 0, to, std::move(gen));
}

// [0, 2^digits] for floating types, [0, max] for integers, as on the CPU.
at::Tensor& random_(at::Tensor& self, std::optional<at::Generator> gen) {
  return random_from_to(self, 0, std::nullopt, std::move(gen));
}

// ------------------------------------------------------------ random

std::tuple<at::Tensor, at::Tensor> native_dropout(const at::Tensor& input, double p,
                                                  std::optional<bool> train) {
  if (input.numel() == 0) return {input, at::empty_like(input)};
  if (train.has_value() && !*train) {
    return {input.clone(), at::ones_like(input, input.options().dtype(c10::kBool))};
  }
  TORCH_CHECK(p >= 0 && p <= 1, "dropout probability has to be between 0 and 1, but got ", p);
  TORCH_CHECK_NOT_IMPLEMENTED(is_half_or_float(input.scalar_type()),
                              "neuron: native_dropout for dtype ", input.scalar_type());
  at::Tensor out = empty_elementwise(input.sizes(), input.scalar_type(), input.device(), {&input});
  at::Tensor mask = empty_elementwise(input.sizes(), c10::kBool, input.device(), {&input});
  auto [seed, offset] = reserve_philox(input.device(), std::nullopt, Op::Dropout, {input.numel()});
  launch(Op::Dropout, {seed, offset, float_operand(p), tensor_operand(input)},
         {tensor_operand(out), tensor_operand(mask)});
  return {out, mask};
}

at::Tensor native_dropout_backward(const at::Tensor& grad, const at::Tensor& mask, double scale) {
  const c10::Device device = common_device("native_dropout_backward", {&grad, &mask});
  TORCH_CHECK_NOT_IMPLEMENTED(is_half_or_float(grad.scalar_type()),
                              "neuron: native_dropout_backward for dtype ", grad.scalar_type());
  const auto shape = at::infer_size_dimvector(grad.sizes(), mask.sizes());
  at::Tensor out = empty_elementwise(shape, grad.scalar_type(), device, {&grad, &mask});
  if (out.numel() == 0) return out;
  launch(Op::DropoutBackward,
         {tensor_operand(grad.expand(shape)), tensor_operand(mask.expand(shape)),
          float_operand(scale)},
         {tensor_operand(out)});
  return out;
}

at::Tensor& bernoulli_tensor_(at::Tensor& self, const at::Tensor& p,
                              std::optional<at::Generator> gen) {
  common_device("bernoulli_", {&self, &p});
  TORCH_CHECK(at::is_expandable_to(p.sizes(), self.sizes()), "bernoulli_: p of shape ", p.sizes(),
              " cannot be broadcast to self of shape ", self.sizes());
  if (self.numel() == 0) return self;
  at::Tensor pp = p.is_cpu() ? p.to(self.device()) : p;
  pp = to_dtype_on_device(pp, c10::kFloat).expand(self.sizes());
  auto [seed, offset] = reserve_philox(self.device(), gen, Op::BernoulliTensor, {self.numel()});
  launch(Op::BernoulliTensor, {seed, offset, tensor_operand(pp)}, {tensor_operand(self)});
  return self;
}

at::Tensor& bernoulli_out(const at::Tensor& self, std::optional<at::Generator> gen,
                          at::Tensor& out) {
  at::native::resize_output(out, self.sizes());
  return bernoulli_tensor_(out, self, std::move(gen));
}

template <Op kOp>
at::Tensor& random_fill_(at::Tensor& self, double a, double b, std::optional<at::Generator> gen) {
  if (self.numel() == 0) return self;
  auto [seed, offset] = reserve_philox(self.device(), gen, kOp, {self.numel()});
  if (kOp == Op::LogNormal) {
    launch(kOp, {seed, offset, float_operand(a), float_operand(b)}, {tensor_operand(self)});
  } else {
    launch(kOp, {seed, offset, float_operand(a)}, {tensor_operand(self)});
  }
  return self;
}

at::Tensor& exponential_(at::Tensor& self, double lambd, std::optional<at::Generator> gen) {
  TORCH_CHECK(lambd > 0.0, "exponential_ expects lambda > 0.0, but found lambda=", lambd);
  TORCH_CHECK_NOT_IMPLEMENTED(is_half_or_float(self.scalar_type()),
                              "neuron: exponential_ for dtype ", self.scalar_type());
  return random_fill_<Op::Exponential>(self, lambd, 0, std::move(gen));
}
at::Tensor& geometric_(at::Tensor& self, double p, std::optional<at::Generator> gen) {
  TORCH_CHECK(0 < p && p < 1, "geometric_ expects p to be in (0, 1), but got p=", p);
  TORCH_CHECK_NOT_IMPLEMENTED(self.scalar_type() != c10::kBool && !self.is_complex(),
                              "neuron: geometric_ for dtype ", self.scalar_type());
  return random_fill_<Op::Geometric>(self, p, 0, std::move(gen));
}
at::Tensor& log_normal_(at::Tensor& self, double mean, double std,
                        std::optional<at::Generator> gen) {
  TORCH_CHECK(std > 0.0, "log_normal_ expects std > 0.0, but found std=", std);
  TORCH_CHECK_NOT_IMPLEMENTED(is_half_or_float(self.scalar_type()),
                              "neuron: log_normal_ for dtype ", self.scalar_type());
  return random_fill_<Op::LogNormal>(self, mean, std, std::move(gen));
}

// normal with tensor mean/std: out.normal_(0, std|1).mul_(std).add_(mean), as ATen does.
at::Tensor& normal_tf_out(const at::Tensor& mean, double std, std::optional<at::Generator> gen,
                          at::Tensor& out) {
  TORCH_CHECK(std >= 0.0, "normal expects std >= 0.0, but found std ", std);
  at::native::resize_output(out, mean.sizes());
  out.normal_(0, std, gen);
  out.add_(mean);
  return out;
}
at::Tensor normal_tf(const at::Tensor& mean, double std, std::optional<at::Generator> gen) {
  at::Tensor out = empty_device(mean.sizes(), mean.scalar_type(), mean.device());
  return normal_tf_out(mean, std, std::move(gen), out);
}
void check_std(const at::Tensor& std) {
  TORCH_CHECK(!std.is_complex(), "normal expects standard deviation to be non-complex");
  if (std.numel() > 0) {
    TORCH_CHECK(at::amin(std).ge(0).item<bool>(), "normal expects all elements of std >= 0.0");
  }
}
at::Tensor& normal_ft_out(double mean, const at::Tensor& std, std::optional<at::Generator> gen,
                          at::Tensor& out) {
  check_std(std);
  at::native::resize_output(out, std.sizes());
  out.normal_(0, 1, gen);
  out.mul_(std).add_(mean);
  return out;
}
at::Tensor normal_ft(double mean, const at::Tensor& std, std::optional<at::Generator> gen) {
  at::Tensor out = empty_device(std.sizes(), std.scalar_type(), std.device());
  return normal_ft_out(mean, std, std::move(gen), out);
}
at::Tensor& normal_tt_out(const at::Tensor& mean, const at::Tensor& std,
                          std::optional<at::Generator> gen, at::Tensor& out) {
  check_std(std);
  at::native::resize_output(out, at::infer_size_dimvector(mean.sizes(), std.sizes()));
  out.normal_(0, 1, gen);
  out.mul_(std).add_(mean);
  return out;
}
at::Tensor normal_tt(const at::Tensor& mean, const at::Tensor& std,
                     std::optional<at::Generator> gen) {
  common_device("normal", {&mean, &std});
  at::Tensor out = empty_device(at::infer_size_dimvector(mean.sizes(), std.sizes()),
                                at::result_type(mean, std), mean.device());
  return normal_tt_out(mean, std, std::move(gen), out);
}

at::Tensor& randperm_out(int64_t n, std::optional<at::Generator> gen, at::Tensor& out) {
  TORCH_CHECK(n >= 0, "n must be non-negative, got", n);
  TORCH_CHECK(!out.is_complex() && out.scalar_type() != c10::kBool,
              "randperm is not implemented for ", out.scalar_type());
  at::native::check_supported_max_int_with_precision(n, out);
  at::native::resize_output(out, {n});
  if (n == 0) return out;
  auto [seed, offset] = reserve_philox(out.device(), gen, Op::Randperm, {n});
  launch(Op::Randperm, {seed, offset}, {tensor_operand(out)});
  return out;
}

at::Tensor& multinomial_out(const at::Tensor& self, int64_t n_sample, bool replacement,
                            std::optional<at::Generator> gen, at::Tensor& result) {
  TORCH_CHECK(result.device() == self.device(), "multinomial arguments must have the same device");
  TORCH_CHECK(self.dim() > 0 && self.dim() <= 2, "prob_dist must be 1 or 2 dim");
  TORCH_CHECK(
      at::isFloatingType(self.scalar_type()),
      "multinomial only supports floating-point dtypes for input, got: ", self.scalar_type());
  TORCH_CHECK(result.scalar_type() == c10::kLong,
              "multinomial expects Long tensor out, got: ", result.scalar_type());
  TORCH_CHECK(n_sample > 0, "cannot sample n_sample <= 0 samples");
  const int64_t C = self.size(-1);
  TORCH_CHECK(replacement || (n_sample <= C),
              "cannot sample n_sample > prob_dist.size(-1) samples without replacement");
  TORCH_CHECK(C <= (int64_t(1) << 24), "number of categories cannot exceed 2^24");
  if (self.dim() == 1)
    at::native::resize_output(result, {n_sample});
  else
    at::native::resize_output(result, {self.size(0), n_sample});
  if (result.numel() == 0) return result;
  const int64_t N = self.dim() == 2 ? self.size(0) : 1;
  auto [seed, offset] = reserve_philox(self.device(), gen, Op::Multinomial, {N, C, n_sample});
  at::Tensor target =
      result.is_contiguous() ? result : empty_device(result.sizes(), c10::kLong, result.device());
  launch(Op::Multinomial, {seed, offset, tensor_operand(self)}, {tensor_operand(target)},
         {replacement ? 1 : 0});
  if (!target.is_same(result)) result.copy_(target);
  return result;
}
at::Tensor multinomial(const at::Tensor& self, int64_t n_sample, bool replacement,
                       std::optional<at::Generator> gen) {
  at::Tensor result = empty_device({0}, c10::kLong, self.device());
  return multinomial_out(self, n_sample, replacement, std::move(gen), result);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, lib) {
  NativeOps m(lib);  // a declined call runs as a host library kernel
  m.impl("uniform_", uniform_);
  m.impl("normal_", normal_);
  m.impl("bernoulli_.float", bernoulli_float);
  m.impl("random_.from", random_from_to);
  m.impl("random_.to", random_to);
  m.impl("random_", random_);
  m.impl("native_dropout", native_dropout);
  m.impl("native_dropout_backward", native_dropout_backward);
  m.impl("bernoulli_.Tensor", bernoulli_tensor_);
  m.impl("bernoulli.out", bernoulli_out);
  m.impl("exponential_", exponential_);
  m.impl("geometric_", geometric_);
  m.impl("log_normal_", log_normal_);
  m.impl("normal.Tensor_float", normal_tf);
  m.impl("normal.Tensor_float_out", normal_tf_out);
  m.impl("normal.float_Tensor", normal_ft);
  m.impl("normal.float_Tensor_out", normal_ft_out);
  m.impl("normal.Tensor_Tensor", normal_tt);
  m.impl("normal.Tensor_Tensor_out", normal_tt_out);
  m.impl("randperm.generator_out", randperm_out);
  m.impl("multinomial", multinomial);
  m.impl("multinomial.out", multinomial_out);
}

}  // namespace openneuron::bridge
