// Stress tests for stream/event synchronisation: many threads enqueueing host
// functions, synchronizing, and waiting on events across streams, with idle
// gaps so workers really park on their condition variable between bursts.
//
// Every loop has a bounded amount of work and checks only progress and
// results, never durations. A lost wake-up shows up as a thread parked for
// good; the watchdog turns that into an abort naming what each thread was
// doing, instead of a silent ctest timeout.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "../stress_util.h"
#include "openneuron/runtime.h"

namespace {

// No progress for this long means a waiter will never be woken. Generous so
// that a loaded machine (or a sanitizer build) never trips it by being slow.
constexpr auto kStallLimit = std::chrono::seconds(60);

class Watchdog {
 public:
  Watchdog(std::string test, int threads)
      : test_(std::move(test)), threads_(threads), phases_(new std::atomic<const char*>[threads]) {
    for (int i = 0; i < threads; ++i) phases_[i].store("starting");
    thread_ = std::thread([this] { run(); });
  }
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }
  void tick() { progress_.fetch_add(1, std::memory_order_relaxed); }
  // What thread `t` is about to block in, for the stall report.
  void phase(int t, const char* what) { phases_[t].store(what, std::memory_order_relaxed); }

 private:
  void run() {
    std::unique_lock<std::mutex> lock(mu_);
    uint64_t last = progress_.load();
    auto last_change = std::chrono::steady_clock::now();
    while (!stop_) {
      cv_.wait_for(lock, std::chrono::seconds(1), [&] { return stop_; });
      const uint64_t now_progress = progress_.load();
      const auto now = std::chrono::steady_clock::now();
      if (now_progress != last) {
        last = now_progress;
        last_change = now;
      } else if (!stop_ && now - last_change >= kStallLimit) {
        std::fprintf(stderr,
                     "\n%s: no progress for %lld s after %llu operations: a stream/event wait "
                     "was never woken (lost wake-up or deadlock). Threads:\n",
                     test_.c_str(),
                     static_cast<long long>(
                         std::chrono::duration_cast<std::chrono::seconds>(kStallLimit).count()),
                     static_cast<unsigned long long>(now_progress));
        for (int i = 0; i < threads_; ++i) {
          std::fprintf(stderr, "  thread %d: %s\n", i, phases_[i].load());
        }
        std::fflush(stderr);
        std::abort();
      }
    }
  }

  const std::string test_;
  const int threads_;
  std::unique_ptr<std::atomic<const char*>[]> phases_;
  std::atomic<uint64_t> progress_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

using ontest::stress::Failures;

int bump(void* counter, char*, size_t) {
  static_cast<std::atomic<int64_t>*>(counter)->fetch_add(1, std::memory_order_relaxed);
  return 0;
}

int fail(void*, char* err, size_t len) {
  std::snprintf(err, len, "injected failure");
  return 1;
}

std::string where(const char* what, int thread, int iter) {
  return std::string(what) + " (thread " + std::to_string(thread) + ", iteration " +
         std::to_string(iter) + "): " + onrt_last_error();
}

class StreamStressTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(onrt_init(), ONRT_OK) << onrt_last_error(); }
  void TearDown() override { EXPECT_EQ(onrt_device_synchronize(0), ONRT_OK) << onrt_last_error(); }
};

// Several threads share a few streams. Each thread launches host functions and
// then, at random, waits for them through every synchronisation entry point,
// checking that the wait really covered its own earlier work.
TEST_F(StreamStressTest, HostFnsSynchronizeAndEventWaitsFromManyThreads) {
  constexpr int kThreads = 6, kStreams = 3, kIters = 2500;
  std::vector<onrt_stream_t> streams(kStreams);
  for (auto& s : streams) ASSERT_EQ(onrt_stream_create(0, 0, &s), ONRT_OK);
  void* dev_buf = nullptr;
  ASSERT_EQ(onrt_malloc(0, 64, nullptr, &dev_buf), ONRT_OK);
  char zeros[64] = {};
  ASSERT_EQ(onrt_memcpy(dev_buf, zeros, 64, ONRT_COPY_HOST_TO_DEVICE, streams[0]), ONRT_OK);

  // ran[t][s]: host functions of thread t that have run on stream s.
  struct PerThread {
    std::atomic<int64_t> ran[kStreams];
    int64_t launched[kStreams] = {};
  };
  std::vector<PerThread> per(kThreads);
  for (auto& p : per) {
    for (auto& r : p.ran) r.store(0);
  }
  // Runs on another stream after an event wait: the producer's work up to the
  // event must already be visible.
  struct OrderCheck {
    const std::atomic<int64_t>* producer;
    int64_t expected;
    std::atomic<int64_t>* ran;
    Failures* failures;
    int thread;
    static int run(void* p, char*, size_t) {
      std::unique_ptr<OrderCheck> c(static_cast<OrderCheck*>(p));
      const int64_t seen = c->producer->load();
      if (seen < c->expected) {
        c->failures->add("stream_wait_event let work start early (thread " +
                         std::to_string(c->thread) + "): producer at " + std::to_string(seen) +
                         ", expected >= " + std::to_string(c->expected));
      }
      c->ran->fetch_add(1);
      return 0;
    }
  };

  Failures failures;
  Watchdog watchdog("HostFnsSynchronizeAndEventWaitsFromManyThreads", kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(1234 + t);
      PerThread& me = per[t];
      onrt_event_t ev, start, end;
      onrt_event_create(ONRT_EVENT_DEFAULT, &ev);
      onrt_event_create(ONRT_EVENT_TIMING, &start);
      onrt_event_create(ONRT_EVENT_TIMING, &end);
      char host[64];
      auto check_done = [&](int s, const char* what, int it) {
        if (me.ran[s].load() != me.launched[s]) {
          failures.add(std::string(what) + " returned before earlier work ran (thread " +
                       std::to_string(t) + ", iteration " + std::to_string(it) + ", stream " +
                       std::to_string(s) + "): " + std::to_string(me.ran[s].load()) + " of " +
                       std::to_string(me.launched[s]));
        }
      };
      auto launch = [&](int s, int it) {
        if (onrt_launch_host_fn(streams[s], "bump", bump, &me.ran[s]) != ONRT_OK) {
          failures.add(where("launch_host_fn", t, it));
        }
        ++me.launched[s];
      };
      for (int it = 0; it < kIters; ++it) {
        const int s = static_cast<int>(rng() % kStreams);
        watchdog.phase(t, "launch_host_fn");
        launch(s, it);
        const int op = static_cast<int>(rng() % 100);
        if (op < 30) {
          // Async only: lets queues grow.
        } else if (op < 45) {
          watchdog.phase(t, "stream_synchronize");
          if (onrt_stream_synchronize(streams[s]) != ONRT_OK) {
            failures.add(where("stream_synchronize", t, it));
          }
          check_done(s, "stream_synchronize", it);
        } else if (op < 55) {
          // Blocking copy: runs inline when the stream is idle, else hands off
          // to the worker; both must wait for the earlier work.
          watchdog.phase(t, "memcpy (blocking)");
          if (onrt_memcpy(host, dev_buf, 64, ONRT_COPY_DEVICE_TO_HOST, streams[s]) != ONRT_OK) {
            failures.add(where("memcpy", t, it));
          }
          check_done(s, "memcpy", it);
        } else if (op < 65) {
          watchdog.phase(t, "event_synchronize");
          onrt_event_record(ev, streams[s]);
          if (onrt_event_synchronize(ev) != ONRT_OK) failures.add(where("event_sync", t, it));
          check_done(s, "event_synchronize", it);
        } else if (op < 75) {
          const int o = (s + 1 + static_cast<int>(rng() % (kStreams - 1))) % kStreams;
          watchdog.phase(t, "stream_wait_event");
          onrt_event_record(ev, streams[s]);
          if (onrt_stream_wait_event(streams[o], ev) != ONRT_OK) {
            failures.add(where("stream_wait_event", t, it));
          }
          auto* c = new OrderCheck{&me.ran[s], me.launched[s], &me.ran[o], &failures, t};
          if (onrt_launch_host_fn(streams[o], "order check", OrderCheck::run, c) != ONRT_OK) {
            failures.add(where("launch order check", t, it));
            delete c;
          }
          ++me.launched[o];
        } else if (op < 80) {
          watchdog.phase(t, "timing events");
          onrt_event_record(start, streams[s]);
          launch(s, it);
          onrt_event_record(end, streams[s]);
          float ms = -1;
          if (onrt_event_synchronize(end) != ONRT_OK ||
              onrt_event_elapsed_ms(start, end, &ms) != ONRT_OK) {
            failures.add(where("timing events", t, it));
          } else if (ms < 0) {
            failures.add("end event stamped before start (thread " + std::to_string(t) + ")");
          }
          check_done(s, "timing event_synchronize", it);
        } else if (op < 85) {
          watchdog.phase(t, "event_query polling");
          onrt_event_record(ev, streams[s]);
          onrt_status st;
          while ((st = onrt_event_query(ev)) == ONRT_ERROR_NOT_READY) std::this_thread::yield();
          if (st != ONRT_OK) failures.add(where("event_query", t, it));
          check_done(s, "event_query", it);
        } else if (op < 90) {
          // Long enough for workers to stop spinning and sleep on their
          // condition variable, so the next launch must wake them.
          watchdog.phase(t, "idle");
          std::this_thread::sleep_for(std::chrono::microseconds(50 + rng() % 250));
        } else if (op < 95) {
          const onrt_status st = onrt_stream_query(streams[s]);
          if (st != ONRT_OK && st != ONRT_ERROR_NOT_READY) failures.add(where("query", t, it));
        } else {
          watchdog.phase(t, "device_synchronize");
          if (onrt_device_synchronize(0) != ONRT_OK) {
            failures.add(where("device_synchronize", t, it));
          }
          for (int k = 0; k < kStreams; ++k) check_done(k, "device_synchronize", it);
        }
        watchdog.tick();
      }
      watchdog.phase(t, "final stream_synchronize");
      for (int k = 0; k < kStreams; ++k) {
        if (onrt_stream_synchronize(streams[k]) != ONRT_OK) {
          failures.add(where("final synchronize", t, kIters));
        }
        check_done(k, "final stream_synchronize", kIters);
      }
      for (onrt_event_t e : {ev, start, end}) onrt_event_destroy(e);
      watchdog.phase(t, "done");
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.count(), 0) << failures.summary();
  for (int t = 0; t < kThreads; ++t) {
    for (int k = 0; k < kStreams; ++k) EXPECT_EQ(per[t].ran[k].load(), per[t].launched[k]);
  }
  EXPECT_EQ(onrt_free(dev_buf), ONRT_OK);
  for (auto s : streams) EXPECT_EQ(onrt_stream_destroy(s), ONRT_OK);
}

// Each thread runs a chain of steps hopping around a ring of streams (on both
// cores when there are two); every hop waits on the event of the previous
// step. Chains of different threads interleave on the same workers, so
// workers block in cross-stream waits while others queue behind them.
TEST_F(StreamStressTest, CrossStreamEventChainsStayOrdered) {
  constexpr int kThreads = 4, kStreams = 4, kSteps = 3000;
  int devices = 0;
  ASSERT_EQ(onrt_device_count(&devices), ONRT_OK);
  std::vector<onrt_stream_t> streams(kStreams);
  for (int i = 0; i < kStreams; ++i) {
    ASSERT_EQ(onrt_stream_create(devices > 1 ? i % 2 : 0, 0, &streams[i]), ONRT_OK);
  }
  struct Step {
    std::atomic<int64_t>* token;
    int64_t expected;
    Failures* failures;
    static int run(void* p, char*, size_t) {
      std::unique_ptr<Step> s(static_cast<Step*>(p));
      const int64_t got = s->token->load();
      if (got != s->expected) {
        s->failures->add("chain step ran out of order: token " + std::to_string(got) +
                         ", expected " + std::to_string(s->expected));
      }
      s->token->store(s->expected + 1);
      return 0;
    }
  };
  std::vector<std::atomic<int64_t>> tokens(kThreads);
  for (auto& tok : tokens) tok.store(0);
  Failures failures;
  Watchdog watchdog("CrossStreamEventChainsStayOrdered", kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(99 + t);
      onrt_event_t ev[2];
      for (auto& e : ev) onrt_event_create(t % 2 ? ONRT_EVENT_TIMING : ONRT_EVENT_DEFAULT, &e);
      for (int g = 0; g < kSteps; ++g) {
        onrt_stream_t s = streams[(t + g) % kStreams];
        watchdog.phase(t, "stream_wait_event");
        if (g > 0 && onrt_stream_wait_event(s, ev[(g - 1) % 2]) != ONRT_OK) {
          failures.add(where("stream_wait_event", t, g));
        }
        watchdog.phase(t, "launch step");
        auto* step = new Step{&tokens[t], g, &failures};
        if (onrt_launch_host_fn(s, "step", Step::run, step) != ONRT_OK) {
          failures.add(where("launch step", t, g));
          delete step;
        }
        onrt_event_record(ev[g % 2], s);
        const int op = static_cast<int>(rng() % 100);
        if (op < 5) {
          watchdog.phase(t, "event_synchronize (chain head)");
          if (onrt_event_synchronize(ev[g % 2]) != ONRT_OK) failures.add(where("sync", t, g));
          if (tokens[t].load() != g + 1) {
            failures.add("event_synchronize returned before the chain reached step " +
                         std::to_string(g) + " (thread " + std::to_string(t) + ")");
          }
        } else if (op < 8) {
          watchdog.phase(t, "idle");
          std::this_thread::sleep_for(std::chrono::microseconds(50 + rng() % 250));
        }
        watchdog.tick();
      }
      watchdog.phase(t, "final event_synchronize");
      if (onrt_event_synchronize(ev[(kSteps - 1) % 2]) != ONRT_OK) {
        failures.add(where("final sync", t, kSteps));
      }
      if (tokens[t].load() != kSteps) failures.add("chain incomplete after its last event");
      for (auto& e : ev) onrt_event_destroy(e);
      watchdog.phase(t, "done");
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.count(), 0) << failures.summary();
  for (auto s : streams) {
    EXPECT_EQ(onrt_stream_synchronize(s), ONRT_OK);
    EXPECT_EQ(onrt_stream_destroy(s), ONRT_OK);
  }
  for (auto& tok : tokens) EXPECT_EQ(tok.load(), kSteps);
}

// Host functions that enqueue the next hop onto another stream: every wake-up
// comes from a worker thread, and periodic pauses let the other worker park
// first. Meanwhile the main thread's blocking copies race the workers for the
// inline path.
TEST_F(StreamStressTest, WorkerToWorkerPingPong) {
  constexpr int kChains = 2;
  constexpr int64_t kHops = 20000;
  std::vector<onrt_stream_t> streams(2 * kChains);
  for (auto& s : streams) ASSERT_EQ(onrt_stream_create(0, 0, &s), ONRT_OK);
  struct Chain {
    onrt_stream_t a, b;
    std::atomic<int64_t> hops{0};
    std::atomic<bool> failed{false};
    std::string error;
    static int hop(void* p, char*, size_t) {
      auto* c = static_cast<Chain*>(p);
      const int64_t n = c->hops.fetch_add(1) + 1;
      if (n >= kHops) return 0;
      // Every few hops, outlast the other worker's spin so it is asleep.
      if (n % 8 == 0) std::this_thread::sleep_for(std::chrono::microseconds(60 + n % 100));
      if (onrt_launch_host_fn(n % 2 ? c->b : c->a, "hop", hop, c) != ONRT_OK) {
        c->error = onrt_last_error();
        c->failed.store(true);
      }
      return 0;
    }
  };
  std::vector<std::unique_ptr<Chain>> chains;
  for (int i = 0; i < kChains; ++i) {
    chains.push_back(std::make_unique<Chain>());
    chains[i]->a = streams[2 * i];
    chains[i]->b = streams[2 * i + 1];
  }
  void* dev_buf = nullptr;
  ASSERT_EQ(onrt_malloc(0, 64, nullptr, &dev_buf), ONRT_OK);
  char host[64] = {};
  ASSERT_EQ(onrt_memcpy(dev_buf, host, 64, ONRT_COPY_HOST_TO_DEVICE, streams[0]), ONRT_OK);

  Watchdog watchdog("WorkerToWorkerPingPong", 1);
  for (auto& c : chains) ASSERT_EQ(onrt_launch_host_fn(c->a, "hop", Chain::hop, c.get()), ONRT_OK);
  int64_t last_total = 0;
  for (int round = 0;; ++round) {
    int64_t total = 0;
    bool failed = false;
    for (auto& c : chains) {
      total += std::min(c->hops.load(), kHops);
      failed |= c->failed.load();
    }
    ASSERT_FALSE(failed) << "a hop failed to launch the next one";
    if (total == kChains * kHops) break;
    if (total != last_total) watchdog.tick();
    last_total = total;
    watchdog.phase(0, "memcpy (blocking) during ping-pong");
    ASSERT_EQ(onrt_memcpy(host, dev_buf, 64, ONRT_COPY_DEVICE_TO_HOST, streams[round % 4]), ONRT_OK)
        << onrt_last_error();
    watchdog.phase(0, "polling hop count");
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  watchdog.phase(0, "final synchronize");
  for (auto s : streams) {
    EXPECT_EQ(onrt_stream_synchronize(s), ONRT_OK);
    EXPECT_EQ(onrt_stream_destroy(s), ONRT_OK);
  }
  for (auto& c : chains) EXPECT_EQ(c->hops.load(), kHops);
  EXPECT_EQ(onrt_free(dev_buf), ONRT_OK);
}

// Streams created, loaded (including waits on a busy shared stream) and
// destroyed while other threads do the same: destroy must drain everything
// queued, and never strand a worker or a waiter.
TEST_F(StreamStressTest, CreateDestroyWithPendingCrossStreamWaits) {
  constexpr int kThreads = 3, kIters = 150;
  onrt_stream_t shared;
  ASSERT_EQ(onrt_stream_create(0, 0, &shared), ONRT_OK);
  std::atomic<int64_t> shared_ran{0};
  Failures failures;
  Watchdog watchdog("CreateDestroyWithPendingCrossStreamWaits", kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(7 + t);
      onrt_event_t ev;
      onrt_event_create(ONRT_EVENT_DEFAULT, &ev);
      for (int it = 0; it < kIters; ++it) {
        watchdog.phase(t, "create");
        onrt_stream_t s;
        if (onrt_stream_create(0, static_cast<int>(rng() % 2), &s) != ONRT_OK) {
          failures.add(where("stream_create", t, it));
          continue;
        }
        std::atomic<int64_t> ran{0};
        const int n = static_cast<int>(rng() % 20);
        for (int i = 0; i < n; ++i) {
          if (rng() % 4 == 0) {
            onrt_launch_host_fn(shared, "shared bump", bump, &shared_ran);
            onrt_event_record(ev, shared);
            onrt_stream_wait_event(s, ev);
          }
          onrt_launch_host_fn(s, "bump", bump, &ran);
        }
        if (rng() % 4 == 0) {
          watchdog.phase(t, "idle");
          std::this_thread::sleep_for(std::chrono::microseconds(rng() % 200));
        }
        watchdog.phase(t, "stream_destroy (drains)");
        if (onrt_stream_destroy(s) != ONRT_OK) failures.add(where("stream_destroy", t, it));
        if (ran.load() != n) {
          failures.add("stream_destroy returned with " + std::to_string(n - ran.load()) +
                       " host functions not run (thread " + std::to_string(t) + ")");
        }
        if (onrt_stream_synchronize(s) != ONRT_ERROR_INVALID_HANDLE) {
          failures.add("destroyed stream still accepted synchronize");
        }
        watchdog.tick();
      }
      onrt_event_destroy(ev);
      watchdog.phase(t, "done");
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.count(), 0) << failures.summary();
  EXPECT_EQ(onrt_stream_synchronize(shared), ONRT_OK);
  EXPECT_EQ(onrt_stream_destroy(shared), ONRT_OK);
}

// Failures on producer streams: later work is skipped but events still
// complete, so consumers waiting on them progress, and each synchronize
// reports exactly the failures since the previous one.
TEST_F(StreamStressTest, FailuresNeverStallWaitersAndAreReportedOnce) {
  constexpr int kThreads = 4, kIters = 1500;
  onrt_stream_t consumer;
  ASSERT_EQ(onrt_stream_create(0, 0, &consumer), ONRT_OK);
  std::atomic<int64_t> consumer_ran{0};
  Failures failures;
  Watchdog watchdog("FailuresNeverStallWaitersAndAreReportedOnce", kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(31 + t);
      onrt_stream_t s;
      onrt_stream_create(0, 0, &s);
      onrt_event_t ev;
      onrt_event_create(t % 2 ? ONRT_EVENT_TIMING : ONRT_EVENT_DEFAULT, &ev);
      std::atomic<int64_t> ran{0};
      int64_t expected_ran = 0;
      bool error_pending = false;
      auto check_sync = [&](onrt_status st, int it) {
        const onrt_status want = error_pending ? ONRT_ERROR_EXECUTION_FAILED : ONRT_OK;
        if (st != want) {
          failures.add("synchronize returned " + std::to_string(st) + ", expected " +
                       std::to_string(want) + where("", t, it));
        }
        error_pending = false;
        if (ran.load() != expected_ran) {
          failures.add("skipped/ran count wrong after synchronize" + where("", t, it));
        }
      };
      for (int it = 0; it < kIters; ++it) {
        watchdog.phase(t, "launch");
        if (rng() % 8 == 0) {
          onrt_launch_host_fn(s, "fail", fail, nullptr);
          error_pending = true;
        } else {
          onrt_launch_host_fn(s, "bump", bump, &ran);
          if (!error_pending) ++expected_ran;  // skipped while the stream is in error
        }
        onrt_event_record(ev, s);
        onrt_stream_wait_event(consumer, ev);
        onrt_launch_host_fn(consumer, "consumer bump", bump, &consumer_ran);
        const int op = static_cast<int>(rng() % 100);
        if (op < 15) {
          watchdog.phase(t, "stream_synchronize (error state)");
          check_sync(onrt_stream_synchronize(s), it);
        } else if (op < 25) {
          watchdog.phase(t, "event_synchronize (error state)");
          if (onrt_event_synchronize(ev) != ONRT_OK) failures.add(where("event_sync", t, it));
        } else if (op < 28) {
          watchdog.phase(t, "idle");
          std::this_thread::sleep_for(std::chrono::microseconds(50 + rng() % 250));
        }
        watchdog.tick();
      }
      watchdog.phase(t, "final synchronize");
      check_sync(onrt_stream_synchronize(s), kIters);
      onrt_event_destroy(ev);
      onrt_stream_destroy(s);
      watchdog.phase(t, "done");
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.count(), 0) << failures.summary();
  EXPECT_EQ(onrt_stream_synchronize(consumer), ONRT_OK) << onrt_last_error();
  EXPECT_EQ(consumer_ran.load(), int64_t{kThreads} * kIters);
  EXPECT_EQ(onrt_stream_destroy(consumer), ONRT_OK);
}

}  // namespace
