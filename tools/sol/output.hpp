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

// Call sites for people: the symbol, then its innermost frames, shortened, joined by " < ". Sites
// that would read the same get their frames' locations, then a number.
using SiteLabels = std::map<SiteKey, std::string>;
SiteLabels site_labels(const std::vector<SiteKey>& keys);

// A text table: columns right-aligned unless named in `left`; the last column is not padded.
class TextTable {
 public:
  TextTable(std::vector<std::string> header, std::vector<bool> left);
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  void print(FILE* out, const std::string& indent = "  ") const;

 private:
  std::vector<std::string> header_;
  std::vector<bool> left_;
  std::vector<std::vector<std::string>> rows_;
};

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
