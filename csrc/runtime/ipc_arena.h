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
  // space, 2 MiB aligned (so the kernel may back segments with huge pages where
  // it allows them for shared memory). nullptr and *error set on failure.
  static std::unique_ptr<IpcArena> create(int device, size_t bytes, std::string* error);
  ~IpcArena();
  IpcArena(const IpcArena&) = delete;
  IpcArena& operator=(const IpcArena&) = delete;

  // Maps a segment of `size` bytes (a multiple of the page size) read-write;
  // nullptr when the range has no room left (the caller then uses private
  // memory: sharing is an optimisation, never a reason to fail an allocation).
  void* map_segment(size_t size);
  // Frees the segment's pages in every process that maps them and reserves
  // its addresses again. (A peer that still reads there gets fresh zero pages.)
  void unmap_segment(void* base, size_t size);
  // Whether `p` lies in a segment mapped by map_segment.
  bool contains(const void* p) const;
  uint64_t offset_of(const void* p) const {
    return reinterpret_cast<uintptr_t>(p) - reinterpret_cast<uintptr_t>(base_);
  }
  int fd() const { return fd_; }
  uint64_t inode() const { return inode_; }
  uint64_t dev() const { return dev_; }
  size_t bytes() const { return bytes_; }

 private:
  IpcArena(int fd, uint64_t inode, uint64_t dev, char* base, size_t bytes);
  void release_range(size_t off, size_t size);  // back to free_, merged with neighbours
  int fd_;
  uint64_t inode_;
  uint64_t dev_;
  char* base_;
  size_t bytes_;
  std::map<size_t, size_t> free_;    // offset -> length of each free range, merged
  std::map<size_t, size_t> mapped_;  // offset -> length of each mapped segment
};

}  // namespace openneuron::runtime
