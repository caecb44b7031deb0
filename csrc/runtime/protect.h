// Protected device memory (OPENNEURON_PROTECT_MEMORY=1, DESIGN.md "Memory"): a
// debug mode in which device memory carries a memory protection key (x86 PKU)
// that host threads lack, so a stray host read or write of a device pointer
// faults at the culprit instead of silently working. Access rights are per
// thread, which mprotect cannot give: runtime work opens device memory for its
// own thread only (DeviceAccess), while the Python thread and every other
// thread stay locked out, even while a worker runs a kernel beside them. A
// thread started inside runtime work inherits the access (the kernels' OpenMP
// teams rely on it).
#pragma once

#include <cstddef>
#include <string>

namespace openneuron::runtime {

// Allocates the key and installs the fault reporter; idempotent. False with the
// reason in *error when the CPU or kernel has no protection keys.
bool enable_memory_protection(std::string* error);
bool memory_protected();

// Tags a freshly mapped device range with the key (no-op when protection is off).
// Every mapping of device memory passes here, peers' mappings included, since a
// new mmap of a range drops its old key.
void protect_device_range(void* base, size_t bytes);

// Opens device memory to the calling thread for the scope; nests.
class DeviceAccess {
 public:
  DeviceAccess();
  ~DeviceAccess();
  DeviceAccess(const DeviceAccess&) = delete;
  DeviceAccess& operator=(const DeviceAccess&) = delete;

 private:
  unsigned saved_;
};

}  // namespace openneuron::runtime
