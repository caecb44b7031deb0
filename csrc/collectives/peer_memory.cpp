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
  std::snprintf(buf, sizeof(buf), "%" PRId32 " %" PRId32 " %" PRIu64 " %" PRIu64, h.pid, h.fd,
                h.inode, h.bytes);
  return buf;
}

bool decode(const std::string& s, onrt_ipc_handle* h) {
  *h = onrt_ipc_handle{};
  return std::sscanf(s.c_str(), "%" SCNd32 " %" SCNd32 " %" SCNu64 " %" SCNu64, &h->pid, &h->fd,
                     &h->inode, &h->bytes) == 4;
}

}  // namespace

void ShmCommunicatorImpl::map_peer_memory(Rendezvous& rdv) {
  peer_base_.assign(size_, nullptr);
  peer_bytes_.assign(size_, 0);
  if (opt_.device < 0 || size_ < 2) return;
  auto key = [](const char* what, int r) { return std::string(what) + std::to_string(r); };
  onrt_ipc_handle own{};
  const bool shareable = onrt_ipc_range_handle(opt_.device, &own) == ONRT_OK;
  own_inode_ = own.inode;
  rdv.set(key("ipc/", rank_), shareable ? encode(own) : "none");
  bool ok = shareable;
  for (int r : others_) {
    onrt_ipc_handle h{};
    void* base = nullptr;
    if (decode(rdv.get(key("ipc/", r)), &h) && onrt_ipc_open(&h, &base) == ONRT_OK) {
      peer_base_[r] = static_cast<char*>(base);
      peer_bytes_[r] = h.bytes;
    } else {
      ok = false;
    }
  }
  rdv.set(key("ipc-ok/", rank_), ok ? "1" : "0");
  for (int r : others_) ok = rdv.get(key("ipc-ok/", r)) == "1" && ok;
  peer_memory_ = ok;
  if (!ok) unmap_peer_memory();
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
      h.inode != own_inode_) {
    return CallHeader::kNotShared;
  }
  return h.offset;
}

bool ShmCommunicatorImpl::peer_buffers(char* own, std::vector<char*>* out) {
  out->assign(size_, nullptr);
  for (int r = 0; r < size_; ++r) {
    const CallHeader& h = peers_[r].ctl->headers[seq_ & 1];
    const uint64_t off = h.shared_offset;
    if (off == CallHeader::kNotShared) return false;
    if (r != rank_ && (off > peer_bytes_[r] || h.bytes > peer_bytes_[r] - off)) {
      fail(what_ + ": rank " + std::to_string(r) + "'s buffer lies outside its shareable memory");
    }
    (*out)[r] = r == rank_ ? own : peer_base_[r] + off;
  }
  return true;
}

}  // namespace openneuron::collectives::detail
