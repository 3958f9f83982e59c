// PhaseTimer resolves its events as the loop goes: what it holds stays bounded however many
// iterations run, and every iteration still gets its times.
#include <ATen/ATen.h>
#include "pnp_test.hpp"

#include <chrono>
#include <thread>

#include "pnp/timing.hpp"

using namespace pnp;

TEST_CASE("PhaseTimer: bounded pending iterations, every iteration timed") {
  const int64_t iters = 200, lag = 3;
  PhaseTimer t(at::kCPU, {"a", "b"}, iters, lag);
  size_t most = 0;
  for (int64_t it = 0; it < iters; ++it) {
    t.begin_iteration(it);
    t.start(0);
    std::this_thread::sleep_for(std::chrono::microseconds(50));
    t.stop(0);
    if (it % 2 == 0) {
      t.start(1);
      std::this_thread::sleep_for(std::chrono::microseconds(20));
      t.stop(1);
    }
    t.end_iteration();
    most = std::max(most, t.pending());
  }
  CHECK(most <= static_cast<size_t>(lag + 1));
  t.finish();
  CHECK(t.pending() == 0);
  for (int64_t it = 0; it < iters; ++it) {
    CAPTURE(it);
    CHECK(t.seconds(it, 0) >= 40e-6);
    CHECK(t.total(it) >= t.seconds(it, 0));
    if (it % 2 == 0) CHECK(t.seconds(it, 1) > 0);
    else CHECK(t.seconds(it, 1) == 0);
  }
  // resolve_through gives the times of the iterations so far before the end (checkpoints).
  PhaseTimer u(at::kCPU, {"a"}, 10, 8);
  for (int64_t it = 0; it < 5; ++it) {
    u.begin_iteration(it);
    u.start(0);
    u.stop(0);
    u.end_iteration();
  }
  CHECK(u.pending() == 5);
  u.resolve_through(4);
  CHECK(u.pending() == 0);
  CHECK(u.total(4) >= 0);
}
