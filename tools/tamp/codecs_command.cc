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

  google::protobuf::TextFormat::Printer printer;
  printer.SetSingleLineMode(true);
  auto one_line = [&](const google::protobuf::Message& message) {
    std::string text;
    printer.PrintToString(message, &text);
    return std::string(absl::StripTrailingAsciiWhitespace(text));
  };

  // What trains (compress/registry.h CodecInfo::recommended), and what cannot pull. Before
  // the example specs: tests/codec_training_test.sh reads those from their header on.
  *out << "\nRecommended as the push codec (reach 0.85 test accuracy on the MLP of "
          "bench/configs/base/mlp.pbtxt,\n3 epochs, pull raw; docs/convergence.md, "
          "bench/configs/recommended/NAME.pbtxt):\n";
  for (const compress::CodecInfo& info : compress::ListCodecs()) {
    *out << "  " << info.name << ": push { " << one_line(info.recommended.push())
         << " } push_feedback { kind: "
         << config::ErrorFeedback::Kind_Name(info.recommended.push_feedback().kind()) << " }\n"
         << "    optimizer { " << one_line(info.recommended_optimizer) << " }\n";
  }
  *out << "\nPush only (refused as the pull codec, which carries the servers' update):\n";
  for (const compress::CodecInfo& info : compress::ListCodecs()) {
    if (!info.can_pull) *out << "  " << info.name << ": " << info.cannot_pull << "\n";
  }

  // One example spec per codec, as it is written in a config.
  *out << "\nIn a config (compression.default_compression, or an override):\n";
  for (const compress::CodecInfo& info : compress::ListCodecs()) {
    std::string spec;
    printer.PrintToString(info.example, &spec);
    *out << "  push { " << absl::StripTrailingAsciiWhitespace(spec) << " }\n";
  }
  return 0;
}

}  // namespace tamp::launcher
