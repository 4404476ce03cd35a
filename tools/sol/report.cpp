// sol report PATH [--top N] [--by op|site|api] [--setup] [--format text|json|csv] [--flamegraph OUT.svg]
//                  [--perfetto OUT.pftrace]
//
// Reads a trace directory (every process and rank in it) or one summary file and prints where
// the traced time went. Rows are sorted by total time, longest first; --top N keeps the first N
// (default: 20 in text, all in json and csv). Set-up calls (ir/setup.hpp) are left out of
// the rows, the flame graph and the Perfetto trace, with a note saying how many, unless --setup; the
// input totals count them.
//
// JSON (--format json), one object; keys are stable, new keys may be added:
//   {"format": "sol-report/1", "by": "op"|"site"|"api",
//    "input": {"path", "processes", "ranks", "calls", "traced_ns", "wall_ns", "measuring_calls",
//              "measuring_ns" (auto's measuring, apart from traced_ns unless --with-measuring),
//              "transfers": {"nodes", "flushes", "flushes_by_cause": {cause: n}, "bytes_to_device",
//                            "bytes_to_host"} (device backends, summed over processes),
//              "process_list": [{"tag", "pid", "rank" (int|null), "argv": [str], "source": "summary"|"trace",
//                                "path", "backend" (str|null), "exit" (str|null), "calls", "traced_ns",
//                                "measuring_ns", "wall_ns"}],
//              "warnings": [str], "notes": [str] (which run of several was read; hidden set-up calls)},
//    "rows_total": <rows before --top>,
//    "rows": [row...],
//    "apis": [{"api", "signatures", "calls", "total_ns", "percent", "mean_ns", "flops", "bytes", "gflops",
//              "gbs"}]                                                      (only with --by api)}
// Rows, by --by:
//   op:   api, symbol, op, dtype, shape, backend, calls, total_ns, percent, mean_ns, min_ns, max_ns,
//         flops, bytes, gflops, gbs
//   site: symbol, op, dtype, shape (the op signature of most of the site's calls; "" when the
//         summary does not say), signatures (how many op signatures its calls had, of the first
//         four the trace names), other_calls (calls of any more), frames ([str], innermost first;
//         [] when unknown), calls, total_ns, percent, mean_ns, processes (how many processes
//         reached the site)
//   api:  api, symbol, signatures (distinct op signatures), calls, total_ns, percent, mean_ns, flops,
//         bytes, gflops, gbs
// CSV (--format csv): a header line with exactly these row keys in this order, then one line per
// row; "frames" is the frames joined by ";"; RFC 4180 quoting.
// Units: *_ns nanoseconds; percent of the traced time (the sum of all calls' time, 0..100);
// gflops = flops / total_ns (GFLOP/s), gbs = bytes / total_ns (GB/s); mean_ns an integer;
// floats are rounded to three decimals.
//
// Exit status: 0; 2 for a bad option or an input that cannot be used (missing path, directory
// without sol-* files, corrupt or non-SOL summary named on the command line, a flame graph or
// Perfetto trace that cannot be written). In a directory, a bad file is a "sol: warning: " line and is
// skipped.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "tools/sol/commands.hpp"
#include "tools/sol/flamegraph.hpp"
#include "tools/sol/output.hpp"
#include "tools/sol/perfetto.hpp"
#include "tools/sol/survey.hpp"

namespace sol::tools {
namespace {

uint64_t mean_ns(uint64_t total_ns, uint64_t calls) {
  return calls == 0 ? 0 : static_cast<uint64_t>(std::llround(static_cast<double>(total_ns) / calls));
}

// Time, share and rates of a group of calls, the columns every view has.
void add_time(Row& r, uint64_t calls, uint64_t total_ns, uint64_t traced_ns) {
  r["calls"] = calls;
  r["total_ns"] = total_ns;
  r["percent"] = round3(100.0 * ratio(total_ns, traced_ns));
  r["mean_ns"] = mean_ns(total_ns, calls);
}

void add_rates(Row& r, uint64_t flops, uint64_t bytes, uint64_t total_ns) {
  r["flops"] = flops;
  r["bytes"] = bytes;
  r["gflops"] = round3(ratio(flops, total_ns));
  r["gbs"] = round3(ratio(bytes, total_ns));
}

Row op_row(const OpKey& k, const OpStats& s, uint64_t traced_ns) {
  Row r = {{"api", k.api},     {"symbol", k.symbol}, {"op", k.op},
           {"dtype", k.dtype}, {"shape", k.shape},   {"backend", k.backend}};
  add_time(r, s.calls, s.total_ns, traced_ns);
  r["min_ns"] = s.min_ns;
  r["max_ns"] = s.max_ns;
  add_rates(r, s.flops, s.bytes, s.total_ns);
  return r;
}

Row site_row(const SiteKey& k, const SiteStats& s, uint64_t traced_ns) {
  Row r = site_identity(k, s);
  add_time(r, s.calls, s.total_ns, traced_ns);
  r["processes"] = s.processes;
  return r;
}

struct ApiGroup {
  std::string api, symbol;
  size_t signatures = 0;
  OpStats stats;
};

Row api_row(const ApiGroup& g, uint64_t traced_ns, bool with_symbol) {
  Row r = {{"api", g.api}};
  if (with_symbol) r["symbol"] = g.symbol;
  r["signatures"] = g.signatures;
  add_time(r, g.stats.calls, g.stats.total_ns, traced_ns);
  add_rates(r, g.stats.flops, g.stats.bytes, g.stats.total_ns);
  return r;
}

// Longest first; ties by call count, then by key so that the order is stable.
template <typename T, typename Total, typename Calls>
void sort_by_time(std::vector<T>& v, Total total, Calls calls) {
  std::stable_sort(v.begin(), v.end(), [&](const T& a, const T& b) {
    if (total(a) != total(b)) return total(a) > total(b);
    return calls(a) > calls(b);
  });
}

std::string rate(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", x);
  return buf;
}

std::vector<std::string> time_cells(const Row& r) {
  return {std::to_string(r["calls"].get<uint64_t>()), human_ns(r["total_ns"].get<uint64_t>()),
          human_percent(r["percent"].get<double>()), human_ns(r["mean_ns"].get<uint64_t>())};
}

struct View {
  std::vector<Row> rows;  // all, sorted
  std::vector<Row> apis;  // --by api: the families
  TextTable table;
  SiteLabels labels{};  // --by site
  std::vector<std::string> text_cells(const Row& r) const;
};

View build_view(const Survey& s, const std::string& by) {
  const uint64_t traced = s.traced_ns();
  if (by == "op") {
    std::vector<std::pair<OpKey, OpStats>> v(s.ops.begin(), s.ops.end());
    sort_by_time(
        v, [](const auto& e) { return e.second.total_ns; }, [](const auto& e) { return e.second.calls; });
    View view{{},
              {},
              TextTable({"calls", "total", "%", "mean", "GFLOP/s", "GB/s", "api", "symbol", "op", "dtype",
                         "backend", "shape"},
                        {false, false, false, false, false, false, true, true, true, true, true, true})};
    for (const auto& [k, st] : v) view.rows.push_back(op_row(k, st, traced));
    return view;
  }
  if (by == "site") {
    std::vector<std::pair<SiteKey, SiteStats>> v(s.sites.begin(), s.sites.end());
    sort_by_time(
        v, [](const auto& e) { return e.second.total_ns; }, [](const auto& e) { return e.second.calls; });
    View view{{},
              {},
              TextTable({"calls", "total", "%", "mean", "procs", kSiteHeader},
                        {false, false, false, false, false, true})};
    std::vector<SiteKey> keys;
    for (const auto& [k, st] : v) {
      view.rows.push_back(site_row(k, st, traced));
      keys.push_back(k);
    }
    view.labels = site_labels(keys);
    return view;
  }
  std::map<std::pair<std::string, std::string>, ApiGroup> symbols;
  std::map<std::string, ApiGroup> families;
  for (const auto& [k, st] : s.ops) {
    for (ApiGroup* g : {&symbols[{k.api, k.symbol}], &families[k.api]}) {
      g->api = k.api;
      g->signatures += 1;
      g->stats.add(st);
    }
    symbols[{k.api, k.symbol}].symbol = k.symbol;
  }
  std::vector<ApiGroup> sv, fv;
  for (auto& [k, g] : symbols) sv.push_back(g);
  for (auto& [k, g] : families) fv.push_back(g);
  const auto total = [](const ApiGroup& g) { return g.stats.total_ns; };
  const auto calls = [](const ApiGroup& g) { return g.stats.calls; };
  sort_by_time(sv, total, calls);
  sort_by_time(fv, total, calls);
  View view{{},
            {},
            TextTable({"calls", "total", "%", "mean", "GFLOP/s", "GB/s", "sigs", "api", "symbol"},
                      {false, false, false, false, false, false, false, true, true})};
  for (const auto& g : sv) view.rows.push_back(api_row(g, traced, true));
  for (const auto& g : fv) view.apis.push_back(api_row(g, traced, false));
  return view;
}

std::vector<std::string> View::text_cells(const Row& r) const {
  std::vector<std::string> c = time_cells(r);
  if (r.contains("frames")) {
    c.push_back(std::to_string(r["processes"].get<uint64_t>()));
    c.push_back(site_op_text(r));
    return c;
  }
  c.push_back(rate(r["gflops"].get<double>()));
  c.push_back(rate(r["gbs"].get<double>()));
  if (r.contains("signatures")) {
    c.push_back(std::to_string(r["signatures"].get<uint64_t>()));
    c.push_back(r["api"].get<std::string>());
    if (r.contains("symbol")) c.push_back(r["symbol"].get<std::string>());
    return c;
  }
  for (const char* key : {"api", "symbol", "op", "dtype", "backend", "shape"})
    c.push_back(r[key].get<std::string>());
  return c;
}

void print_text(const Survey& s, View& view, const ReportOptions& o, const std::string& measuring) {
  std::printf("sol report: %s: %s\n", s.path.c_str(), survey_line(s).c_str());
  if (const std::string device = transfers_line(s); !device.empty()) std::printf("  %s\n", device.c_str());
  if (!measuring.empty()) std::printf("  %s\n", measuring.c_str());
  const size_t shown = std::min(view.rows.size(), o.limit());
  if (view.rows.empty()) {
    std::printf("\n  no calls were traced\n");
    return;
  }
  std::printf("\n");
  for (size_t i = 0; i < shown; ++i) {
    const Row& r = view.rows[i];
    const bool site = r.contains("frames");
    view.table.add(view.text_cells(r), site ? view.labels.at({r["symbol"].get<std::string>(),
                                                              r["frames"].get<std::vector<std::string>>()})
                                            : std::string());
  }
  view.table.print(stdout);
  if (shown < view.rows.size())
    std::printf("  (%zu more rows; --top N shows more)\n", view.rows.size() - shown);
  if (!view.apis.empty()) {
    std::printf("\n  by API family:\n");
    TextTable families({"calls", "total", "%", "mean", "GFLOP/s", "GB/s", "sigs", "api"},
                       {false, false, false, false, false, false, false, true});
    for (const Row& r : view.apis) families.add(view.text_cells(r));
    families.print(stdout);
  }
}

}  // namespace

int cmd_report(const ReportOptions& o) {
  std::string error;
  auto survey = load_survey(o.path, error);
  if (!survey) return fail(2, error);
  if (!o.setup)
    if (const uint64_t hidden = drop_setup(*survey))
      survey->notes.push_back(std::to_string(hidden) + " set-up calls are not shown (--setup shows them)");
  print_warnings(*survey);
  const std::string measuring = measuring_note(*survey, o.with_measuring);
  if (o.with_measuring) count_measuring_in(*survey);

  View view = build_view(*survey, o.by);
  const size_t shown = std::min(view.rows.size(), o.limit());
  if (o.format == Format::text) {
    print_text(*survey, view, o, measuring);
  } else if (o.format == Format::json) {
    Row doc = {{"format", "sol-report/1"},
               {"by", o.by},
               {"input", survey_totals(*survey)},
               {"rows_total", view.rows.size()},
               {"rows", Row::array()}};
    for (size_t i = 0; i < shown; ++i) doc["rows"].push_back(view.rows[i]);
    if (o.by == "api") doc["apis"] = view.apis;
    std::printf("%s\n", doc.dump(2).c_str());
  } else {
    const Row example = o.by == "op"     ? op_row({}, {}, 0)
                        : o.by == "site" ? site_row({}, {}, 0)
                                         : api_row({}, 0, true);
    write_csv(stdout, columns_of(example), {view.rows.begin(), view.rows.begin() + shown});
  }
  std::fflush(stdout);

  if (!o.flamegraph.empty()) {
    if (!write_flamegraph(*survey, o.flamegraph, error)) return fail(2, error);
    print_written(o.flamegraph, "an SVG flame graph of the calls' stacks");
  }
  if (!o.perfetto.empty()) {
    std::vector<std::string> warnings;
    const bool written = write_perfetto(*survey, o.perfetto, o.setup, warnings, error);
    for (const auto& w : warnings) std::fprintf(stderr, "sol: warning: %s\n", w.c_str());
    if (!written) return fail(2, error);
    print_written(o.perfetto, "a Perfetto trace (open it in ui.perfetto.dev)");
  }
  return 0;
}

}  // namespace sol::tools
