// CpuMs(): CPU time (user + sys) from getrusage, in milliseconds, for the calibrations that
// charge a measured job or probe with the CPU it burnt.
#ifndef TAMP_TOOLS_TAMP_CPU_TIME_H_
#define TAMP_TOOLS_TAMP_CPU_TIME_H_

namespace tamp {

// `who`: RUSAGE_SELF (every thread of this process so far) or RUSAGE_CHILDREN (every child
// this process has reaped so far).
double CpuMs(int who);

}  // namespace tamp

#endif  // TAMP_TOOLS_TAMP_CPU_TIME_H_
