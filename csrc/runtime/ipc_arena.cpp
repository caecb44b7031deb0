// The shareable arena behind a core's segments (ipc_arena.h).
#include "ipc_arena.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iterator>

#include "protect.h"
#include "status.h"

namespace openneuron::runtime {

namespace {

constexpr size_t kAlign = size_t{2} << 20;

}  // namespace

std::unique_ptr<IpcArena> IpcArena::create(int device, size_t bytes, std::string* error) {
  const std::string name = "openneuron-neuron" + std::to_string(device);
  const int fd = memfd_create(name.c_str(), MFD_CLOEXEC);
  if (fd < 0) {
    *error = std::string("memfd_create: ") + std::strerror(errno);
    return nullptr;
  }
  struct stat st{};
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0 || fstat(fd, &st) != 0) {
    *error = std::string("sizing the memfd: ") + std::strerror(errno);
    close(fd);
    return nullptr;
  }
  void* raw =
      mmap(nullptr, bytes + kAlign, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (raw == MAP_FAILED) {
    *error = strprintf("reserving %s of address space: %s", format_size(bytes).c_str(),
                       std::strerror(errno));
    close(fd);
    return nullptr;
  }
  // Keep the aligned part only.
  char* lo = static_cast<char*>(raw);
  char* base =
      reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(lo) + kAlign - 1) & ~(kAlign - 1));
  if (base > lo) munmap(lo, static_cast<size_t>(base - lo));
  if (const size_t tail = static_cast<size_t>(lo + bytes + kAlign - (base + bytes)); tail > 0) {
    munmap(base + bytes, tail);
  }
  return std::unique_ptr<IpcArena>(new IpcArena(fd, static_cast<uint64_t>(st.st_ino),
                                                static_cast<uint64_t>(st.st_dev), base, bytes));
}

IpcArena::IpcArena(int fd, uint64_t inode, uint64_t dev, char* base, size_t bytes)
    : fd_(fd), inode_(inode), dev_(dev), base_(base), bytes_(bytes) {
  free_[0] = bytes;
}

IpcArena::~IpcArena() {
  // Only what the arena still holds: a range given up may belong to someone else now.
  for (const auto* ranges : {&free_, &mapped_})
    for (const auto& [off, len] : *ranges) munmap(base_ + off, len);
  close(fd_);
}

bool IpcArena::contains(const void* p) const {
  const auto a = reinterpret_cast<uintptr_t>(p), b = reinterpret_cast<uintptr_t>(base_);
  if (a < b || a >= b + bytes_) return false;
  auto it = mapped_.upper_bound(static_cast<size_t>(a - b));
  if (it == mapped_.begin()) return false;
  --it;
  return a - b < it->first + it->second;
}

void* IpcArena::map_segment(size_t size) {
  // First fit: segments are few and long-lived (the allocator caches them).
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < size) continue;
    const size_t off = it->first, len = it->second;
    free_.erase(it);
    if (len > size) free_[off + size] = len - size;
    void* p = mmap(base_ + off, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd_,
                   static_cast<off_t>(off));
    // Some kernels drop the old mapping when MAP_FIXED fails, and another
    // mapping may land in the gap: the range is given up, never reused.
    if (p == MAP_FAILED) return nullptr;
    protect_device_range(p, size);
    mapped_[off] = size;
    return p;
  }
  return nullptr;
}

void IpcArena::unmap_segment(void* base, size_t size) {
  char* p = static_cast<char*>(base);
  const size_t off = static_cast<size_t>(p - base_);
  mapped_.erase(off);
  fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(off),
            static_cast<off_t>(size));
  // Failing, the range keeps its (emptied) shared mapping and is not reused.
  if (mmap(p, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0) ==
      MAP_FAILED) {
    return;
  }
  release_range(off, size);
}

void IpcArena::release_range(size_t off, size_t size) {
  size_t start = off, len = size;
  auto next = free_.lower_bound(off);
  if (next != free_.end() && next->first == off + size) {
    len += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == off) {
      start = prev->first;
      len += prev->second;
      free_.erase(prev);
    }
  }
  free_[start] = len;
}

}  // namespace openneuron::runtime
