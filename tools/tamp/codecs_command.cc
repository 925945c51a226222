#include "tools/tamp/codecs_command.h"

#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "compress/registry.h"
#include "google/protobuf/text_format.h"
#include "tools/tamp/table.h"

namespace tamp::launcher {

int CodecsCommand(std::ostream* out) {
  std::vector<std::vector<std::string>> rows;
  for (const compress::CodecInfo& info : compress::ListCodecs()) {
    rows.push_back({info.name, info.parameters.empty() ? "-" : absl::StrJoin(info.parameters, ", "),
                    info.wire_bytes, info.summary});
  }
  // Wide formulas and summaries wrap so the table fits about 100 columns.
  *out << FormatTable({"NAME", "PARAMETERS", "WIRE BYTES (n elements)", "SUMMARY"}, rows,
                      {0, 0, 34, 40});

  // One example spec per codec, as it is written in a config.
  google::protobuf::TextFormat::Printer printer;
  printer.SetSingleLineMode(true);
  *out << "\nIn a config (compression.default_compression, or an override):\n";
  for (const compress::CodecInfo& info : compress::ListCodecs()) {
    std::string spec;
    printer.PrintToString(info.example, &spec);
    *out << "  push { " << absl::StripTrailingAsciiWhitespace(spec) << " }\n";
  }
  return 0;
}

}  // namespace tamp::launcher
