// CommandLine: the arguments of one tamp command (`tamp run`, `tamp model`, `tamp summarize`),
// its flags declared once with what each accepts, the rest positional.
//
// Flags are written --name=VALUE or --name VALUE (one leading dash will do, as for the absl
// flags of tamp_server and tamp_worker); a switch takes no value. "-" alone is positional, and
// the value after "--name" is taken whatever it looks like. A flag given twice keeps its last
// value. Errors name the flag: "unknown flag --speed=3", "--bandwidth needs a value", "--json
// takes no value", "--run_dir is empty", or the message of the flag's own parser.
//
// Not thread-safe; Parse() calls the flags' parsers, which write where they were told to.
//
//   ModelOptions options;
//   CommandLine flags;
//   flags.Switch("json", &options.json).Flag("bandwidth", &options.link, perf::ParseBandwidth);
//   TAMP_ASSIGN_OR_RETURN(std::vector<std::string> positional, flags.Parse(args));
#ifndef TAMP_TOOLS_TAMP_COMMAND_LINE_H_
#define TAMP_TOOLS_TAMP_COMMAND_LINE_H_

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tamp::launcher {

class CommandLine {
 public:
  // Reads a flag's value into the command's options, or says why it cannot (INVALID_ARGUMENT
  // naming the flag and the value).
  using ValueParser = std::function<absl::Status(const std::string& value)>;

  // --name VALUE, handed to `parse`.
  CommandLine& Flag(absl::string_view name, ValueParser parse);
  // --name VALUE stored in *value; an empty VALUE is refused.
  CommandLine& Flag(absl::string_view name, std::string* value);
  // --name VALUE stored in *out as `parse` reads it: parse(value) returns an absl::StatusOr
  // of what *out takes.
  template <typename T, typename Parse>
  CommandLine& Flag(absl::string_view name, T* out, Parse parse) {
    return Flag(name, ValueParser([out, parse = std::move(parse)](const std::string& value) {
      auto parsed = parse(value);
      if (!parsed.ok()) return parsed.status();
      *out = *std::move(parsed);
      return absl::OkStatus();
    }));
  }
  // --name: sets *on.
  CommandLine& Switch(absl::string_view name, bool* on);
  // Everything after the first "--" goes to *command unparsed (`tamp run CONFIG -- COMMAND`);
  // "--" with nothing after it is refused as "\"--\" must be followed by " + `what`. Without
  // this, "--" is an unknown flag.
  CommandLine& Command(std::vector<std::string>* command, absl::string_view what);

  // The positional arguments, in order, once every flag has been parsed; the first error
  // otherwise (what the parsers wrote before it stays written).
  absl::StatusOr<std::vector<std::string>> Parse(const std::vector<std::string>& args) const;

 private:
  struct Spec {
    ValueParser parse;     // Set for a flag with a value.
    bool* on = nullptr;    // Set for a switch.
  };
  std::map<std::string, Spec, std::less<>> flags_;
  std::vector<std::string>* command_ = nullptr;
  std::string command_what_;
};

}  // namespace tamp::launcher

#endif  // TAMP_TOOLS_TAMP_COMMAND_LINE_H_
