// CpuMs(): CPU time (user + sys) from getrusage, in milliseconds, for the calibrations that
// charge a measured job or probe with the CPU it burnt. ThreadCpuMs(): the calling thread's.
// AvailableCores(): the CPUs this process may run on. LoadAverage(): how busy they are.
#ifndef TAMP_BASE_CPU_TIME_H_
#define TAMP_BASE_CPU_TIME_H_

#include <optional>

namespace tamp {

// `who`: RUSAGE_SELF (every thread of this process so far) or RUSAGE_CHILDREN (every child
// this process has reaped so far).
double CpuMs(int who);

// The calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID), in milliseconds.
double ThreadCpuMs();

// The CPUs this process may run on (what `nproc` prints), at least 1: the processes it
// starts get the same.
int AvailableCores();

// The system's load average over the last minute (getloadavg), or nullopt where unknown.
std::optional<double> LoadAverage();

}  // namespace tamp

#endif  // TAMP_BASE_CPU_TIME_H_
