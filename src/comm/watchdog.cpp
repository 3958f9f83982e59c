#include "pnp/watchdog.hpp"

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

namespace pnp {

namespace {

using Clock = std::chrono::steady_clock;
int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now().time_since_epoch()).count();
}

struct State {
  std::atomic<int64_t> last_ms{now_ms()};
  std::atomic<const char*> what{"start"};
  std::atomic<int64_t> timeout_ms{0};
  std::atomic<int> rank{0};
  std::atomic<bool> running{false};
  std::mutex hooks_mu;
  std::vector<std::function<void()>> hooks;
  std::thread thread;
};
State& state() {
  static State* s = new State;  // never destroyed: the thread may outlive static destruction
  return *s;
}

void watch() {
  State& s = state();
  while (true) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    const int64_t t = s.timeout_ms.load();
    if (t <= 0) continue;
    const int64_t idle = now_ms() - s.last_ms.load();
    if (idle < t) continue;
    std::fprintf(stderr,
                 "error: rank %d: no progress for %.0f s (last: %s); distributed.timeout_s = %.0f s ran out, ending "
                 "the job (another rank may have stopped or died, or a device hangs)\n",
                 s.rank.load(), idle / 1e3, s.what.load(), t / 1e3);
    std::fflush(stderr);
    {
      std::lock_guard<std::mutex> l(s.hooks_mu);
      for (auto& h : s.hooks) h();
    }
    std::_Exit(1);
  }
}

std::atomic<int> g_signal{0};
extern "C" void on_signal(int sig) { g_signal.store(sig); }

}  // namespace

void Watchdog::arm(double timeout_seconds, int rank) {
  State& s = state();
  s.rank = rank;
  s.last_ms = now_ms();
  s.timeout_ms = static_cast<int64_t>(timeout_seconds * 1e3);
  bool expected = false;
  if (timeout_seconds > 0 && s.running.compare_exchange_strong(expected, true)) {
    s.thread = std::thread(watch);
    s.thread.detach();
  }
}

void Watchdog::beat(const char* what) {
  State& s = state();
  s.last_ms.store(now_ms(), std::memory_order_relaxed);
  s.what.store(what, std::memory_order_relaxed);
}

void Watchdog::add_abort_hook(std::function<void()> hook) {
  State& s = state();
  std::lock_guard<std::mutex> l(s.hooks_mu);
  s.hooks.push_back(std::move(hook));
}

void Watchdog::disarm() { state().timeout_ms = 0; }

void StopRequest::install() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGTERM, &sa, nullptr);
    sigaction(SIGUSR1, &sa, nullptr);
  });
}

bool StopRequest::requested() { return g_signal.load() != 0; }
int StopRequest::signal() { return g_signal.load(); }

}  // namespace pnp
