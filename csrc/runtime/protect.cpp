#include "protect.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <mutex>

#include "log.h"
#include "openneuron/device_access.h"
#include "status.h"

namespace openneuron::runtime {
namespace {

constexpr unsigned kUntouched = ~0u;  // DeviceAccess found the thread already open

// Set once, before any device range is tagged or any runtime thread exists
// (runtime initialisation), so relaxed loads see it wherever it matters.
std::atomic<int> g_key{-1};
std::mutex g_enable_mu;
struct sigaction g_previous{};

// Async-signal-safe: no snprintf, only write(2).
void write_fault_message(const void* address) {
  char hex[2 + 2 * sizeof(uintptr_t) + 1];
  uintptr_t a = reinterpret_cast<uintptr_t>(address);
  int n = sizeof hex;
  hex[--n] = '\0';
  do {
    hex[--n] = "0123456789abcdef"[a & 15];
    a >>= 4;
  } while (a != 0);
  hex[--n] = 'x';
  hex[--n] = '0';
  const char* parts[] = {
      "OpenNeuron: host code touched neuron device memory at ", hex + n,
      " outside runtime work (OPENNEURON_PROTECT_MEMORY=1 locks device memory to the "
      "runtime). Read device tensors through the runtime (.cpu(), .item(), copies); the "
      "faulting thread's stack below names the culprit.\n"};
  for (const char* p : parts) (void)!write(STDERR_FILENO, p, std::strlen(p));
}

void report_fault(int sig, siginfo_t* info, void* /*context*/) {
  const int key = g_key.load(std::memory_order_relaxed);
  if (info->si_code == SEGV_PKUERR && key >= 0 && static_cast<int>(info->si_pkey) == key) {
    write_fault_message(info->si_addr);
  }
  // Handed on: with the previous action restored, the access faults again on
  // return and the previous handler (Python's faulthandler prints the Python
  // stack) or the default action takes it. A sent signal would not repeat.
  sigaction(SIGSEGV, &g_previous, nullptr);
  if (info->si_code <= 0) raise(sig);
}

}  // namespace

bool enable_memory_protection(std::string* error) {
  std::lock_guard<std::mutex> lock(g_enable_mu);
  if (g_key.load(std::memory_order_relaxed) >= 0) return true;
  // Locked for the calling thread; every other thread already lacks a key
  // it never had (Linux starts processes with all keys but 0 disabled).
  const int key = pkey_alloc(0, PKEY_DISABLE_ACCESS);
  if (key < 0) {
    *error = strprintf(
        "OPENNEURON_PROTECT_MEMORY=1 needs memory protection keys (x86 PKU, enabled by the "
        "kernel), which this machine lacks: pkey_alloc failed: %s",
        std::strerror(errno));
    return false;
  }
  struct sigaction sa{};
  sa.sa_sigaction = report_fault;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGSEGV, &sa, &g_previous);
  g_key.store(key, std::memory_order_relaxed);
  logf(ONRT_LOG_INFO, "device memory protected: host threads fault on it outside runtime work");
  return true;
}

bool memory_protected() { return g_key.load(std::memory_order_relaxed) >= 0; }

void protect_device_range(void* base, size_t bytes) {
  const int key = g_key.load(std::memory_order_relaxed);
  if (key < 0 || bytes == 0) return;
  if (pkey_mprotect(base, bytes, PROT_READ | PROT_WRITE, key) != 0) {
    logf(ONRT_LOG_WARNING, "device memory at %p (%zu bytes) left unprotected: pkey_mprotect: %s",
         base, bytes, std::strerror(errno));
  }
}

DeviceAccess::DeviceAccess() : saved_(onrt_device_access_begin()) {}
DeviceAccess::~DeviceAccess() { onrt_device_access_end(saved_); }

}  // namespace openneuron::runtime

using openneuron::runtime::g_key;
using openneuron::runtime::kUntouched;

extern "C" unsigned onrt_device_access_begin(void) {
  const int key = g_key.load(std::memory_order_relaxed);
  if (key < 0) return kUntouched;
  const int rights = pkey_get(key);
  if (rights <= 0) return kUntouched;  // open already (or no key on this thread)
  pkey_set(key, 0);
  return static_cast<unsigned>(rights);
}

extern "C" void onrt_device_access_end(unsigned saved) {
  if (saved == kUntouched) return;
  pkey_set(g_key.load(std::memory_order_relaxed), saved);
}
