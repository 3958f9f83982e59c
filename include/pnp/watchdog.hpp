// No hang, no lost run: a watchdog that ends a stalled job, and the stop request a signal makes.
//
// Watchdog: a thread that, when no progress has been reported for distributed.timeout_s
// seconds, prints "error: rank R: no progress for T s (last: <phase>) ..." and ends the
// process (after running the abort hooks, e.g. ncclCommAbort), so that mpirun or srun end
// every rank. A rank that stops (SIGSTOP, a stuck device) thus ends the job: the others time
// out in their next collective. The program reports progress with beat(): each timed phase,
// each iteration and each set-up step.
//
// StopRequest: SIGTERM and SIGUSR1 (Slurm's --signal) set a flag; the solver checks it at each
// iteration boundary (all ranks agree), writes a checkpoint and exits with kExitCheckpointed.
#pragma once

#include <functional>

namespace pnp {

// The exit code of a run that wrote a checkpoint on request (a signal or output.stop_after)
// and stopped early: EX_TEMPFAIL, "try again" (resume with --resume).
inline constexpr int kExitCheckpointed = 75;

class Watchdog {
 public:
  // Starts (or re-arms with a new timeout) the process's watchdog; 0 turns it off.
  static void arm(double timeout_seconds, int rank);
  // Progress: `what` must outlive the process (a string literal).
  static void beat(const char* what);
  // Run before the process ends on a timeout (from the watchdog's thread).
  static void add_abort_hook(std::function<void()> hook);
  static void disarm();
};

class StopRequest {
 public:
  // Installs the SIGTERM and SIGUSR1 handlers (idempotent).
  static void install();
  // A signal arrived (this process).
  static bool requested();
  static int signal();  // which one (0 if none)
};

}  // namespace pnp
