// `tamp codecs`: lists every registered codec (compress/registry.h).
#ifndef TAMP_TOOLS_TAMP_CODECS_COMMAND_H_
#define TAMP_TOOLS_TAMP_CODECS_COMMAND_H_

#include <ostream>

namespace tamp::launcher {

// CodecsCommand()
//
// Prints a table of ListCodecs(): name, parameters, wire bytes (in n elements), summary.
// Returns the exit code (0).
int CodecsCommand(std::ostream* out);

}  // namespace tamp::launcher

#endif  // TAMP_TOOLS_TAMP_CODECS_COMMAND_H_
