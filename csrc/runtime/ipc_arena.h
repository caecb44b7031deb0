// Device memory other processes can map (openneuron/ipc.h): one memfd per core,
// the backing of every segment the core's allocator creates once sharing is
// enabled. Segments sit at fixed offsets of one reserved address range, so a
// peer maps the whole file once and finds any of them at the same offset.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

namespace openneuron::runtime {

class IpcArena {
 public:
  // Creates the memfd (sparse, `bytes` long) and reserves as much address
  // space. nullptr and *error set on failure.
  static std::unique_ptr<IpcArena> create(int device, size_t bytes, std::string* error);
  ~IpcArena();
  IpcArena(const IpcArena&) = delete;
  IpcArena& operator=(const IpcArena&) = delete;

  // Maps a segment of `size` bytes (a multiple of the page size) read-write;
  // nullptr when the range has no room left (the caller then uses private
  // memory: sharing is an optimisation, never a reason to fail an allocation).
  void* map_segment(size_t size);
  // Frees the segment's pages (in every process that maps them: a peer's view
  // of freed memory reads zeros and costs nothing) and reserves the range again.
  void unmap_segment(void* base, size_t size);
  bool contains(const void* p) const {
    const auto a = reinterpret_cast<uintptr_t>(p), b = reinterpret_cast<uintptr_t>(base_);
    return a >= b && a < b + bytes_;
  }
  uint64_t offset_of(const void* p) const {
    return reinterpret_cast<uintptr_t>(p) - reinterpret_cast<uintptr_t>(base_);
  }
  int fd() const { return fd_; }
  uint64_t inode() const { return inode_; }
  size_t bytes() const { return bytes_; }

 private:
  IpcArena(int fd, uint64_t inode, char* base, size_t bytes);
  int fd_;
  uint64_t inode_;
  char* base_;
  size_t bytes_;
  std::map<size_t, size_t> free_;  // offset -> length of each free range, merged
};

}  // namespace openneuron::runtime
