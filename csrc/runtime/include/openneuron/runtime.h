/*
 * OpenNeuron runtime: the hardware boundary.
 *
 * A C-shaped API over virtual NeuronCores. The default implementation runs each
 * core on the host CPU; a real device runtime would implement this same header.
 * Nothing here knows about PyTorch.
 *
 * Conventions
 *  - Every call returns an onrt_status. ONRT_OK is 0. On failure, a human-readable
 *    message naming the cause is available from onrt_last_error() on the calling
 *    thread until its next failing call.
 *  - Handles (streams, events, programs) are opaque pointers. Their lifetimes are
 *    documented on the function that creates them.
 *  - Device memory is owned by the runtime. Host code must not read or write it
 *    directly: use copies, or kernels launched inside programs.
 *  - Calls are thread-safe unless documented otherwise.
 */
#ifndef OPENNEURON_RUNTIME_H_
#define OPENNEURON_RUNTIME_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- status */

typedef enum onrt_status {
  ONRT_OK = 0,
  ONRT_ERROR_INVALID_ARGUMENT = 1,
  ONRT_ERROR_INVALID_DEVICE = 2,   /* index out of range; message lists the cores */
  ONRT_ERROR_OUT_OF_MEMORY = 3,    /* message gives requested/allocated/capacity */
  ONRT_ERROR_INVALID_HANDLE = 4,
  ONRT_ERROR_NOT_READY = 5,        /* query: work still pending (not a failure) */
  ONRT_ERROR_EXECUTION_FAILED = 6, /* a queued operation failed; message names it */
  ONRT_ERROR_UNSUPPORTED = 7,      /* e.g. a dtype the platform profile lacks */
  ONRT_ERROR_FORKED = 8,           /* used in a child forked after initialisation */
  ONRT_ERROR_INVALID_CONFIG = 9,   /* bad environment (platform, visible cores) */
  ONRT_ERROR_INTERRUPTED = 10,     /* a wait ended by the wait check (Ctrl-C); the work goes on */
  ONRT_ERROR_TIMEOUT = 11,         /* the watchdog: a stream made no progress for too long */
} onrt_status;

/* Static name of a status, e.g. "ONRT_ERROR_OUT_OF_MEMORY". */
const char* onrt_status_name(onrt_status status);

/* Detailed message of the last failing call on this thread ("" if none). The
 * pointer stays valid until the next runtime call on this thread. */
const char* onrt_last_error(void);

/* ------------------------------------------------------- initialisation */

/* Initialises the runtime once per process (later calls are cheap no-ops).
 * Environment:
 *   OPENNEURON_NUM_CORES     number of virtual cores (default 2)
 *   NEURON_RT_VISIBLE_CORES  "0", "1,3", "0-2": subset of cores to expose,
 *                            renumbered from 0 in the given order
 *   OPENNEURON_PLATFORM      trn2 | trn3 (default trn2): HBM capacity per core
 *                            (capped by host memory) and supported dtypes
 *   OPENNEURON_HBM_BYTES     optional override of the per-core capacity
 *   NEURON_LAUNCH_BLOCKING / OPENNEURON_LAUNCH_BLOCKING = 1: every launch and
 *                            copy completes before the call returns
 * Fails with ONRT_ERROR_INVALID_CONFIG (message lists valid values) on bad
 * settings, and with ONRT_ERROR_FORKED in a process forked from one that had
 * initialised the runtime (worker threads do not survive fork). */
onrt_status onrt_init(void);

/* 1 once onrt_init succeeded in this process (not inherited across fork). */
int onrt_is_initialized(void);

/* 1 in a child forked after the parent initialised the runtime. */
int onrt_in_bad_fork(void);

/* Number of visible cores. Does not initialise; returns 0 cores on bad config. */
onrt_status onrt_device_count(int* count);

typedef struct onrt_device_properties {
  char name[64];          /* "OpenNeuron virtual NeuronCore (trn2)" */
  char platform[16];      /* "trn2" | "trn3" */
  uint64_t total_memory;  /* allocation limit of this core, bytes */
  int32_t physical_index; /* index before NEURON_RT_VISIBLE_CORES renumbering */
  int32_t supports_fp8;   /* trn3 only */
  int32_t supports_bf16;
  int32_t supports_fp16;
  /* Device memory is addressable by the host at the pointers the allocator
   * returns (virtual cores): host library kernels may run on it in place. */
  int32_t host_mapped;
} onrt_device_properties;

onrt_status onrt_device_get_properties(int device, onrt_device_properties* out);

/* Comma-separated list of valid OPENNEURON_PLATFORM values ("trn2,trn3"). */
const char* onrt_platform_names(void);

/* Waits for all streams of the device; returns the first pending stream error. */
onrt_status onrt_device_synchronize(int device);

/* --------------------------------------------------------------- streams */

/* In-order queue of work executed by the core's worker thread. A failing
 * operation puts the stream in an error state: later work on it is skipped and
 * the error (naming the failed operation) is returned by the next
 * synchronize/query on the stream, which then clears it. */
typedef struct onrt_stream* onrt_stream_t;

/* The default stream of a device exists for the process lifetime. */
onrt_status onrt_stream_get_default(int device, onrt_stream_t* out);
/* Streams from onrt_stream_create live until onrt_stream_destroy, which waits
 * for pending work. */
onrt_status onrt_stream_create(int device, int priority, onrt_stream_t* out);
onrt_status onrt_stream_destroy(onrt_stream_t stream);
onrt_status onrt_stream_synchronize(onrt_stream_t stream);
/* ONRT_OK when idle, ONRT_ERROR_NOT_READY while work is pending. */
onrt_status onrt_stream_query(onrt_stream_t stream);
int onrt_stream_device(onrt_stream_t stream);
/* Stable small integer id, unique per device (0 = default stream). */
int64_t onrt_stream_id(onrt_stream_t stream);
/* Inverse of onrt_stream_id; ONRT_ERROR_INVALID_HANDLE if no such stream. */
onrt_status onrt_stream_from_id(int device, int64_t id, onrt_stream_t* out);

/* Runs fn(user_data) on the stream's worker in stream order. fn returns 0 on
 * success; otherwise it writes a message into err (errlen bytes) and the stream
 * enters its error state, with `name` naming the operation. */
typedef int (*onrt_host_fn)(void* user_data, char* err, size_t errlen);
onrt_status onrt_launch_host_fn(onrt_stream_t stream, const char* name,
                                onrt_host_fn fn, void* user_data);

/* ---------------------------------------------------------------- events */

typedef struct onrt_event* onrt_event_t;

enum { ONRT_EVENT_DEFAULT = 0, ONRT_EVENT_TIMING = 1 };

/* Lives until onrt_event_destroy. */
onrt_status onrt_event_create(unsigned flags, onrt_event_t* out);
onrt_status onrt_event_destroy(onrt_event_t event);
/* Captures the stream's work queued so far. Re-recording replaces it. */
onrt_status onrt_event_record(onrt_event_t event, onrt_stream_t stream);
/* Work queued on `stream` afterwards starts only after the event completes. */
onrt_status onrt_stream_wait_event(onrt_stream_t stream, onrt_event_t event);
/* ONRT_OK when complete (or never recorded), ONRT_ERROR_NOT_READY otherwise. */
onrt_status onrt_event_query(onrt_event_t event);
onrt_status onrt_event_synchronize(onrt_event_t event);
/* Both events need ONRT_EVENT_TIMING and must be complete. */
onrt_status onrt_event_elapsed_ms(onrt_event_t start, onrt_event_t end, float* ms);

/* ---------------------------------------------------------------- memory */

/* Allocates from the device's caching allocator, tagged with `stream`: the block
 * may be reused by later allocations on the same stream as soon as it is freed
 * (stream order makes that safe). Sizes under 1 MiB come from the small pool,
 * others from the large pool; requests are rounded up to size classes (512 B
 * granularity; under 16 MiB to powers-of-two-ish classes). bytes == 0 gives
 * *ptr == NULL. Over capacity (after releasing cached blocks):
 * ONRT_ERROR_OUT_OF_MEMORY with requested, allocated and capacity in the
 * message; the allocator stays usable. */
onrt_status onrt_malloc(int device, size_t bytes, onrt_stream_t stream, void** ptr);
/* Returns a block to the cache. Deferred until work recorded on other streams
 * through onrt_record_stream has completed. NULL is a no-op. */
onrt_status onrt_free(void* ptr);
/* Marks the block as in use by `stream` (not its allocation stream). */
onrt_status onrt_record_stream(void* ptr, onrt_stream_t stream);
/* Device of a pointer inside any live block; ONRT_ERROR_INVALID_ARGUMENT if none. */
onrt_status onrt_pointer_get_device(const void* ptr, int* device);
/* Releases cached, unused segments to the host. */
onrt_status onrt_empty_cache(int device);

/* One counter, same meaning as PyTorch's c10::CachingDeviceAllocator::Stat. */
typedef struct onrt_stat {
  int64_t current;
  int64_t peak;
  int64_t allocated; /* cumulative increments */
  int64_t freed;     /* cumulative decrements */
} onrt_stat;

enum { ONRT_POOL_ALL = 0, ONRT_POOL_SMALL = 1, ONRT_POOL_LARGE = 2, ONRT_POOL_COUNT = 3 };

typedef struct onrt_memory_stats {
  onrt_stat allocation[ONRT_POOL_COUNT];       /* number of live blocks */
  onrt_stat segment[ONRT_POOL_COUNT];          /* number of reserved segments */
  onrt_stat active[ONRT_POOL_COUNT];           /* blocks allocated or pending free */
  onrt_stat inactive_split[ONRT_POOL_COUNT];
  onrt_stat allocated_bytes[ONRT_POOL_COUNT];  /* rounded sizes of live blocks */
  onrt_stat reserved_bytes[ONRT_POOL_COUNT];   /* segments held from the host */
  onrt_stat active_bytes[ONRT_POOL_COUNT];
  onrt_stat inactive_split_bytes[ONRT_POOL_COUNT];
  onrt_stat requested_bytes[ONRT_POOL_COUNT];  /* sizes as requested */
  int64_t num_alloc_retries; /* cache flushes to satisfy a request */
  int64_t num_ooms;
  int64_t num_device_alloc;  /* segments obtained from the host */
  int64_t num_device_free;
  int64_t max_split_size;    /* -1: unlimited */
} onrt_memory_stats;

onrt_status onrt_memory_get_stats(int device, onrt_memory_stats* out);
onrt_status onrt_memory_reset_peak(int device);
onrt_status onrt_memory_reset_accumulated(int device);
/* Memory history, for tools like PyTorch's memory snapshot. The observer sees
 * every allocation, free request, completed free (once the streams that used
 * the block have passed it) and segment map/unmap, on every device. It runs
 * under the device allocator's lock, on whichever thread caused the event: it
 * must not call the allocator. One observer per process; NULL removes it. */
typedef enum onrt_memory_action {
  ONRT_MEMORY_ALLOC = 0,
  ONRT_MEMORY_FREE_REQUESTED = 1,
  ONRT_MEMORY_FREE_COMPLETED = 2,
  ONRT_MEMORY_SEGMENT_ALLOC = 3,
  ONRT_MEMORY_SEGMENT_FREE = 4,
} onrt_memory_action;
typedef struct onrt_memory_event {
  onrt_memory_action action;
  int32_t device;
  uintptr_t address;
  size_t size; /* block (rounded) or segment size */
  size_t requested;
  int64_t stream;          /* onrt_stream_id of the stream the block belongs to */
  int64_t allocated_bytes; /* the device's totals after the event */
  int64_t reserved_bytes;
} onrt_memory_event;
typedef void (*onrt_memory_observer)(const onrt_memory_event* event, void* user);
void onrt_memory_set_observer(onrt_memory_observer observer, void* user);

/* The device's segments and the blocks they are cut into, lowest address first. */
typedef enum onrt_block_state {
  ONRT_BLOCK_ALLOCATED = 0,
  ONRT_BLOCK_PENDING_FREE = 1, /* freed, other streams may still use it */
  ONRT_BLOCK_FREE = 2,
} onrt_block_state;
typedef struct onrt_block_info {
  uintptr_t address;
  size_t size;
  size_t requested;
  onrt_block_state state;
} onrt_block_info;
typedef struct onrt_segment_info {
  uintptr_t address;
  size_t size;
  int pool; /* ONRT_POOL_SMALL or ONRT_POOL_LARGE */
  int64_t stream;
  const onrt_block_info* blocks;
  size_t num_blocks;
} onrt_segment_info;
typedef void (*onrt_segment_visitor)(const onrt_segment_info* segment, void* user);
/* Visits a consistent copy, taken under the lock; visit runs without it. */
onrt_status onrt_memory_snapshot(int device, onrt_segment_visitor visit, void* user);
/* free = capacity - reserved; total = capacity. */
onrt_status onrt_memory_get_info(int device, uint64_t* free_bytes, uint64_t* total_bytes);

/* ---------------------------------------------------------------- copies */

typedef enum onrt_copy_kind {
  ONRT_COPY_HOST_TO_DEVICE = 0,
  ONRT_COPY_DEVICE_TO_HOST = 1,
  ONRT_COPY_DEVICE_TO_DEVICE = 2, /* also across cores */
} onrt_copy_kind;

/* Queues a copy on `stream`. Host memory must stay valid until the stream
 * reaches the copy. */
onrt_status onrt_memcpy_async(void* dst, const void* src, size_t bytes, onrt_copy_kind kind,
                              onrt_stream_t stream);
/* Queues the copy and waits for it (and for all earlier work on the stream).
 * When the stream is idle the copy runs on the calling thread. */
onrt_status onrt_memcpy(void* dst, const void* src, size_t bytes, onrt_copy_kind kind,
                        onrt_stream_t stream);

/* -------------------------------------------------------------- programs */

/* A program is the unit of device work: a fixed list of engine instructions over
 * the program's arguments. Eager single ops and compiled graphs are both
 * programs; the compiler builds them, the runtime executes them.
 *
 * On this virtual core an instruction is an engine entry point (a function of
 * the kernels layer) plus an immutable parameter blob. At launch, each
 * instruction receives the launch arguments it names, in its own order. */

typedef union onrt_arg {
  void* ptr;   /* device buffer (base of the tensor's storage + offset) */
  int64_t i;   /* integer scalar */
  double f;    /* floating scalar */
} onrt_arg;

/* Engine entry point. Returns 0 on success; otherwise writes a message to err. */
typedef int (*onrt_kernel_fn)(const void* params, const onrt_arg* args, char* err,
                              size_t errlen);

typedef struct onrt_program* onrt_program_t;

/* Created with one reference; onrt_program_release drops one. Queued launches
 * hold their own reference, so releasing after launch is safe. */
onrt_status onrt_program_create(const char* name, onrt_program_t* out);
onrt_status onrt_program_retain(onrt_program_t program);
onrt_status onrt_program_release(onrt_program_t program);
/* Appends an instruction. `params` (params_size bytes) is copied into the
 * program. `arg_slots[k]` is the launch-argument index passed as the
 * instruction's k-th argument. Programs must not be modified once launched. */
onrt_status onrt_program_add_instruction(onrt_program_t program, const char* name,
                                         onrt_kernel_fn fn, const void* params,
                                         size_t params_size, const int32_t* arg_slots,
                                         int32_t num_slots);
int32_t onrt_program_num_instructions(onrt_program_t program);
const char* onrt_program_name(onrt_program_t program);

/* Queues the program on the stream with `args` (copied; nargs entries). A
 * failing instruction puts the stream in its error state with a message naming
 * the program and the instruction. */
onrt_status onrt_program_launch(onrt_stream_t stream, onrt_program_t program,
                                const onrt_arg* args, int32_t nargs);

/* Counters for observability (monotonic, process-wide). */
typedef struct onrt_counters {
  int64_t launches;
  int64_t instructions_executed;
  int64_t copies;
  int64_t synchronizations;
} onrt_counters;
onrt_status onrt_get_counters(onrt_counters* out);

/* ------------------------------------------------------------- tracing */

/* Device activity for profilers. With ONRT_TRACE_RECORDS on, every kernel (one
 * program instruction) and copy a stream runs is recorded with the realtime
 * clock interval it ran in (nanoseconds since the epoch) and the correlation id
 * that was current on the thread that queued it; so is the launch or copy call
 * that queued it, on that thread. With ONRT_TRACE_TOTALS on, only
 * per-program (or per copy direction) counts and times are kept. Each kind is
 * reference counted: every enable needs its own disable. */
enum { ONRT_TRACE_RECORDS = 1, ONRT_TRACE_TOTALS = 2 };
typedef enum onrt_activity_kind {
  ONRT_ACTIVITY_KERNEL = 0,
  ONRT_ACTIVITY_COPY = 1,
  ONRT_ACTIVITY_RUNTIME = 2, /* a launch or copy call on the host thread that queued it */
} onrt_activity_kind;
typedef struct onrt_activity {
  const char* name;    /* instruction name, or "memcpy <direction>" */
  const char* program; /* the program a kernel belongs to ("" for copies) */
  onrt_activity_kind kind;
  int32_t device;
  int64_t stream; /* onrt_stream_id */
  uint64_t correlation_id;
  /* Unique per launch or copy call (0 for other work): the call and the device
   * activities it queued share it, where one op's correlation id may cover
   * several calls. */
  uint64_t call_id;
  int64_t start_ns;
  int64_t end_ns;
  uint64_t bytes;    /* copies */
  int32_t thread_id; /* runtime calls: the host thread (gettid) */
} onrt_activity;
/* The first enable of ONRT_TRACE_RECORDS clears earlier records and keeps at
 * most max_records (0 = unlimited); later ones are counted as dropped. */
onrt_status onrt_trace_enable(unsigned what, int enable, size_t max_records);
/* Thread-local stack of correlation ids stamped on the work this thread queues. */
void onrt_trace_push_correlation(uint64_t id);
void onrt_trace_pop_correlation(void);
/* Hands the records to visit (strings valid during the call) and forgets them;
 * returns how many were dropped since the last collect. */
typedef void (*onrt_activity_visitor)(const onrt_activity* activity, void* user);
uint64_t onrt_trace_collect(onrt_activity_visitor visit, void* user);
typedef void (*onrt_total_visitor)(const char* name, int64_t count, int64_t ns, void* user);
void onrt_trace_totals(onrt_total_visitor visit, void* user);

/* ---------------------------------------------------------- long waits */

/* A caller waiting for device work (stream, device and event synchronize,
 * blocking copies) calls `check` about every period_ms while it waits; a
 * non-zero return ends the wait with ONRT_ERROR_INTERRUPTED, the work itself
 * going on. For the embedding's signal handling. The watchdog
 * (OPENNEURON_WATCHDOG_SECONDS, default 300, 0 = off) ends such a wait with
 * ONRT_ERROR_TIMEOUT once one kernel or copy has run that long. */
typedef int (*onrt_wait_check)(void* user);
void onrt_set_wait_check(onrt_wait_check check, void* user, int period_ms);

/* ------------------------------------------------------------- logging */

/* Messages of the runtime and the layers above it (compiler, bridge), for the
 * embedding's logger. Levels are Python logging's numbers. The callback is
 * called on the thread that logs, for messages at min_level and above; without
 * one, warnings and errors go to stderr and the rest nowhere. */
enum { ONRT_LOG_DEBUG = 10, ONRT_LOG_INFO = 20, ONRT_LOG_WARNING = 30, ONRT_LOG_ERROR = 40 };
typedef void (*onrt_log_callback)(int level, const char* message, void* user);
void onrt_log_set_callback(onrt_log_callback fn, void* user, int min_level);
int onrt_log_enabled(int level);
void onrt_log(int level, const char* message);

#ifdef __cplusplus
}
#endif

#endif /* OPENNEURON_RUNTIME_H_ */
