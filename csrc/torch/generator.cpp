#include "generator.h"

#include <ATen/EmptyTensor.h>
#include <c10/core/TensorImpl.h>
#include <c10/util/Exception.h>

#include <cstring>
#include <random>

namespace openneuron::bridge {

namespace {
// State layout: seed (8 bytes) then offset (8 bytes), as a CPU uint8 tensor,
// like CUDA's Philox generator state.
constexpr size_t kStateBytes = 2 * sizeof(uint64_t);
}  // namespace

NeuronGeneratorImpl::NeuronGeneratorImpl(c10::DeviceIndex index)
    : c10::GeneratorImpl(c10::Device(c10::DeviceType::PrivateUse1, index),
                         c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)) {}

void NeuronGeneratorImpl::set_current_seed(uint64_t seed) {
  seed_ = seed;
  offset_ = 0;
}
void NeuronGeneratorImpl::set_offset(uint64_t offset) { offset_ = offset; }
uint64_t NeuronGeneratorImpl::get_offset() const { return offset_; }
uint64_t NeuronGeneratorImpl::current_seed() const { return seed_; }

uint64_t NeuronGeneratorImpl::seed() {
  const uint64_t s = c10::detail::getNonDeterministicRandom();
  set_current_seed(s);
  return s;
}

void NeuronGeneratorImpl::set_state(const c10::TensorImpl& state) {
  TORCH_CHECK(state.dtype() == caffe2::TypeMeta::Make<uint8_t>() && state.numel() == kStateBytes,
              "neuron generator state must be a uint8 tensor of ", kStateBytes, " bytes, got ",
              state.numel(), " elements of ", state.dtype().name());
  TORCH_CHECK(state.device().is_cpu(), "neuron generator state must be a CPU tensor");
  const auto* bytes = static_cast<const uint8_t*>(state.data());
  std::memcpy(&seed_, bytes, sizeof(uint64_t));
  std::memcpy(&offset_, bytes + sizeof(uint64_t), sizeof(uint64_t));
}

c10::intrusive_ptr<c10::TensorImpl> NeuronGeneratorImpl::get_state() const {
  auto state = at::detail::empty_cpu({static_cast<int64_t>(kStateBytes)}, c10::kByte,
                                     std::nullopt, std::nullopt, std::nullopt, std::nullopt);
  auto* bytes = static_cast<uint8_t*>(state.data_ptr());
  std::memcpy(bytes, &seed_, sizeof(uint64_t));
  std::memcpy(bytes + sizeof(uint64_t), &offset_, sizeof(uint64_t));
  return state.getIntrusivePtr();
}

std::pair<uint64_t, uint64_t> NeuronGeneratorImpl::reserve(uint64_t increment) {
  const uint64_t at = offset_;
  // Counters are consumed in blocks of four values (one Philox4x32 call).
  offset_ += (increment + 3) / 4 * 4;
  return {seed_, at};
}

NeuronGeneratorImpl* NeuronGeneratorImpl::clone_impl() const {
  auto* g = new NeuronGeneratorImpl(device().index());
  g->seed_ = seed_;
  g->offset_ = offset_;
  return g;
}

}  // namespace openneuron::bridge
