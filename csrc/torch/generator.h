// Counter-based (Philox) generator of a neuron device: the state is a seed and
// an offset into the Philox counter space, so kernels on any thread draw
// reproducible numbers without sharing mutable state.
#pragma once

#include <ATen/core/Generator.h>
#include <c10/core/GeneratorImpl.h>

#include <utility>

namespace openneuron::bridge {

class NeuronGeneratorImpl : public c10::GeneratorImpl {
 public:
  explicit NeuronGeneratorImpl(c10::DeviceIndex index);

  void set_current_seed(uint64_t seed) override;
  void set_offset(uint64_t offset) override;
  uint64_t get_offset() const override;
  uint64_t current_seed() const override;
  uint64_t seed() override;
  void set_state(const c10::TensorImpl& new_state) override;
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override;
  static c10::DeviceType device_type() { return c10::DeviceType::PrivateUse1; }

  // Returns {seed, offset} and advances the offset; caller holds mutex_.
  std::pair<uint64_t, uint64_t> reserve(uint64_t increment);

 private:
  NeuronGeneratorImpl* clone_impl() const override;
  uint64_t seed_ = 67280421310721ULL;
  uint64_t offset_ = 0;
};

}  // namespace openneuron::bridge
