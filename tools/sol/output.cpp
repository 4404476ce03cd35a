#include "tools/sol/output.hpp"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <filesystem>
#include <set>

namespace sol::tools {

std::string human_percent(double pct, bool sign) {
  char buf[32];
  std::snprintf(buf, sizeof buf, sign ? "%+.1f%%" : "%.1f%%", pct);
  return buf;
}

std::string signed_count(int64_t n) {
  return (n > 0 ? "+" : "") + std::to_string(n);
}

std::string signed_ns(int64_t ns) {
  if (ns == 0) return "0";
  return (ns > 0 ? "+" : "-") + human_ns(static_cast<uint64_t>(ns > 0 ? ns : -ns));
}

double round3(double x) {
  return std::round(x * 1000.0) / 1000.0;
}

double ratio(double numerator, double denominator) {
  return denominator == 0 ? 0.0 : numerator / denominator;
}

namespace {

std::string site_label(const SiteKey& key, bool with_locations) {
  constexpr size_t kDepth = 3;   // innermost frames shown
  constexpr size_t kWidth = 40;  // long C++ names keep their tail: the function itself
  std::string out = key.symbol;
  if (key.frames.empty()) return out + " < (no frames)";
  for (size_t i = 0; i < key.frames.size() && i < kDepth; ++i) {
    std::string f = frame_name(key.frames[i]);
    // A frame without a function is named by its library's file and offset: kept whole (a
    // library's name cut from the left names none).
    const bool function = f != frame_location(key.frames[i]);
    if (function && f.size() > kWidth) f = ".." + f.substr(f.size() - kWidth + 2);
    const std::string location = with_locations ? frame_location(key.frames[i]) : "";
    out += " < " + f + (location.empty() || location == f ? "" : " (" + location + ")");
  }
  if (key.frames.size() <= kDepth) return out;
  // Then the line of the program that led here: the innermost Python frame of the program's own
  // code (outside site-packages and the standard library), else the innermost Python frame.
  std::optional<std::string> program, any;
  for (size_t i = kDepth; i < key.frames.size() && !program; ++i) {
    if (const auto p = python_frame(key.frames[i])) {
      if (!library_python_frame(*p)) program = frame_name(key.frames[i]);
      if (!any) any = frame_name(key.frames[i]);
    }
  }
  out += " < ..";
  if (program || any) out += " < " + (program ? *program : *any);
  return out;
}

// Where two stacks part: the first frame index at which they differ (the shorter one's length when
// one continues the other).
size_t parting(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  return i;
}

}  // namespace

SiteLabels site_labels(const std::vector<SiteKey>& keys) {
  // Sites that would read the same get their frames' locations; those that still do, the frames
  // (whole) where their stacks part from each other's.
  std::map<std::string, std::vector<const SiteKey*>> by_label;
  for (const auto& k : keys) by_label[site_label(k, false)].push_back(&k);
  std::map<std::string, std::vector<const SiteKey*>> same;
  for (const auto& [label, group] : by_label)
    for (const SiteKey* k : group) same[group.size() > 1 ? site_label(*k, true) : label].push_back(k);
  SiteLabels labels;
  for (const auto& [label, group] : same) {
    for (const SiteKey* k : group) {
      std::set<size_t> parts;
      for (const SiteKey* other : group)
        if (other != k) parts.insert(parting(k->frames, other->frames));
      std::string out = label;
      for (size_t i : parts)
        out += " [frame " + std::to_string(i) + ": " +
               (i < k->frames.size() ? k->frames[i] : "none, the stack ends") + "]";
      labels[*k] = out;
    }
  }
  return labels;
}

TextTable::TextTable(std::vector<std::string> header, std::vector<bool> left)
    : header_(std::move(header)), left_(std::move(left)) {
  left_.resize(header_.size(), false);
}

void TextTable::print(FILE* out, const std::string& indent) const {
  std::vector<size_t> width(header_.size());
  for (size_t c = 0; c < header_.size(); ++c) width[c] = header_[c].size();
  for (const auto& r : rows_)
    for (size_t c = 0; c < r.size() && c < width.size(); ++c) width[c] = std::max(width[c], r[c].size());
  auto line = [&](const std::vector<std::string>& cells) {
    std::string s = indent;
    for (size_t c = 0; c < cells.size() && c < width.size(); ++c) {
      const bool last = c + 1 == cells.size();
      const std::string pad(width[c] - cells[c].size(), ' ');
      s += left_[c] ? cells[c] + (last ? "" : pad) : pad + cells[c];
      if (!last) s += "  ";
    }
    std::fprintf(out, "%s\n", s.c_str());
  };
  size_t last_column = indent.size();
  for (size_t c = 0; c + 1 < width.size(); ++c) last_column += width[c] + 2;
  line(header_);
  for (size_t i = 0; i < rows_.size(); ++i) {
    line(rows_[i]);
    if (!below_[i].empty())
      std::fprintf(out, "%s%s\n", std::string(last_column, ' ').c_str(), below_[i].c_str());
  }
}

Row site_identity(const SiteKey& k, const SiteStats& s) {
  const SiteOp* main = nullptr;
  for (const auto& [op, calls] : s.ops)
    if (!main || calls > s.ops.at(*main)) main = &op;
  return {{"symbol", k.symbol},
          {"op", main ? main->op : ""},
          {"dtype", main ? main->dtype : ""},
          {"shape", main ? main->shape : ""},
          {"signatures", s.ops.size()},
          {"other_calls", s.other_calls},
          {"frames", k.frames}};
}

std::string site_op_text(const Row& identity) {
  std::string out = identity["op"].get<std::string>();
  if (out.empty()) return "(op not recorded)";
  if (const std::string shape = identity["shape"].get<std::string>(); !shape.empty()) out += " " + shape;
  // Calls of signatures the trace does not name (beyond its first four) make it "or more".
  const uint64_t others = identity["signatures"].get<uint64_t>() - 1;
  if (identity["other_calls"].get<uint64_t>() > 0)
    return out + " (+" + std::to_string(others + 1) + " or more others)";
  if (others > 0) out += " (+" + std::to_string(others) + (others == 1 ? " other)" : " others)");
  return out;
}

void print_written(const std::string& path, const std::string& what) {
  std::error_code ec;
  const std::filesystem::path full = std::filesystem::absolute(path, ec);
  std::fprintf(stderr, "sol: wrote %s: %s\n", ec ? path.c_str() : full.c_str(), what.c_str());
}

namespace {

std::string csv_field(const Row& v) {
  std::string s;
  if (v.is_null()) return s;
  if (v.is_string())
    s = v.get<std::string>();
  else if (v.is_array()) {
    for (size_t i = 0; i < v.size(); ++i)
      s += (i ? ";" : "") + (v[i].is_string() ? v[i].get<std::string>() : v[i].dump());
  } else
    s = v.dump();
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

}  // namespace

void write_csv(FILE* out, const std::vector<std::string>& columns, const std::vector<Row>& rows) {
  std::string line;
  for (size_t c = 0; c < columns.size(); ++c) line += (c ? "," : "") + columns[c];
  std::fprintf(out, "%s\n", line.c_str());
  for (const Row& r : rows) {
    line.clear();
    for (size_t c = 0; c < columns.size(); ++c) {
      if (c) line += ',';
      const auto it = r.find(columns[c]);
      if (it != r.end()) line += csv_field(*it);
    }
    std::fprintf(out, "%s\n", line.c_str());
  }
}

std::vector<std::string> columns_of(const Row& example) {
  std::vector<std::string> cols;
  for (auto it = example.begin(); it != example.end(); ++it) cols.push_back(it.key());
  return cols;
}

Process::Transfers transfers(const Survey& s) {
  Process::Transfers t;
  for (const Process& p : s.processes) {
    t.nodes += p.transfers.nodes;
    t.flushes += p.transfers.flushes;
    t.to_device += p.transfers.to_device;
    t.to_host += p.transfers.to_host;
    for (const auto& [cause, n] : p.transfers.flushes_by_cause) t.flushes_by_cause[cause] += n;
  }
  return t;
}

std::string transfers_line(const Survey& s) {
  const Process::Transfers t = transfers(s);
  if (t.nodes == 0) return "";
  std::string causes;
  for (const auto& [cause, n] : t.flushes_by_cause) causes += (causes.empty() ? "" : ", ") + cause + " " + std::to_string(n);
  return "device: " + std::to_string(t.nodes) + " nodes, " + std::to_string(t.flushes) + " flushes (" + causes +
         "), " + human_bytes(t.to_device) + " to the device, " + human_bytes(t.to_host) + " back";
}

Row survey_totals(const Survey& s) {
  Row processes = Row::array();
  for (const Process& p : s.processes) {
    Row argv = Row::array();
    for (const auto& a : p.argv) argv.push_back(a);
    processes.push_back({{"tag", p.tag},
                         {"pid", p.pid},
                         {"rank", p.rank ? Row(*p.rank) : Row(nullptr)},
                         {"argv", argv},
                         {"source", p.source},
                         {"path", p.path},
                         {"backend", p.backend.empty() ? Row(nullptr) : Row(p.backend)},
                         {"exit", p.exit.empty() ? Row(nullptr) : Row(p.exit)},
                         {"calls", p.calls},
                         {"traced_ns", p.traced_ns},
                         {"measuring_ns", p.measuring_ns},
                         {"wall_ns", p.wall_ns}});
  }
  Row warnings = Row::array(), notes = Row::array();
  for (const auto& w : s.warnings) warnings.push_back(w);
  for (const auto& n : s.notes) notes.push_back(n);
  const Process::Transfers t = transfers(s);
  Row causes = Row::object();
  for (const auto& [cause, n] : t.flushes_by_cause) causes[cause] = n;
  return {{"path", s.path},
          {"transfers",
           {{"nodes", t.nodes},
            {"flushes", t.flushes},
            {"flushes_by_cause", causes},
            {"bytes_to_device", t.to_device},
            {"bytes_to_host", t.to_host}}},
          {"processes", s.processes.size()},
          {"ranks", s.ranks()},
          {"calls", s.calls()},
          {"traced_ns", s.traced_ns()},
          {"measuring_calls", s.measuring().calls},
          {"measuring_ns", s.measuring().measuring_ns},
          {"wall_ns", s.wall_ns()},
          {"process_list", processes},
          {"warnings", warnings},
          {"notes", notes}};
}

std::string survey_line(const Survey& s) {
  const size_t n = s.processes.size(), ranks = s.ranks();
  std::string line = std::to_string(n) + (n == 1 ? " process" : " processes");
  if (ranks > 0) line += " (" + std::to_string(ranks) + (ranks == 1 ? " rank)" : " ranks)");
  line += ", " + std::to_string(s.calls()) + " calls, " + human_ns(s.traced_ns()) + " traced, " +
          human_ns(s.wall_ns()) + " wall";
  size_t rebuilt = 0;
  for (const auto& p : s.processes) rebuilt += p.source == "trace";
  if (rebuilt > 0)
    line += "; " + std::to_string(rebuilt) +
            " without a summary (killed?), read from trace.json: sites without frames";
  return line;
}

}  // namespace sol::tools
