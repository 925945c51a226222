// Progress rendering of `tamp run`: what the user sees while workers train.
//
// Two modes:
//   - TTY (stderr is a terminal): one status line redrawn in place ("\r" + ANSI erase line)
//       mlp [########------------]  40% step 400/1000 | epoch 1/3 | loss 0.4321 | 3.2 ms/step
//     at most every 100 ms; other lines (EVAL results, worker output, launcher messages)
//     are printed above it.
//   - plain (a log file, CI): a line at the first step, whenever the step crosses a 10% mark,
//     at the last step and otherwise at most every `plain_interval`, plus every EVAL:
//       step 400/1000 (40%) | epoch 2/3 | loss 0.4321 | acc 84.21% | 3.2 ms/step | pushed ...
//       epoch 2/3: test accuracy 85.10%
// When the STEP event carries the step's time split, both modes end with it and the share
// of communication hidden behind compute (worker/step_timeline.h):
//       ... | c/e/w/d/a 2.1/0.3/0.8/0.1/0.0 ms | hidden 61%
// (compute, encode, wire, decode, apply of worker 0's latest step).
// Progress follows worker 0 (in synchronous training every worker is on the same step;
// worker 0 is also the one that evaluates). WorkerEvent.epoch counts from 0, as tamp_worker
// writes it; epochs are shown counting from 1.
//
// Not thread-safe. Writes only to the given stream.
#ifndef TAMP_TOOLS_TAMP_PROGRESS_H_
#define TAMP_TOOLS_TAMP_PROGRESS_H_

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "proto/events.pb.h"

namespace tamp::launcher {

struct ProgressOptions {
  // Run name, shown at the start of the TTY status line.
  std::string name;
  // Epochs of the run (config training.epochs); 0: unknown, shown without a total.
  uint32_t epochs = 0;
  bool tty = false;
  // Terminal columns (TTY mode); the status line is cut to fit.
  int width = 80;
  // Plain mode: longest silence between step lines.
  absl::Duration plain_interval = absl::Seconds(2);
  // TTY mode: shortest time between redraws.
  absl::Duration tty_interval = absl::Milliseconds(100);
};

class ProgressRenderer {
 public:
  ProgressRenderer(ProgressOptions options, std::ostream* out);

  // ProgressRenderer::OnEvent()
  //
  // Takes an event of worker `worker` that arrived at `now`; prints as the mode says.
  void OnEvent(int worker, const events::WorkerEvent& event, absl::Time now);

  // ProgressRenderer::PrintLine()
  //
  // Prints one line (worker output, a launcher message) without garbling the status line.
  void PrintLine(absl::string_view line);

  // ProgressRenderer::Finish()
  //
  // TTY mode: redraws the status line a last time and ends it with '\n', so later output
  // starts on a fresh line. Idempotent; PrintLine() still works afterwards.
  void Finish();

 private:
  // "step 400/1000 (40%) | epoch 1/3 | ..."; the percentage only if `with_percent`.
  std::string Fields(bool with_percent) const;
  std::vector<std::string> FieldList(bool with_percent) const;
  std::string StatusLine() const;
  // "epoch 2/3" for the 0-based `epoch`.
  std::string Epoch(uint32_t epoch) const;
  void Redraw();

  ProgressOptions options_;
  std::ostream* out_;
  std::optional<events::WorkerEvent> last_step_;  // Worker 0's latest STEP.
  std::optional<double> test_accuracy_;           // Latest EVAL.
  bool status_shown_ = false;                     // TTY: a status line is on screen.
  absl::Time last_print_ = absl::InfinitePast();
  uint64_t next_mark_ = 0;  // Plain: next 10% step.
};

// FormatBytes()
//
// Binary units with three significant digits: "512 B", "1.50 KiB", "12.3 MiB", "1.20 GiB".
std::string FormatBytes(uint64_t bytes);

// FormatPercent()
//
// A fraction in [0, 1] as a percentage with two decimals: 0.8421 -> "84.21%".
std::string FormatPercent(double fraction);

// FormatSummaryLine()
//
// The final human summary, e.g.
//   "done: test accuracy 84.21%, 938 steps in 12.3 s (4.10 ms/step), pushed 1.20 GiB,
//    pulled 2.40 GiB, compression 10.0x"
std::string FormatSummaryLine(const events::RunSummary& summary);

// Whether `fd` is a terminal that understands ANSI control sequences (TERM is not "dumb").
bool IsAnsiTerminal(int fd);

// Columns of the terminal on `fd`, or `fallback`.
int TerminalWidth(int fd, int fallback);

}  // namespace tamp::launcher

#endif  // TAMP_TOOLS_TAMP_PROGRESS_H_
