// Element types and tensor layouts shared by the engines and the compiler.
// No torch: the bridge maps c10::ScalarType to DType.
#pragma once

#include <cstddef>
#include <cstdint>

namespace openneuron {

enum class DType : uint8_t {
  Bool,
  UInt8,
  Int8,
  Int16,
  Int32,
  Int64,
  Float16,
  BFloat16,
  Float32,
  Float64,  // never stored on the device (the bridge narrows it); kept for completeness
  Complex64,
  Float8E4M3,  // trn3 profile only
  Float8E5M2,  // trn3 profile only
};

size_t dtype_size(DType t);
const char* dtype_name(DType t);
bool is_floating(DType t);  // Float16/BFloat16/Float32/Float64/Float8*
bool is_integral(DType t, bool include_bool);

inline constexpr int kMaxDims = 8;

// A strided view of device memory. Sizes and strides count elements; the data
// pointer (storage base + storage offset) is not part of the type: it is a
// launch argument, so one compiled program serves every tensor of this layout.
struct TensorType {
  DType dtype = DType::Float32;
  int32_t ndim = 0;
  int64_t sizes[kMaxDims] = {};
  int64_t strides[kMaxDims] = {};

  int64_t numel() const;
  bool is_contiguous() const;
  // Dense in PyTorch's channels_last order ([N, C, *S] stored as [N, *S, C]); 3-5 dims.
  bool is_channels_last() const;
};

}  // namespace openneuron
