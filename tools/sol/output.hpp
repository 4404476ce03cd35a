// What `sol report` and `sol diff` share: number formats and output writers.
#pragma once

#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/human.hpp"
#include "tools/sol/survey.hpp"

namespace sol::tools {

// Rows keep their keys in the order they were added: those are the CSV columns.
using Row = nlohmann::ordered_json;

// "825.0 us", "51.23 ms", "2.513 s".
using sol::human_ns;  // common/human.hpp
// "1.6%", and "+1.6%" with `sign`.
std::string human_percent(double pct, bool sign = false);
// A count or duration with its sign: "+23", "-3.10 ms".
std::string signed_count(int64_t n);
std::string signed_ns(int64_t ns);

// Rounded to three decimals, so that JSON and CSV do not carry float noise.
double round3(double x);
// numerator / denominator, 0 when the denominator is 0.
double ratio(double numerator, double denominator);

// Call sites for people: the symbol, then its innermost frames, shortened, joined by " < ", and the
// program's own line that led there. Sites that would read the same get their frames' locations,
// then the frame (whole, with its index) where their stacks part.
using SiteLabels = std::map<SiteKey, std::string>;
SiteLabels site_labels(const std::vector<SiteKey>& keys);

// What identifies a call site in rows: symbol, op, dtype, shape (the op signature of most of its
// calls; "" when the summary does not say), signatures (how many its calls had, of those the
// summary names), other_calls (calls of signatures beyond those), frames.
Row site_identity(const SiteKey& k, const SiteStats& s);
// "convolution prop=forward_training mb8_ic3oc8... (+1 other)": a site's op and shape, for people.
std::string site_op_text(const Row& identity);
// The header of the column of site rows in text tables: the op and shape, with the site below.
inline constexpr const char* kSiteHeader = "op and shape, and below: site (symbol < innermost frames)";

// A text table: columns right-aligned unless named in `left`; the last column is not padded. A
// row's `below`, when given, goes on a line of its own under the row's last cell.
class TextTable {
 public:
  TextTable(std::vector<std::string> header, std::vector<bool> left);
  void add(std::vector<std::string> row, std::string below = {}) {
    rows_.push_back(std::move(row));
    below_.push_back(std::move(below));
  }
  void print(FILE* out, const std::string& indent = "  ") const;

 private:
  std::vector<std::string> header_;
  std::vector<bool> left_;
  std::vector<std::vector<std::string>> rows_;
  std::vector<std::string> below_;
};

// "sol: wrote /abs/path/flame.svg: an SVG flame graph ..." on stderr (stdout may be JSON or CSV):
// every command that writes a file says which.
void print_written(const std::string& path, const std::string& what);

// CSV (RFC 4180): a header of `columns`, then one line per row; arrays become their elements
// joined by ";", null an empty field.
void write_csv(FILE* out, const std::vector<std::string>& columns, const std::vector<Row>& rows);

// The keys of a row, in order: the CSV columns.
std::vector<std::string> columns_of(const Row& example);

// The "inputs" object of a JSON document: what was read.
Row survey_totals(const Survey& s);

// One line: "3 processes (2 ranks), 1577 calls, 52.10 ms traced, 2.513 s wall".
std::string survey_line(const Survey& s);

// What device backends moved, over every process, and as one line ("device: 3 nodes, 3 flushes
// (eager 3), 34.0 KiB to the device, 24.0 KiB back"; "" when no device ran a node).
Process::Transfers transfers(const Survey& s);
std::string transfers_line(const Survey& s);

}  // namespace sol::tools
