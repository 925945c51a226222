// `tamp run CONFIG [flags] [-- COMMAND ARGS...]`: loads the config, finds the binaries and
// runs the job.
#ifndef TAMP_TOOLS_TAMP_RUN_COMMAND_H_
#define TAMP_TOOLS_TAMP_RUN_COMMAND_H_

#include "tools/tamp/run_options.h"

namespace tamp::launcher {

// RunCommand()
//
// Loads options.config_path with tamp::LoadConfigFile (an error is printed as it is, exit
// 2), resolves the server binary and, without options.command, the worker binary
// (FindBinary(); exit 2 if missing) and calls RunJob() with stderr as the console. Returns
// the exit code.
int RunCommand(RunOptions options);

}  // namespace tamp::launcher

#endif  // TAMP_TOOLS_TAMP_RUN_COMMAND_H_
