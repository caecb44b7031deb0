// Peers' shareable device memory mapped into this process (onrt_ipc_open and
// onrt_ipc_close of openneuron/ipc.h; the handles of this process's own memory
// are in memory.cpp).
#include "openneuron/ipc.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>

#include "protect.h"
#include "status.h"

using namespace openneuron::runtime;

namespace {

// Peers' ranges mapped here: opened once however many
// communicators use them.
struct PeerMapping {
  void* base;
  size_t bytes;
  int refs;
};
struct PeerMappings {
  std::mutex mu;
  std::map<std::tuple<int32_t, uint64_t, uint64_t>, PeerMapping> by_range;  // (pid, dev, inode)
};
PeerMappings& peer_mappings() {
  static PeerMappings* m = new PeerMappings;  // never destroyed: closes may run during exit
  return *m;
}

}  // namespace

extern "C" {

onrt_status onrt_ipc_open(const onrt_ipc_handle* h, void** base) {
  if (h == nullptr || base == nullptr) {
    return fail(ONRT_ERROR_INVALID_ARGUMENT, "onrt_ipc_open: NULL argument");
  }
  *base = nullptr;
  auto& m = peer_mappings();
  std::lock_guard<std::mutex> lock(m.mu);
  const auto key = std::make_tuple(h->pid, h->dev, h->inode);
  if (auto it = m.by_range.find(key); it != m.by_range.end()) {
    ++it->second.refs;
    *base = it->second.base;
    return ONRT_OK;
  }
  const std::string path = "/proc/" + std::to_string(h->pid) + "/fd/" + std::to_string(h->fd);
  const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    return failf(ONRT_ERROR_UNSUPPORTED, "onrt_ipc_open: cannot open %s: %s", path.c_str(),
                 std::strerror(errno));
  }
  struct stat st{};
  if (fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_ino) != h->inode ||
      static_cast<uint64_t>(st.st_dev) != h->dev || static_cast<uint64_t>(st.st_size) < h->bytes) {
    close(fd);
    return failf(ONRT_ERROR_INVALID_HANDLE,
                 "onrt_ipc_open: %s is not the device memory of the handle (closed or reused)",
                 path.c_str());
  }
  void* p = mmap(nullptr, h->bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
  const int err = errno;
  close(fd);  // the mapping keeps the memory alive
  if (p == MAP_FAILED) {
    return failf(ONRT_ERROR_UNSUPPORTED, "onrt_ipc_open: mapping %s: %s",
                 format_size(h->bytes).c_str(), std::strerror(err));
  }
  protect_device_range(p, h->bytes);
  m.by_range[key] = PeerMapping{p, static_cast<size_t>(h->bytes), 1};
  *base = p;
  return ONRT_OK;
}

onrt_status onrt_ipc_close(void* base) {
  auto& m = peer_mappings();
  std::lock_guard<std::mutex> lock(m.mu);
  for (auto it = m.by_range.begin(); it != m.by_range.end(); ++it) {
    if (it->second.base != base) continue;
    if (--it->second.refs == 0) {
      munmap(it->second.base, it->second.bytes);
      m.by_range.erase(it);
    }
    return ONRT_OK;
  }
  return failf(ONRT_ERROR_INVALID_ARGUMENT, "onrt_ipc_close: %p was not opened by onrt_ipc_open",
               base);
}

}  // extern "C"
