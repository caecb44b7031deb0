// POSIX shared-memory segments of the communicator: naming, layout, create,
// map, and the cleanup of segments whose creator died before unlinking them.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shm_impl.h"

namespace openneuron::collectives {
namespace detail {
namespace {

constexpr const char* kPrefix = "openneuron-";

size_t round_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

std::string errno_text(const char* call, const std::string& name, int err) {
  return std::string("shm: ") + call + "(" + name + ") failed: " + std::strerror(err);
}

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

}  // namespace

Layout make_layout(int size, size_t chunk_bytes, size_t ring_bytes) {
  Layout l;
  l.size = size;
  l.chunk = chunk_bytes;
  l.ring = ring_bytes;
  size_t off = round_up(sizeof(ControlBlock), kLine);
  l.p2p_lines = off;
  off += 2 * static_cast<size_t>(size) * sizeof(Line);
  l.a2a = off;
  off += 2 * 2 * static_cast<size_t>(size) * sizeof(uint64_t);
  // Page-aligned staging buffers: the copies into them run at full width.
  off = round_up(off, 4096);
  l.stage[0] = off;
  l.stage[1] = off + chunk_bytes;
  l.rings = round_up(off + 2 * chunk_bytes, 4096);
  l.total = l.rings + static_cast<size_t>(size - 1) * ring_bytes;
  return l;
}

std::string segment_name(const std::string& group_key, int rank) {
  char buf[96];
  std::snprintf(buf, sizeof(buf), "/%s%d-%016llx-%d", kPrefix, static_cast<int>(getpid()),
                static_cast<unsigned long long>(fnv1a(group_key)), rank);
  return buf;
}

Mapping create_segment(const std::string& name, size_t len) {
  int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0 && errno == EEXIST) {
    // Our own pid and group key: a communicator of this process that failed
    // before unlinking. Nobody else can own the name.
    shm_unlink(name.c_str());
    fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  }
  if (fd < 0) throw CollectiveError(errno_text("shm_open", name, errno));
  if (ftruncate(fd, static_cast<off_t>(len)) != 0) {
    const int err = errno;
    close(fd);
    shm_unlink(name.c_str());
    throw CollectiveError(errno_text("ftruncate", name, err) + " (" + std::to_string(len) + " bytes)");
  }
  void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int err = errno;
  close(fd);
  if (p == MAP_FAILED) {
    shm_unlink(name.c_str());
    throw CollectiveError(errno_text("mmap", name, err));
  }
  return {static_cast<char*>(p), len};
}

Mapping map_segment(const std::string& name) {
  const int fd = shm_open(name.c_str(), O_RDWR, 0600);
  if (fd < 0) throw CollectiveError(errno_text("shm_open", name, errno));
  struct stat st{};
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    close(fd);
    throw CollectiveError(errno_text("fstat", name, err));
  }
  const size_t len = static_cast<size_t>(st.st_size);
  if (len < sizeof(ControlBlock)) {
    close(fd);
    throw CollectiveError("shm: segment " + name + " is too small (" + std::to_string(len) + " bytes)");
  }
  void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int err = errno;
  close(fd);
  if (p == MAP_FAILED) throw CollectiveError(errno_text("mmap", name, err));
  return {static_cast<char*>(p), len};
}

void unmap(Mapping& m) {
  if (m.base != nullptr) munmap(m.base, m.len);
  m = {};
}

// A killed rank stays a zombie until its parent reaps it (a launcher that
// has not noticed yet): kill(pid, 0) still succeeds then, /proc says 'Z'.
bool pid_alive(int pid) {
  if (kill(pid, 0) == -1 && errno == ESRCH) return false;
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", pid);
  FILE* f = std::fopen(path, "r");
  if (f == nullptr) return true;  // no /proc: trust kill()
  char buf[512] = {};
  const size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  // "pid (comm) S ...": the state follows the last ')'.
  const char* close = std::strrchr(buf, ')');
  return !(n > 0 && close != nullptr && close[1] == ' ' && (close[2] == 'Z' || close[2] == 'X'));
}

}  // namespace detail

int remove_stale_segments() {
  DIR* dir = opendir("/dev/shm");
  if (dir == nullptr) return 0;
  int removed = 0;
  const size_t plen = std::strlen(detail::kPrefix);
  while (dirent* e = readdir(dir)) {
    const char* name = e->d_name;
    if (std::strncmp(name, detail::kPrefix, plen) != 0) continue;
    char* end = nullptr;
    const long pid = std::strtol(name + plen, &end, 10);
    if (end == name + plen || *end != '-' || pid <= 0) continue;
    if (detail::pid_alive(static_cast<int>(pid))) continue;
    if (shm_unlink((std::string("/") + name).c_str()) == 0) ++removed;
  }
  closedir(dir);
  return removed;
}

}  // namespace openneuron::collectives
