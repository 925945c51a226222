#include "server/refusal_log.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "grpc/support/log.h"
#include "job/security.h"

namespace tamp {

bool LogLimiter::Admit(std::chrono::steady_clock::time_point now, uint64_t* dropped) {
  const int64_t second =
      std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count();
  std::lock_guard<std::mutex> lock(mu_);
  if (second != second_) {
    second_ = second;
    used_ = 0;
  }
  if (used_ >= lines_per_second_) {
    ++dropped_;
    return false;
  }
  ++used_;
  *dropped = dropped_;
  dropped_ = 0;
  return true;
}

void LogLimiter::Log(const char* file, int line, google::LogSeverity severity,
                     absl::string_view message) {
  uint64_t dropped = 0;
  if (!Admit(std::chrono::steady_clock::now(), &dropped)) return;
  google::LogMessage log(file, line, severity);
  log.stream() << QuoteRequest(message, max_line_bytes_);
  if (dropped != 0) {
    log.stream() << " [" << dropped << " more refusal lines dropped since the last one]";
  }
}

LogLimiter& RefusalLog() {
  // Never destroyed: gRPC may log from its threads while the process exits.
  static LogLimiter* const limiter = new LogLimiter(kRefusalLinesPerSecond, kMaxRefusalLineBytes);
  return *limiter;
}

namespace {

void LogGrpcLine(gpr_log_func_args* args) {
  RefusalLog().Log(args->file, args->line,
                   args->severity == GPR_LOG_SEVERITY_ERROR ? google::GLOG_ERROR
                                                            : google::GLOG_INFO,
                   args->message);
}

}  // namespace

void RouteGrpcLogsThroughRefusalLog() { gpr_set_log_function(&LogGrpcLine); }

}  // namespace tamp
