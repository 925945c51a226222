#include "tools/tamp/table.h"

#include <algorithm>

namespace tamp::launcher {

std::vector<std::string> WrapText(const std::string& text, size_t width) {
  if (width == 0 || text.size() <= width) return {text};
  std::vector<std::string> lines;
  std::string line;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find(' ', pos);
    if (end == std::string::npos) end = text.size();
    const std::string word = text.substr(pos, end - pos);
    pos = end + 1;
    if (word.empty()) continue;
    if (!line.empty() && line.size() + 1 + word.size() > width) {
      lines.push_back(line);
      line.clear();
    }
    if (!line.empty()) line += ' ';
    line += word;
  }
  if (!line.empty() || lines.empty()) lines.push_back(line);
  return lines;
}

std::string FormatTable(const std::vector<std::string>& header,
                        const std::vector<std::vector<std::string>>& rows,
                        const std::vector<size_t>& max_widths) {
  const size_t columns = header.size();
  // Each row as wrapped cells: cells[c] is the list of lines of column c.
  using Row = std::vector<std::vector<std::string>>;
  auto wrap_row = [&](const std::vector<std::string>& row) {
    Row cells(columns);
    for (size_t c = 0; c < columns; ++c) {
      const size_t width = c < max_widths.size() ? max_widths[c] : 0;
      cells[c] = WrapText(c < row.size() ? row[c] : "", width);
    }
    return cells;
  };
  std::vector<Row> table;
  table.push_back(wrap_row(header));
  std::vector<std::string> rule;
  for (const std::string& title : header) rule.push_back(std::string(title.size(), '-'));
  table.push_back(wrap_row(rule));
  for (const auto& row : rows) table.push_back(wrap_row(row));

  std::vector<size_t> widths(columns, 0);
  for (const Row& row : table) {
    for (size_t c = 0; c < columns; ++c) {
      for (const std::string& line : row[c]) widths[c] = std::max(widths[c], line.size());
    }
  }
  std::string out;
  for (const Row& row : table) {
    size_t height = 0;
    for (const auto& cell : row) height = std::max(height, cell.size());
    for (size_t i = 0; i < height; ++i) {
      std::string line;
      for (size_t c = 0; c < columns; ++c) {
        const std::string text = i < row[c].size() ? row[c][i] : "";
        line += text;
        if (c + 1 < columns) line += std::string(widths[c] - text.size() + 2, ' ');
      }
      while (!line.empty() && line.back() == ' ') line.pop_back();
      out += line;
      out += '\n';
    }
  }
  return out;
}

}  // namespace tamp::launcher
