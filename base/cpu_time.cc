#include "base/cpu_time.h"

#include <sched.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

#include <algorithm>

namespace tamp {

double CpuMs(int who) {
  rusage usage{};
  getrusage(who, &usage);
  auto ms = [](const timeval& t) { return t.tv_sec * 1e3 + t.tv_usec / 1e3; };
  return ms(usage.ru_utime) + ms(usage.ru_stime);
}

double ThreadCpuMs() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return now.tv_sec * 1e3 + now.tv_nsec / 1e6;
}

std::optional<double> LoadAverage() {
  double one_minute = 0;
  if (getloadavg(&one_minute, 1) != 1) return std::nullopt;
  return one_minute;
}

int AvailableCores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 1;
  return std::max(1, CPU_COUNT(&set));
}

}  // namespace tamp
