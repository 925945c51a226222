#include "tools/tamp/progress.h"

#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace tamp::launcher {
namespace {

constexpr char kEraseLine[] = "\r\033[2K";
constexpr int kBarWidth = 20;
constexpr int kWideTerminal = 120;  // Columns from which the bar is kBarWidth wide.

// First step at or after the next 10% mark past `step`.
uint64_t NextMark(uint64_t step, uint64_t total) {
  if (total == 0) return UINT64_MAX;
  const uint64_t k = step * 10 / total + 1;  // Next decile.
  return (k * total + 9) / 10;               // ceil(k * total / 10)
}

}  // namespace

ProgressRenderer::ProgressRenderer(ProgressOptions options, std::ostream* out)
    : options_(std::move(options)), out_(out) {}

std::string ProgressRenderer::Fields(bool with_percent) const {
  return absl::StrJoin(FieldList(with_percent), " | ");
}

std::vector<std::string> ProgressRenderer::FieldList(bool with_percent) const {
  std::vector<std::string> fields;
  if (last_step_) {
    const events::WorkerEvent& e = *last_step_;
    if (e.total_steps() > 0) {
      fields.push_back(absl::StrCat("step ", e.step(), "/", e.total_steps()));
      if (with_percent) {
        absl::StrAppend(&fields.back(), " (",
                        100 * std::min(e.step(), e.total_steps()) / e.total_steps(), "%)");
      }
    } else {
      fields.push_back(absl::StrCat("step ", e.step()));
    }
    fields.push_back(Epoch(e.epoch()));
    if (!e.synthetic() && e.has_loss()) fields.push_back(absl::StrFormat("loss %.4f", e.loss()));
    // Most telling first: a narrow terminal cuts the status line from the right.
    if (test_accuracy_) fields.push_back(absl::StrCat("acc ", FormatPercent(*test_accuracy_)));
    fields.push_back(absl::StrFormat("%.1f ms/step", e.step_ms()));
    if (e.bytes_pushed() > 0) {
      fields.push_back(absl::StrFormat(
          "pushed %s (%.1fx)", FormatBytes(e.bytes_pushed()),
          static_cast<double>(e.raw_bytes_pushed()) / static_cast<double>(e.bytes_pushed())));
    }
    if (e.compute_ms() > 0 || e.comm_ms() > 0) {  // Workers that measure the step's split.
      fields.push_back(absl::StrFormat("c/e/w/d/a/o %.1f/%.1f/%.1f/%.1f/%.1f/%.1f ms",
                                       e.compute_ms(), e.encode_ms(), e.wire_ms(), e.decode_ms(),
                                       e.apply_ms(), e.other_ms()));
      fields.push_back(absl::StrFormat("hidden %.0f%%", e.comm_hidden_percent()));
    }
  } else if (test_accuracy_) {
    fields.push_back(absl::StrCat("acc ", FormatPercent(*test_accuracy_)));
  }
  return fields;
}

std::string ProgressRenderer::Epoch(uint32_t epoch) const {
  if (options_.epochs == 0) return absl::StrCat("epoch ", epoch + 1);
  return absl::StrCat("epoch ", epoch + 1, "/", options_.epochs);
}

std::string ProgressRenderer::StatusLine() const {
  std::string line = options_.name.empty() ? "" : absl::StrCat(options_.name, " ");
  double fraction = 0;
  if (last_step_ && last_step_->total_steps() > 0) {
    fraction = std::min(1.0, static_cast<double>(last_step_->step()) /
                                 static_cast<double>(last_step_->total_steps()));
  }
  // A narrow terminal gets a shorter bar, to leave room for the step time.
  const int bar = options_.width >= kWideTerminal ? kBarWidth : kBarWidth / 2;
  const int filled = static_cast<int>(fraction * bar);
  absl::StrAppend(&line, "[", std::string(filled, '#'), std::string(bar - filled, '-'), "] ",
                  absl::StrFormat("%3d%%", static_cast<int>(fraction * 100)));
  const size_t max = static_cast<size_t>(std::max(options_.width - 1, 10));
  if (line.size() > max) {
    line.resize(max);
    return line;
  }
  // Whole fields, most telling first, while they fit: a cut one would read as another value.
  absl::string_view separator = " ";
  for (const std::string& field : FieldList(/*with_percent=*/false)) {
    if (line.size() + separator.size() + field.size() > max) break;
    absl::StrAppend(&line, separator, field);
    separator = " | ";
  }
  return line;
}

void ProgressRenderer::Redraw() {
  *out_ << kEraseLine << StatusLine() << std::flush;
  status_shown_ = true;
}

void ProgressRenderer::OnEvent(int worker, const events::WorkerEvent& event, absl::Time now) {
  switch (event.kind()) {
    case events::WorkerEvent::STEP: {
      if (worker != 0) return;
      const bool first = !last_step_;
      last_step_ = event;
      const bool last = event.total_steps() > 0 && event.step() >= event.total_steps();
      if (options_.tty) {
        if (first || last || now - last_print_ >= options_.tty_interval) {
          Redraw();
          last_print_ = now;
        }
        return;
      }
      if (first || last || event.step() >= next_mark_ ||
          now - last_print_ >= options_.plain_interval) {
        *out_ << Fields(/*with_percent=*/true) << "\n" << std::flush;
        last_print_ = now;
        next_mark_ = NextMark(event.step(), event.total_steps());
      }
      return;
    }
    case events::WorkerEvent::EVAL:
      test_accuracy_ = event.test_accuracy();
      PrintLine(absl::StrCat(Epoch(event.epoch()), ": test accuracy ",
                             FormatPercent(event.test_accuracy())));
      return;
    default:
      return;
  }
}

void ProgressRenderer::PrintLine(absl::string_view line) {
  if (options_.tty && status_shown_) {
    *out_ << kEraseLine << line << "\n";
    Redraw();
    return;
  }
  *out_ << line << "\n" << std::flush;
}

void ProgressRenderer::Finish() {
  if (options_.tty && status_shown_) {
    Redraw();
    *out_ << "\n" << std::flush;
  }
  status_shown_ = false;
}

std::string FormatBytes(uint64_t bytes) {
  if (bytes < 1024) return absl::StrCat(bytes, " B");
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double value = static_cast<double>(bytes) / 1024;
  int unit = 0;
  while (value >= 1023.5 && unit + 1 < 6) {
    value /= 1024;
    ++unit;
  }
  // Three significant digits (the loop bound keeps 1023.9 KiB from printing "1024 KiB").
  const char* format = value < 9.995 ? "%.2f %s" : value < 99.95 ? "%.1f %s" : "%.0f %s";
  return absl::StrFormat(format, value, kUnits[unit]);
}

std::string FormatPercent(double fraction) { return absl::StrFormat("%.2f%%", 100 * fraction); }

std::string FormatSummaryLine(const events::RunSummary& summary) {
  // Synthetic gradients (model.kind LAYOUT) train nothing: say so rather than print a 0.
  const std::string accuracy =
      summary.synthetic() ? "no test accuracy (model.kind LAYOUT: synthetic gradients)"
      : summary.has_test_accuracy()
          ? absl::StrCat("test accuracy ", FormatPercent(summary.test_accuracy()))
          : "no test accuracy reported";
  // A run resumed from checkpoints ran only the steps after its start here.
  const std::string resumed =
      summary.start_step() == 0 || summary.start_step() >= summary.steps()
          ? ""
          : absl::StrFormat(" (resumed at step %d: %d of them in this run)", summary.start_step(),
                            summary.steps() - summary.start_step());
  // tamp summarize knows the wall time only when told (--wall_seconds).
  const std::string wall = summary.wall_seconds() > 0
                               ? absl::StrFormat(" in %.1f s", summary.wall_seconds())
                               : "";
  std::string line = absl::StrFormat(
      "done: %s, %d steps%s%s (median step %.2f ms), pushed %s, pulled %s", accuracy, summary.steps(),
      resumed, wall, summary.step_ms_median(), FormatBytes(summary.bytes_pushed()),
      FormatBytes(summary.bytes_pulled()));
  if (summary.compression_ratio() > 0) {
    absl::StrAppendFormat(&line, ", compression %.1fx", summary.compression_ratio());
  }
  return line;
}

bool IsAnsiTerminal(int fd) {
  if (!isatty(fd)) return false;
  const char* term = getenv("TERM");
  return term != nullptr && *term != '\0' && strcmp(term, "dumb") != 0;
}

int TerminalWidth(int fd, int fallback) {
  struct winsize ws;
  if (ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  return fallback;
}

}  // namespace tamp::launcher
