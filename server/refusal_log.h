// The log of refused requests: what a peer can make the server write, bounded.
//
// A request the server refuses may be worth a log line, but a peer can send refused requests
// as fast as the network carries them, so their lines go through one limiter for the whole
// process: at most kRefusalLinesPerSecond lines in each second, each cut to
// kMaxRefusalLineBytes (QuoteRequest, job/security.h), and the first line after some were
// dropped says how many. gRPC's own log lines (a disabled compression algorithm, a failed TLS
// handshake, a malformed frame: also provoked by peers) take the same path once
// RouteGrpcLogsThroughRefusalLog() ran.
//
// Example:
//   TAMP_LOG_REFUSAL(WARNING, absl::StrCat("refused handshake from ", peer, ": ", status));
#ifndef TAMP_SERVER_REFUSAL_LOG_H_
#define TAMP_SERVER_REFUSAL_LOG_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>

#include "absl/strings/string_view.h"
#include "glog/logging.h"

namespace tamp {

inline constexpr int kRefusalLinesPerSecond = 10;
inline constexpr size_t kMaxRefusalLineBytes = 512;

// At most `lines_per_second` lines per whole second of the steady clock, each cut to
// `max_line_bytes`. Thread-safe.
class LogLimiter {
 public:
  LogLimiter(int lines_per_second, size_t max_line_bytes)
      : lines_per_second_(lines_per_second), max_line_bytes_(max_line_bytes) {}

  // LogLimiter::Log()
  //
  // Writes `message` at `severity` as if logged at file:line, if this second has room; else
  // counts it as dropped.
  void Log(const char* file, int line, google::LogSeverity severity, absl::string_view message);

  // LogLimiter::Admit()
  //
  // Whether a line may be written at `now`, taking its room if so. When it may, *dropped is
  // the count of lines refused since the last admitted one (0 otherwise).
  bool Admit(std::chrono::steady_clock::time_point now, uint64_t* dropped);

 private:
  const int lines_per_second_;
  const size_t max_line_bytes_;
  std::mutex mu_;
  int64_t second_ = -1;   // The steady clock's whole second of the lines counted in used_.
  int used_ = 0;          // Lines admitted in second_.
  uint64_t dropped_ = 0;  // Lines refused since the last admitted one.
};

// The process's limiter for refusals (kRefusalLinesPerSecond, kMaxRefusalLineBytes).
LogLimiter& RefusalLog();

// Sends gRPC core's log lines (gpr_log) through RefusalLog(), at glog's ERROR or INFO.
void RouteGrpcLogsThroughRefusalLog();

}  // namespace tamp

// Logs `message` (an absl::string_view) at glog severity INFO, WARNING or ERROR through
// RefusalLog().
#define TAMP_LOG_REFUSAL(severity, message) \
  ::tamp::RefusalLog().Log(__FILE__, __LINE__, ::google::GLOG_##severity, (message))

#endif  // TAMP_SERVER_REFUSAL_LOG_H_
