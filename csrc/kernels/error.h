// How an engine entry point reports an error: the message goes into the
// caller's buffer and the entry point returns nonzero.
#pragma once

#include <cstdarg>
#include <cstddef>
#include <cstdio>

namespace openneuron::kernels::detail {

inline int fail(char* err, size_t errlen, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));
inline int fail(char* err, size_t errlen, const char* fmt, ...) {
  if (err && errlen) {
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
  }
  return 1;
}

}  // namespace openneuron::kernels::detail
