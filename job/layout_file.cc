#include "job/layout_file.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"

namespace tamp {
namespace {

constexpr size_t kMaxNameBytes = 256;  // job_layout.h's kMaxTensorNameBytes.

// One meaningful line of a file: its number (1-based) and its words, comment stripped.
struct Line {
  int number = 0;
  std::vector<absl::string_view> words;
};

std::vector<Line> Lines(absl::string_view text) {
  std::vector<Line> lines;
  int number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++number;
    const size_t comment = line.find('#');
    if (comment != absl::string_view::npos) line = line.substr(0, comment);
    std::vector<absl::string_view> words =
        absl::StrSplit(line, absl::ByAnyChar(" \t\r"), absl::SkipEmpty());
    if (!words.empty()) lines.push_back({number, std::move(words)});
  }
  return lines;
}

absl::Status LineError(absl::string_view source, int line, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat(source, ":", line, ": ", problem));
}

// Checks the first line is "<magic> <version>".
// Returns the version found, from `oldest` to `version`.
absl::StatusOr<int> CheckHeader(const std::vector<Line>& lines, absl::string_view source,
                                absl::string_view magic, int version, int oldest) {
  const std::string expected = absl::StrCat(magic, " ", version);
  if (lines.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": empty; the first line must be '", expected, "'"));
  }
  const Line& first = lines.front();
  int found = 0;
  if (first.words.size() != 2 || first.words[0] != magic ||
      !absl::SimpleAtoi(first.words[1], &found)) {
    return LineError(source, first.number,
                     absl::StrCat("the first line must be '", expected, "'"));
  }
  if (found < oldest || found > version) {
    return LineError(source, first.number,
                     absl::StrCat("this build reads ", magic, " version ",
                                  oldest == version ? absl::StrCat(version)
                                                    : absl::StrCat(oldest, " to ", version),
                                  ", the file says ", found));
  }
  return found;
}

bool ValidNameChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' ||
         c == '-' || c == '/';
}

absl::StatusOr<double> Milliseconds(absl::string_view word, absl::string_view source, int line,
                                    absl::string_view what) {
  double ms = 0;
  if (!absl::SimpleAtod(word, &ms) || !std::isfinite(ms)) {
    return LineError(source, line, absl::StrCat("layer: ", what, " '", word, "' is not a number"));
  }
  if (ms < 0) {
    return LineError(source, line, absl::StrCat("layer: ", what, " ", word, " is negative"));
  }
  return ms;
}

absl::StatusOr<std::string> ReadFile(const std::string& path, absl::string_view what) {
  std::ifstream file(path);
  if (!file) return absl::NotFoundError(absl::StrCat(what, " '", path, "' cannot be read"));
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

}  // namespace

double LayerProfile::step_ms() const {
  // Summed as TensorReadyMs() sums, so the last tensor is ready exactly at the step's end.
  double t = 0;
  for (const ProfileLayer& layer : layers) t += layer.forward_ms * scale;
  for (auto layer = layers.rbegin(); layer != layers.rend(); ++layer) t += layer->backward_ms * scale;
  return t;
}

std::vector<double> LayerProfile::TensorReadyMs(size_t num_tensors) const {
  std::vector<double> ready(num_tensors, 0);
  double t = 0;
  for (const ProfileLayer& layer : layers) t += layer.forward_ms * scale;
  for (auto layer = layers.rbegin(); layer != layers.rend(); ++layer) {
    t += layer->backward_ms * scale;
    for (int tensor : layer->tensors) ready[tensor] = t;
  }
  return ready;
}

absl::StatusOr<std::vector<TensorSpec>> ParseLayout(absl::string_view text,
                                                    absl::string_view source) {
  const std::vector<Line> lines = Lines(text);
  TAMP_RETURN_IF_ERROR(
      CheckHeader(lines, source, "tamp-layout", kLayoutFileVersion, kLayoutFileVersion).status());
  std::vector<TensorSpec> tensors;
  absl::flat_hash_map<std::string, int> line_of;
  for (size_t i = 1; i < lines.size(); ++i) {
    const Line& line = lines[i];
    const absl::string_view name = line.words[0];
    if (name.size() > kMaxNameBytes) {
      return LineError(source, line.number,
                       absl::StrCat("tensor name longer than ", kMaxNameBytes, " bytes"));
    }
    for (char c : name) {
      if (!ValidNameChar(c)) {
        return LineError(source, line.number,
                         absl::StrCat("tensor name '", name, "': character '", std::string(1, c),
                                      "' is not a letter, digit or one of ._-/"));
      }
    }
    const int rank = static_cast<int>(line.words.size()) - 1;
    if (rank < 1 || rank > kMaxTensorDims) {
      return LineError(source, line.number,
                       absl::StrCat("tensor '", name, "' has ", rank,
                                    " dimensions; a tensor has 1 to ", kMaxTensorDims));
    }
    auto [earlier, inserted] = line_of.emplace(std::string(name), line.number);
    if (!inserted) {
      return LineError(source, line.number,
                       absl::StrCat("tensor '", name, "' is already at line ", earlier->second));
    }
    TensorSpec spec;
    spec.name = std::string(name);
    for (int d = 1; d <= rank; ++d) {
      int64_t dim = 0;
      if (!absl::SimpleAtoi(line.words[d], &dim) || dim < 1 || dim > (int64_t{1} << 40)) {
        return LineError(source, line.number,
                         absl::StrCat("tensor '", name, "': dimension ", d, " '", line.words[d],
                                      "' is not an integer in [1, 2^40]"));
      }
      spec.shape.push_back(dim);
    }
    spec.is_bias = rank == 1;
    spec.fan_in = rank == 1 ? 1 : spec.elements() / spec.shape[0];
    tensors.push_back(std::move(spec));
  }
  if (tensors.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": the layout has no tensors"));
  }
  return tensors;
}

absl::StatusOr<LayerProfile> ParseProfile(absl::string_view text, absl::string_view source,
                                          const std::vector<TensorSpec>& tensors) {
  const std::vector<Line> lines = Lines(text);
  TAMP_ASSIGN_OR_RETURN(const int version,
                        CheckHeader(lines, source, "tamp-profile", kProfileFileVersion, 1));
  LayerProfile profile;
  int scale_line = 0, compute_line = 0;
  std::vector<int> layer_line_of(tensors.size(), 0);  // 0: in no layer yet.
  for (size_t i = 1; i < lines.size(); ++i) {
    const Line& line = lines[i];
    const absl::string_view key = line.words[0];
    if (key == "scale") {
      if (scale_line != 0) {
        return LineError(source, line.number,
                         absl::StrCat("scale: already given at line ", scale_line));
      }
      if (line.words.size() != 2 || !absl::SimpleAtod(line.words[1], &profile.scale) ||
          !std::isfinite(profile.scale) || profile.scale <= 0) {
        return LineError(source, line.number, "scale: expected one finite number > 0");
      }
      scale_line = line.number;
      continue;
    }
    if (key == "compute") {
      if (version < 2) {
        return LineError(source, line.number,
                         "compute: needs 'tamp-profile 2' as the first line (version 1 has no "
                         "compute line)");
      }
      if (compute_line != 0) {
        return LineError(source, line.number,
                         absl::StrCat("compute: already given at line ", compute_line));
      }
      if (line.words.size() != 2 || (line.words[1] != "cpu" && line.words[1] != "accelerator")) {
        return LineError(source, line.number, "compute: expected 'cpu' or 'accelerator'");
      }
      profile.compute_on_cpu = line.words[1] == "cpu";
      compute_line = line.number;
      continue;
    }
    if (key != "layer") {
      return LineError(source, line.number,
                       absl::StrCat("unknown key '", key, "' (expected ",
                                    version >= 2 ? "'scale', 'compute' or 'layer')"
                                                 : "'scale' or 'layer')"));
    }
    if (line.words.size() < 4) {
      return LineError(source, line.number,
                       "layer: expected FORWARD_MS BACKWARD_MS and at least one tensor");
    }
    ProfileLayer layer;
    TAMP_ASSIGN_OR_RETURN(layer.forward_ms,
                          Milliseconds(line.words[1], source, line.number, "forward ms"));
    TAMP_ASSIGN_OR_RETURN(layer.backward_ms,
                          Milliseconds(line.words[2], source, line.number, "backward ms"));
    for (size_t w = 3; w < line.words.size(); ++w) {
      const absl::string_view pattern = line.words[w];
      bool matched = false;
      for (size_t t = 0; t < tensors.size(); ++t) {
        if (!TensorNameMatches(pattern, tensors[t].name)) continue;
        matched = true;
        if (layer_line_of[t] != 0) {
          return LineError(source, line.number,
                           absl::StrCat("layer: tensor '", tensors[t].name,
                                        "' is already in the layer at line ", layer_line_of[t]));
        }
        layer_line_of[t] = line.number;
        layer.tensors.push_back(static_cast<int>(t));
      }
      if (!matched) {
        return LineError(source, line.number,
                         absl::StrCat("layer: '", pattern, "' matches no tensor of the layout"));
      }
    }
    std::sort(layer.tensors.begin(), layer.tensors.end());
    profile.layers.push_back(std::move(layer));
  }
  if (scale_line == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": no 'scale' line (write 'scale 1' for the times as given)"));
  }
  for (size_t t = 0; t < tensors.size(); ++t) {
    if (layer_line_of[t] == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          source, ": tensor '", tensors[t].name, "' of the layout is in no layer"));
    }
  }
  return profile;
}

absl::StatusOr<std::vector<TensorSpec>> LoadLayoutFile(const std::string& path) {
  TAMP_ASSIGN_OR_RETURN(const std::string text, ReadFile(path, "layout file"));
  return ParseLayout(text, path);
}

absl::StatusOr<LayerProfile> LoadProfileFile(const std::string& path,
                                             const std::vector<TensorSpec>& tensors) {
  TAMP_ASSIGN_OR_RETURN(const std::string text, ReadFile(path, "profile file"));
  return ParseProfile(text, path, tensors);
}

}  // namespace tamp
