// The peers' device memory, mapped into this rank (openneuron/ipc.h): the
// handles exchanged at create(), and each collective's buffers found in them.
// A group uses the peers' memory only if every rank mapped every peer's; a
// rank that cannot (no /proc access to the peer, another pid namespace)
// leaves the whole group on the staged algorithms, which need no mapping.
#include <cinttypes>
#include <cstdio>

#include "openneuron/ipc.h"
#include "shm_impl.h"

namespace openneuron::collectives::detail {
namespace {

std::string encode(const onrt_ipc_handle& h) {
  char buf[128];
  std::snprintf(buf, sizeof(buf), "%" PRId32 " %" PRId32 " %" PRIu64 " %" PRIu64 " %" PRIu64, h.pid,
                h.fd, h.dev, h.inode, h.bytes);
  return buf;
}

bool decode(const std::string& s, onrt_ipc_handle* h) {
  *h = onrt_ipc_handle{};
  return std::sscanf(s.c_str(), "%" SCNd32 " %" SCNd32 " %" SCNu64 " %" SCNu64 " %" SCNu64, &h->pid,
                     &h->fd, &h->dev, &h->inode, &h->bytes) == 5;
}

}  // namespace

void ShmCommunicatorImpl::map_peer_memory(Rendezvous& rdv) {
  peer_base_.assign(size_, nullptr);
  peer_bytes_.assign(size_, 0);
  if (size_ < 2) return;
  // Every rank takes part in both exchanges, with or without a core of its
  // own: a rank that skipped them would leave its peers waiting on the store.
  auto key = [](const char* what, int r) { return std::string(what) + std::to_string(r); };
  onrt_ipc_handle own{};
  std::string why;
  bool warn = false;  // a failure here, not a choice (OPENNEURON_SHAREABLE_MEMORY=off) or a peer's
  bool ok = false;
  if (opt_.device < 0) {
    why = "rank " + std::to_string(rank_) + " has no core";
  } else if (onrt_ipc_range_handle(opt_.device, &own) != ONRT_OK) {
    why = onrt_last_error();
    warn = why.find("OPENNEURON_SHAREABLE_MEMORY=off") == std::string::npos;
  } else {
    ok = true;
  }
  own_range_ = own;
  rdv.set(key("ipc/", rank_), ok ? encode(own) : "none");
  for (int r : others_) {
    onrt_ipc_handle h{};
    void* base = nullptr;
    if (!decode(rdv.get(key("ipc/", r)), &h)) {
      if (ok) why = "rank " + std::to_string(r) + "'s memory is not shareable";
      ok = false;
    } else if (ok && onrt_ipc_open(&h, &base) != ONRT_OK) {
      why = onrt_last_error();
      warn = true;
      ok = false;
    } else if (ok) {
      peer_base_[r] = static_cast<char*>(base);
      peer_bytes_[r] = h.bytes;
    }
  }
  rdv.set(key("ipc-ok/", rank_), ok ? "1" : "0");
  bool all = ok;
  for (int r : others_) all = rdv.get(key("ipc-ok/", r)) == "1" && all;
  peer_memory_ = all;
  if (all) return;
  unmap_peer_memory();
  if (!why.empty()) {
    const std::string message = "rank " + std::to_string(rank_) +
                                ": collectives stage every copy, the peers' device memory is not "
                                "mapped here: " +
                                why;
    onrt_log(warn ? ONRT_LOG_WARNING : ONRT_LOG_INFO, message.c_str());
  }
}

void ShmCommunicatorImpl::unmap_peer_memory() {
  for (char*& base : peer_base_) {
    if (base != nullptr) onrt_ipc_close(base);
    base = nullptr;
  }
  peer_memory_ = false;
}

uint64_t ShmCommunicatorImpl::shared_offset_of(const void* data) const {
  onrt_ipc_handle h{};
  if (!peer_memory_ || data == nullptr || onrt_ipc_get_handle(data, &h) != ONRT_OK ||
      h.inode != own_range_.inode || h.dev != own_range_.dev) {
    return CallHeader::kNotShared;
  }
  return h.offset;
}

bool ShmCommunicatorImpl::peer_buffers(char* own, std::vector<char*>* out) {
  // Whether every rank's buffer is shared first, then the bounds: every rank
  // sees the same headers, so all take the same path or all fail.
  for (int r = 0; r < size_; ++r)
    if (peers_[r].ctl->headers[seq_ & 1].shared_offset == CallHeader::kNotShared) return false;
  out->assign(size_, nullptr);
  for (int r = 0; r < size_; ++r) {
    const CallHeader& h = peers_[r].ctl->headers[seq_ & 1];
    const uint64_t off = h.shared_offset;
    if (r != rank_ && (off > peer_bytes_[r] || h.bytes > peer_bytes_[r] - off)) {
      fail(what_ + ": rank " + std::to_string(r) + "'s buffer lies outside its shareable memory");
    }
    (*out)[r] = r == rank_ ? own : peer_base_[r] + off;
  }
  return true;
}

}  // namespace openneuron::collectives::detail
