// `tamp model CONFIG --bandwidth RATE`: predicted step time of CONFIG's job per codec on a
// link (tools/tamp/perf_model.h), with costs measured here and now
// (tools/tamp/perf_calibrate.h, tools/tamp/transport_probe.h). docs/perf_model.md describes the model and its accuracy.
#ifndef TAMP_TOOLS_TAMP_MODEL_COMMAND_H_
#define TAMP_TOOLS_TAMP_MODEL_COMMAND_H_

#include <ostream>
#include <string>

#include "job/job_layout.h"

#include "tools/tamp/model_options.h"

namespace tamp::launcher {

// ModelCommand()
//
// Loads the config, measures compute, codec and transport CPU costs, prints one prediction per codec (a
// table, or with --json an events::ModelPrediction as one line of JSON, base/proto_json.h)
// to `out`, errors to `err`. Returns the exit code: 0, or 2 for a bad config.
int ModelCommand(const ModelOptions& options, std::ostream* out, std::ostream* err);

// BusyMachineNote()
//
// What `tamp model` says where the machine it measures on is busy (a load average of at
// least `cores`): its measured times, and so its predictions, are inflated and vary between
// runs. "" otherwise.
std::string BusyMachineNote(double load_average, int cores);

// DataDependentBytesNote()
//
// What `tamp model` says of a layout whose chunks use the threshold codec (naming their
// tensors): its bytes are those of the one gradient the model encodes, not a run's, as the
// codec sends as many entries as the gradients hold above the threshold. "" otherwise.
std::string DataDependentBytesNote(const JobLayout& layout);

}  // namespace tamp::launcher

#endif  // TAMP_TOOLS_TAMP_MODEL_COMMAND_H_
