// ConfigNotes: what a valid config says that has no effect, for the caller to warn of.
//
// A config can be valid and still not do what its author meant: an override that leaves out
// a part of the compression the default sets (an override replaces default_compression
// whole, so that part is none for its tensors), a pull residual under ASYNC or SSP (their
// per-worker views already carry what the pull codec drops), a residual around codec none.
// Each note names the field and what it amounts to; the config stands.
//
// Threading: a pure function of its argument.
//
// Example:
//   std::vector<std::string> notes;
//   TAMP_ASSIGN_OR_RETURN(config::RunConfig config, LoadConfigFile(path, &notes));
//   for (const std::string& note : notes) LOG(WARNING) << note;
#ifndef TAMP_JOB_CONFIG_NOTES_H_
#define TAMP_JOB_CONFIG_NOTES_H_

#include <string>
#include <vector>

#include "proto/config.pb.h"

namespace tamp {

// The notes on `parsed`, a config as parsed, before ApplyDefaults(): which parts of a
// compression block an override names is only known before defaults fill them in.
std::vector<std::string> ConfigNotes(const config::RunConfig& parsed);

}  // namespace tamp

#endif  // TAMP_JOB_CONFIG_NOTES_H_
