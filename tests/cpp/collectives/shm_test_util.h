// Multi-process harness for the shared-memory collectives: a Rendezvous over
// files in a temporary directory, and run_ranks(), which forks one child per
// rank and collects their exit statuses. Children report failures through
// their exit status and stderr (gtest assertions belong to the parent).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "openneuron/collectives/shm_communicator.h"

namespace shm_test {

using namespace openneuron;
using namespace openneuron::collectives;

class DirRendezvous : public Rendezvous {
 public:
  explicit DirRendezvous(std::string dir, std::chrono::milliseconds timeout = std::chrono::seconds(10))
      : dir_(std::move(dir)), timeout_(timeout) {}
  void set(const std::string& key, const std::string& value) override {
    const std::string path = file(key);
    const std::string tmp = path + ".tmp" + std::to_string(getpid());
    {
      std::ofstream f(tmp, std::ios::binary);
      f << value;
    }
    std::rename(tmp.c_str(), path.c_str());  // readers never see a partial value
  }
  std::string get(const std::string& key) override {
    const auto deadline = std::chrono::steady_clock::now() + timeout_;
    for (;;) {
      std::ifstream f(file(key), std::ios::binary);
      if (f) {
        std::stringstream s;
        s << f.rdbuf();
        return s.str();
      }
      if (std::chrono::steady_clock::now() > deadline) throw std::runtime_error("rendezvous: timed out on " + key);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

 private:
  std::string file(std::string key) const {
    for (char& c : key)
      if (c == '/') c = '_';
    return dir_ + "/" + key;
  }
  std::string dir_;
  std::chrono::milliseconds timeout_;
};

// A child's failed check: prints where and returns nonzero from the rank body.
#define RANK_CHECK(cond)                                                                         \
  do {                                                                                           \
    if (!(cond)) {                                                                               \
      std::fprintf(stderr, "[pid %d] %s:%d: check failed: %s\n", getpid(), __FILE__, __LINE__, #cond); \
      return 1;                                                                                  \
    }                                                                                            \
  } while (0)

inline std::string unique_key() {
  static std::atomic<int> n{0};
  return "test-" + std::to_string(getpid()) + "-" + std::to_string(n++);
}

struct RankContext {
  int rank;
  int size;
  Rendezvous& rdv;
  ShmOptions options;  // group_key, rank, size filled in; chunk_bytes/ring_bytes as asked
};

// Forks `n` children running body(ctx); returns their exit codes (128 + signal
// when killed, 255 on an exception, 254 when killed by the watchdog).
inline std::vector<int> run_ranks(int n, const std::function<int(RankContext&)>& body,
                                  ShmOptions base = {}, std::chrono::seconds watchdog = std::chrono::seconds(15)) {
  char tmpl[] = "/tmp/openneuron-rdv-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp failed");
  const std::string dir = tmpl;
  base.group_key = unique_key();
  base.size = n;
  std::fflush(nullptr);
  std::vector<pid_t> pids;
  for (int r = 0; r < n; ++r) {
    const pid_t pid = fork();
    if (pid == 0) {
      int rc = 255;
      try {
        DirRendezvous rdv(dir);
        RankContext ctx{r, n, rdv, base};
        ctx.options.rank = r;
        rc = body(ctx);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "[rank %d] uncaught: %s\n", r, e.what());
      }
      std::fflush(nullptr);
      _exit(rc);
    }
    pids.push_back(pid);
  }
  std::vector<int> codes(n, -1);
  const auto deadline = std::chrono::steady_clock::now() + watchdog;
  int left = n;
  while (left > 0) {
    for (int r = 0; r < n; ++r) {
      if (codes[r] != -1) continue;
      int status = 0;
      if (waitpid(pids[r], &status, WNOHANG) == pids[r]) {
        codes[r] = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        --left;
      }
    }
    if (left > 0 && std::chrono::steady_clock::now() > deadline) {
      for (int r = 0; r < n; ++r) {
        if (codes[r] != -1) continue;
        kill(pids[r], SIGKILL);
        waitpid(pids[r], nullptr, 0);
        codes[r] = 254;
        --left;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::system(("rm -rf " + dir).c_str());
  return codes;
}

inline std::vector<int> zeros(int n) { return std::vector<int>(n, 0); }

// Names under /dev/shm created by process `pid` for this transport.
inline std::vector<std::string> shm_entries_of(int pid) {
  std::vector<std::string> out;
  const std::string prefix = "openneuron-" + std::to_string(pid) + "-";
  if (FILE* p = popen("ls /dev/shm", "r")) {
    char line[512];
    while (std::fgets(line, sizeof(line), p)) {
      std::string s(line);
      while (!s.empty() && (s.back() == '\n')) s.pop_back();
      if (s.rfind(prefix, 0) == 0) out.push_back(s);
    }
    pclose(p);
  }
  return out;
}

}  // namespace shm_test
