// Plain-text tables for CLI listings (`tamp codecs`).
#ifndef TAMP_TOOLS_TAMP_TABLE_H_
#define TAMP_TOOLS_TAMP_TABLE_H_

#include <cstddef>
#include <string>
#include <vector>

namespace tamp::launcher {

// FormatTable()
//
// Left-aligned columns separated by two spaces, a header row and a dashed rule under it;
// trailing spaces trimmed, each line ending in '\n'. Rows shorter than the header are padded
// with empty cells. A cell longer than its column's entry in `max_widths` (0 or missing:
// unlimited) wraps at spaces onto continuation lines; a single word longer than that stays
// whole. Example:
//   NAME  PARAMETERS
//   ----  ----------
//   none  -
//   topk  ratio, count
std::string FormatTable(const std::vector<std::string>& header,
                        const std::vector<std::vector<std::string>>& rows,
                        const std::vector<size_t>& max_widths = {});

// WrapText()
//
// Splits `text` at spaces into lines of at most `width` characters (0: no limit).
std::vector<std::string> WrapText(const std::string& text, size_t width);

}  // namespace tamp::launcher

#endif  // TAMP_TOOLS_TAMP_TABLE_H_
