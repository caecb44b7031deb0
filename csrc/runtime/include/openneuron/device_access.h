/*
 * Protected device memory (OPENNEURON_PROTECT_MEMORY=1, csrc/runtime/protect.h):
 * device memory is closed to every host thread outside runtime work. A thread
 * of the engines' pool opens it for the span of one task; both calls cost a
 * load when protection is off. Not part of the device API of runtime.h.
 */
#ifndef OPENNEURON_DEVICE_ACCESS_H_
#define OPENNEURON_DEVICE_ACCESS_H_

#ifdef __cplusplus
extern "C" {
#endif

/* Opens device memory to the calling thread; returns what to restore. */
unsigned onrt_device_access_begin(void);
void onrt_device_access_end(unsigned saved);

#ifdef __cplusplus
}
#endif

#endif  // OPENNEURON_DEVICE_ACCESS_H_
