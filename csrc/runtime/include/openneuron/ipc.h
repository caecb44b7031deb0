/*
 * Device memory shared between processes on one host, as CUDA's IPC memory
 * handles share GPU memory: a process enables sharing on a core, hands a peer
 * the handle of an allocation, and the peer maps the owner's memory and reads
 * and writes it in place. The collectives use it to reduce straight out of the
 * peers' tensors instead of staging them (csrc/collectives).
 *
 * On virtual cores, a core's shareable memory is one memfd; a handle names the
 * owner's process and file and an offset into it. Peers need to open the
 * owner's /proc/<pid>/fd entry (same user, same pid namespace): onrt_ipc_open
 * fails otherwise and callers keep to copying.
 */
#ifndef OPENNEURON_IPC_H_
#define OPENNEURON_IPC_H_

#include <stdint.h>

#include "openneuron/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct onrt_ipc_handle {
  int32_t pid;     /* the owning process */
  int32_t fd;      /* its descriptor of the core's shareable memory */
  uint64_t inode;  /* with dev, identifies that memory (fd numbers are reused) */
  uint64_t dev;
  uint64_t bytes;  /* length of the shareable range */
  uint64_t offset; /* of the allocation, from the start of the range */
} onrt_ipc_handle;

/* Segments the core's allocator creates from now on are shareable. Memory
 * allocated before stays private. Idempotent. */
onrt_status onrt_ipc_enable(int device);
/* The handle of the core's whole shareable range (offset 0). Enables sharing. */
onrt_status onrt_ipc_range_handle(int device, onrt_ipc_handle* out);
/* The handle of device memory at `ptr`; ONRT_ERROR_INVALID_ARGUMENT when it is
 * not in shareable memory (allocated before sharing was enabled). */
onrt_status onrt_ipc_get_handle(const void* ptr, onrt_ipc_handle* out);
/* Maps the peer's whole shareable range (once per range; reference counted)
 * and returns where it starts here: the allocation is at *base + offset. */
onrt_status onrt_ipc_open(const onrt_ipc_handle* handle, void** base);
/* Drops one reference taken by onrt_ipc_open; the last unmaps the range. */
onrt_status onrt_ipc_close(void* base);

#ifdef __cplusplus
}
#endif

#endif /* OPENNEURON_IPC_H_ */
