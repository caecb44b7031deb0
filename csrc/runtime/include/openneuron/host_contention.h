/*
 * Whether the runtime judges the host's cores contended (csrc/runtime/contention.h):
 * then no thread should spin waiting for work. For the engines' thread pool; not
 * part of the device API of runtime.h, which a real device runtime implements.
 */
#ifndef OPENNEURON_HOST_CONTENTION_H_
#define OPENNEURON_HOST_CONTENTION_H_

#ifdef __cplusplus
extern "C" {
#endif

int onrt_host_contended(void);

#ifdef __cplusplus
}
#endif

#endif  // OPENNEURON_HOST_CONTENTION_H_
