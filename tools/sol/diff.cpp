// sol diff A B [--across-apis] [--setup] [--rank steady|total] [--top N] [--format text|json|csv]
//
// What two surveys (each a trace directory or a summary file) do differently: the op signatures
// and the call sites found in only one of them, and for those in both the change in calls and
// time. Sections: only in A and only in B sorted by their time, longest first; common ones by
// |time delta|, largest first. --top N keeps N rows per section (default: 20 in text, all in
// json and csv). Set-up calls (ir/setup.hpp) are left out unless --setup, as in sol report.
//
// Time is steady-state time unless --rank total: the calls that did one-time work (as the trace
// noted it: a kernel compiled or loaded from the cache, a backend started, auto measuring the
// candidates) count as long as the other calls' mean, and the text marks them with their time and
// work. A side whose every call did such work has no steady-state time: shown as "-", ranked as 0.
// Totals are in the JSON and CSV either way.
//
// Ops match by what they compute: api, symbol, op, dtype and shape. Where they ran is an
// attribute (backend_a, backend_b: "native", or "native+opencl" when calls of the signature ran
// in several places, "" on a side without it), so the same program traced on two backends, two
// machines or CPU against GPU compares op by op. --across-apis matches by op, dtype and shape
// alone (sgemm_ and cblas_sgemm of the same column-major problem are one op; api and symbol then
// list every one seen, joined by "+"), and call sites by their frames alone. Otherwise call sites
// match when the symbol and the frame list are equal (site ids are per process).
//
// JSON (--format json), one object; keys are stable, new keys may be added:
//   {"format": "sol-diff/2", "across_apis": bool, "rank": "steady"|"total",
//    "a": <input>, "b": <input>          (the "input" object of sol report's JSON),
//    "totals": <deltas>                  (calls and traced time of the whole surveys),
//    "ops":   {"only_a": [op row], "only_b": [op row], "common": [op row],
//              "counts": {"only_a": n, "only_b": n, "common": n}}     (counts before --top),
//    "sites": {"only_a": [site row], ... the same}}
//   op row:   api, symbol, op, dtype, shape, backend_a, backend_b, <deltas>
//   site row: symbol, frames ([str], innermost first), <deltas>
//   <deltas>: calls_a, calls_b, calls_delta (b - a), calls_rel (delta / a, null when a is 0),
//             total_ns_a, total_ns_b, total_ns_delta, total_ns_rel (the same for time),
//             steady_ns_a, steady_ns_b, steady_ns_delta, steady_ns_rel (the same in steady state;
//             null where a side has none), one_time_calls_a, one_time_calls_b, one_time_ns_a,
//             one_time_ns_b (the calls that did one-time work and their time), one_time_a, one_time_b
//             (the kinds of work, "kernel compile, auto's measuring"; "" for none)
//   Rows only in A have the B values 0 (rel -1); rows only in B have the A values 0 (rel null).
//   (sol-diff/1 had one "backend", part of the match: a change of backend was two rows.)
// CSV (--format csv): one table, header
//   kind,side,api,symbol,op,dtype,shape,backend_a,backend_b,frames,calls_a,calls_b,calls_delta,
//   calls_rel,total_ns_a,total_ns_b,total_ns_delta,total_ns_rel,steady_ns_a,steady_ns_b,
//   steady_ns_delta,steady_ns_rel,one_time_calls_a,one_time_calls_b,one_time_ns_a,one_time_ns_b,
//   one_time_a,one_time_b
// kind is "op" or "site", side "only_a", "only_b" or "common"; fields a kind does not have are
// empty; frames are joined by ";"; rel fields are floats rounded to three decimals, empty for null.
//
// Exit status: 0 whether or not the surveys differ; 2 for a bad option or an unusable input (as
// for sol report).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <set>
#include <utility>

#include "tools/sol/commands.hpp"
#include "tools/sol/output.hpp"
#include "tools/sol/survey.hpp"

namespace sol::tools {
namespace {

// One side of a row: its calls and time, and those of its calls that did one-time work.
struct Side {
  uint64_t calls = 0, ns = 0;
  OneTime one_time;
  std::optional<uint64_t> steady() const { return steady_ns(calls, ns, one_time); }
};

int64_t minus(uint64_t b, uint64_t a) {
  return static_cast<int64_t>(b) - static_cast<int64_t>(a);
}

struct Delta {
  Side a, b;
  int64_t calls_delta() const { return minus(b.calls, a.calls); }
  int64_t ns_delta() const { return minus(b.ns, a.ns); }
};

// What a row of the diff is matched by, and what it shows besides.
struct OpMatch {
  std::string api, symbol, op, dtype, shape;  // api and symbol empty with --across-apis
  auto operator<=>(const OpMatch&) const = default;
};
struct Seen {
  Side side;
  std::set<std::string> apis, symbols, backends;
  SiteStats what;  // sites: what their calls computed
  void add(uint64_t calls, uint64_t ns, const OneTime& one_time) {
    side.calls += calls;
    side.ns += ns;
    side.one_time.add(one_time);
  }
};
struct OpRow {
  OpMatch key;
  std::string api, symbol, backend_a, backend_b;  // "+"-joined sets
};
struct SiteRow {
  SiteKey key;
  SiteStats what;  // what its calls computed, on either side
};

std::string joined(const std::set<std::string>& s) {
  std::string out;
  for (const auto& v : s) out += (out.empty() ? "" : "+") + v;
  return out;
}

std::map<OpMatch, Seen> ops_of(const Survey& s, bool across) {
  std::map<OpMatch, Seen> out;
  for (const auto& [k, st] : s.ops) {
    Seen& e = out[{across ? "" : k.api, across ? "" : k.symbol, k.op, k.dtype, k.shape}];
    e.add(st.calls, st.total_ns, st.one_time);
    e.apis.insert(k.api);
    e.symbols.insert(k.symbol);
    e.backends.insert(k.backend);
  }
  return out;
}

std::map<SiteKey, Seen> sites_of(const Survey& s, bool across) {
  std::map<SiteKey, Seen> out;
  for (const auto& [k, st] : s.sites) {
    Seen& e = out[{across ? "" : k.symbol, k.frames}];
    e.add(st.calls, st.total_ns, st.one_time);
    e.symbols.insert(k.symbol);
    e.what.add(st);
  }
  return out;
}

OpRow row_of(const OpMatch& k, const Seen* a, const Seen* b) {
  std::set<std::string> apis, symbols;
  for (const Seen* s : {a, b})
    if (s) {
      apis.insert(s->apis.begin(), s->apis.end());
      symbols.insert(s->symbols.begin(), s->symbols.end());
    }
  return {k, joined(apis), joined(symbols), a ? joined(a->backends) : "", b ? joined(b->backends) : ""};
}
SiteRow row_of(const SiteKey& k, const Seen* a, const Seen* b) {
  std::set<std::string> symbols;
  SiteStats what;
  for (const Seen* s : {a, b})
    if (s) {
      symbols.insert(s->symbols.begin(), s->symbols.end());
      what.add(s->what);
    }
  return {{joined(symbols), k.frames}, what};
}

template <typename Key>
struct Sections {
  std::vector<std::pair<Key, Delta>> only_a, only_b, common;
};

// The time a row is ranked by: its total, or its steady-state time (0 where it has none).
uint64_t ranked(const Side& s, bool total) {
  return total ? s.ns : s.steady().value_or(0);
}

template <typename Match>
auto compare(const std::map<Match, Seen>& a, const std::map<Match, Seen>& b, bool total) {
  using Row = decltype(row_of(std::declval<Match>(), nullptr, nullptr));
  Sections<Row> out;
  for (const auto& [k, s] : a) {
    const auto it = b.find(k);
    Delta d;
    d.a = s.side;
    if (it == b.end()) {
      out.only_a.push_back({row_of(k, &s, nullptr), d});
    } else {
      d.b = it->second.side;
      out.common.push_back({row_of(k, &s, &it->second), d});
    }
  }
  for (const auto& [k, s] : b) {
    if (a.count(k)) continue;
    Delta d;
    d.b = s.side;
    out.only_b.push_back({row_of(k, nullptr, &s), d});
  }
  const auto by = [](auto value) {
    return [value](const auto& x, const auto& y) { return value(x.second) > value(y.second); };
  };
  std::stable_sort(out.only_a.begin(), out.only_a.end(),
                   by([total](const Delta& d) { return ranked(d.a, total); }));
  std::stable_sort(out.only_b.begin(), out.only_b.end(),
                   by([total](const Delta& d) { return ranked(d.b, total); }));
  std::stable_sort(out.common.begin(), out.common.end(), by([total](const Delta& d) {
                     return std::make_pair(std::llabs(minus(ranked(d.b, total), ranked(d.a, total))),
                                           std::llabs(d.calls_delta()));
                   }));
  return out;
}

Row rel(int64_t delta, uint64_t base) {
  return base == 0 ? Row(nullptr) : Row(round3(static_cast<double>(delta) / static_cast<double>(base)));
}

std::string kinds_text(const OneTime& t) {
  std::string out;
  for (const auto& k : t.kinds) out += (out.empty() ? "" : ", ") + k;
  return out;
}

Row optional_ns(const std::optional<uint64_t>& ns) {
  return ns ? Row(*ns) : Row(nullptr);
}

Row delta_row(const Delta& d) {
  const auto sa = d.a.steady(), sb = d.b.steady();
  const bool both = sa && sb;
  const int64_t steady_delta = both ? minus(*sb, *sa) : 0;
  return {{"calls_a", d.a.calls},
          {"calls_b", d.b.calls},
          {"calls_delta", d.calls_delta()},
          {"calls_rel", rel(d.calls_delta(), d.a.calls)},
          {"total_ns_a", d.a.ns},
          {"total_ns_b", d.b.ns},
          {"total_ns_delta", d.ns_delta()},
          {"total_ns_rel", rel(d.ns_delta(), d.a.ns)},
          {"steady_ns_a", optional_ns(sa)},
          {"steady_ns_b", optional_ns(sb)},
          {"steady_ns_delta", both ? Row(steady_delta) : Row(nullptr)},
          {"steady_ns_rel", both ? rel(steady_delta, *sa) : Row(nullptr)},
          {"one_time_calls_a", d.a.one_time.calls},
          {"one_time_calls_b", d.b.one_time.calls},
          {"one_time_ns_a", d.a.one_time.ns},
          {"one_time_ns_b", d.b.one_time.ns},
          {"one_time_a", kinds_text(d.a.one_time)},
          {"one_time_b", kinds_text(d.b.one_time)}};
}

Row key_row(const OpRow& r) {
  return {{"api", r.api},           {"symbol", r.symbol},       {"op", r.key.op},
          {"dtype", r.key.dtype},   {"shape", r.key.shape},     {"backend_a", r.backend_a},
          {"backend_b", r.backend_b}};
}

Row key_row(const SiteRow& r) {
  return site_identity(r.key, r.what);
}

template <typename Key>
Row row(const Key& k, const Delta& d) {
  Row r = key_row(k);
  r.update(delta_row(d));
  return r;
}

// "native", or "native -> opencl" when it changed.
std::string backend_text(const OpRow& r) {
  if (r.backend_a.empty()) return r.backend_b;
  if (r.backend_b.empty() || r.backend_b == r.backend_a) return r.backend_a;
  return r.backend_a + " -> " + r.backend_b;
}
std::vector<std::string> text_key(const OpRow& r, const SiteLabels&) {
  return {r.api, r.symbol, r.key.op, r.key.dtype, backend_text(r), r.key.shape};
}
std::vector<std::string> text_key(const SiteRow& r, const SiteLabels&) {
  return {site_op_text(site_identity(r.key, r.what))};
}
// What goes under a row: a site's label.
std::string text_below(const OpRow&, const SiteLabels&) {
  return {};
}
std::string text_below(const SiteRow& r, const SiteLabels& labels) {
  return labels.at(r.key);
}
std::vector<std::string> text_key_header(const OpRow&) {
  return {"api", "symbol", "op", "dtype", "backend", "shape"};
}
std::vector<std::string> text_key_header(const SiteRow&) {
  return {kSiteHeader};
}

std::string rel_text(int64_t delta, uint64_t base) {
  return base == 0 ? "new"
                   : human_percent(100.0 * static_cast<double>(delta) / static_cast<double>(base), true);
}

// "B 52.28 ms kernel compile": the calls that did one-time work, on each side, with their time.
std::string one_time_text(const Delta& d) {
  std::string out;
  for (const auto& [name, side] : {std::pair{"A", &d.a}, {"B", &d.b}}) {
    const OneTime& t = side->one_time;
    if (t.calls == 0) continue;
    out += (out.empty() ? "" : "; ") + std::string(name) + " " + human_ns(t.ns) + " " + kinds_text(t);
    if (t.calls > 1) out += " (" + std::to_string(t.calls) + " calls)";
  }
  return out;
}

// What the text sections showed, for the footnotes.
struct Marks {
  bool one_time = false, no_steady = false;
};

template <typename Key>
void print_section(const char* title, const std::vector<std::pair<Key, Delta>>& rows, bool common,
                   size_t limit, bool total, Marks& marks, const SiteLabels& labels = {}) {
  if (rows.empty()) {
    std::printf("\n%s: none\n", title);
    return;
  }
  const char* time = total ? "time" : "steady";
  std::printf("\n%s: %zu%s\n", title, rows.size(),
              common ? (total ? ", by |time delta|" : ", by |steady-state time delta|") : "");
  std::vector<std::string> header = common ? std::vector<std::string>{"calls A",
                                                                      "calls B",
                                                                      "delta",
                                                                      std::string(time) + " A",
                                                                      std::string(time) + " B",
                                                                      "delta",
                                                                      "rel",
                                                                      "one-time work"}
                                           : std::vector<std::string>{"calls", time, "one-time work"};
  const size_t numeric = header.size() - 1;
  for (auto& h : text_key_header(Key{})) header.push_back(h);
  std::vector<bool> left(header.size(), true);
  std::fill(left.begin(), left.begin() + numeric, false);
  TextTable t(header, left);
  for (size_t i = 0; i < rows.size() && i < limit; ++i) {
    const auto& [k, d] = rows[i];
    const std::optional<uint64_t> a = total ? d.a.ns : d.a.steady(), b = total ? d.b.ns : d.b.steady();
    const auto text = [](const std::optional<uint64_t>& ns) { return ns ? human_ns(*ns) : std::string("-"); };
    std::vector<std::string> cells;
    if (common)
      cells = {std::to_string(d.a.calls),
               std::to_string(d.b.calls),
               signed_count(d.calls_delta()),
               text(a),
               text(b),
               a && b ? signed_ns(minus(*b, *a)) : "-",
               a && b ? rel_text(minus(*b, *a), *a) : "-"};
    else if (d.a.calls > 0)
      cells = {std::to_string(d.a.calls), text(a)};
    else
      cells = {std::to_string(d.b.calls), text(b)};
    cells.push_back(one_time_text(d));
    marks.one_time |= !cells.back().empty();
    marks.no_steady |= !a || !b;
    for (auto& c : text_key(k, labels)) cells.push_back(c);
    t.add(cells, text_below(k, labels));
  }
  t.print(stdout);
  if (rows.size() > limit) std::printf("  (%zu more; --top N shows more)\n", rows.size() - limit);
}

void print_footnotes(const Marks& marks, bool total) {
  if (!marks.one_time) return;
  std::printf(
      "\none-time work: calls that also compiled or loaded a kernel, started a backend or measured auto's\n"
      "candidates, and their time. %s\n",
      total ? "The times above include it (--rank total)."
            : "Steady-state times count those calls at the others' mean\n(--rank total: as they were).");
  if (marks.no_steady && !total)
    std::printf("-: every call did such work: no steady-state time, ranked last.\n");
}

template <typename Key>
Row json_sections(const Sections<Key>& s, size_t limit) {
  Row out;
  for (const auto& [name, rows] :
       {std::pair{"only_a", &s.only_a}, {"only_b", &s.only_b}, {"common", &s.common}}) {
    out[name] = Row::array();
    for (size_t i = 0; i < rows->size() && i < limit; ++i)
      out[name].push_back(row((*rows)[i].first, (*rows)[i].second));
  }
  out["counts"] = {{"only_a", s.only_a.size()}, {"only_b", s.only_b.size()}, {"common", s.common.size()}};
  return out;
}

template <typename Key>
void csv_rows(const char* kind, const Sections<Key>& s, size_t limit, std::vector<Row>& out) {
  for (const auto& [side, rows] :
       {std::pair{"only_a", &s.only_a}, {"only_b", &s.only_b}, {"common", &s.common}}) {
    for (size_t i = 0; i < rows->size() && i < limit; ++i) {
      Row r = {{"kind", kind}, {"side", side}};
      r.update(row((*rows)[i].first, (*rows)[i].second));
      out.push_back(std::move(r));
    }
  }
}

}  // namespace

int cmd_diff(const DiffOptions& o) {
  std::string error;
  auto a = load_survey(o.a, error);
  if (!a) return fail(2, error);
  auto b = load_survey(o.b, error);
  if (!b) return fail(2, error);
  print_warnings(*a);
  print_warnings(*b);
  if (!o.setup) {
    const uint64_t in_a = drop_setup(*a), in_b = drop_setup(*b);
    if (in_a + in_b > 0)
      std::fprintf(stderr, "sol: note: set-up calls are not shown (A: %llu, B: %llu; --setup shows them)\n",
                   static_cast<unsigned long long>(in_a), static_cast<unsigned long long>(in_b));
  }

  const std::string measuring_a = measuring_note(*a, o.with_measuring),
                    measuring_b = measuring_note(*b, o.with_measuring);
  if (o.with_measuring) {
    count_measuring_in(*a);
    count_measuring_in(*b);
  }
  const Sections<OpRow> ops = compare(ops_of(*a, o.across_apis), ops_of(*b, o.across_apis), o.rank_total);
  const Sections<SiteRow> sites =
      compare(sites_of(*a, o.across_apis), sites_of(*b, o.across_apis), o.rank_total);
  const Delta totals{{a->calls(), a->traced_ns(), {}}, {b->calls(), b->traced_ns(), {}}};
  const size_t limit = o.limit();

  if (o.format == Format::text) {
    std::printf("sol diff:\n  A: %s: %s\n  B: %s: %s\n", a->path.c_str(), survey_line(*a).c_str(),
                b->path.c_str(), survey_line(*b).c_str());
    std::printf("  calls %llu -> %llu (%s, %s), traced %s -> %s (%s, %s)\n",
                static_cast<unsigned long long>(totals.a.calls),
                static_cast<unsigned long long>(totals.b.calls), signed_count(totals.calls_delta()).c_str(),
                rel_text(totals.calls_delta(), totals.a.calls).c_str(), human_ns(totals.a.ns).c_str(),
                human_ns(totals.b.ns).c_str(), signed_ns(totals.ns_delta()).c_str(),
                rel_text(totals.ns_delta(), totals.a.ns).c_str());
    if (!measuring_a.empty()) std::printf("  A: %s\n", measuring_a.c_str());
    if (!measuring_b.empty()) std::printf("  B: %s\n", measuring_b.c_str());
    Marks marks;
    print_section("Op signatures only in A", ops.only_a, false, limit, o.rank_total, marks);
    print_section("Op signatures only in B", ops.only_b, false, limit, o.rank_total, marks);
    std::vector<SiteKey> keys;
    for (const auto* section : {&sites.only_a, &sites.only_b, &sites.common})
      for (const auto& [k, d] : *section) keys.push_back(k.key);
    const SiteLabels labels = site_labels(keys);
    print_section("Call sites only in A", sites.only_a, false, limit, o.rank_total, marks, labels);
    print_section("Call sites only in B", sites.only_b, false, limit, o.rank_total, marks, labels);
    print_section("Op signatures in both", ops.common, true, limit, o.rank_total, marks);
    print_section("Call sites in both", sites.common, true, limit, o.rank_total, marks, labels);
    print_footnotes(marks, o.rank_total);
  } else if (o.format == Format::json) {
    const Row doc = {{"format", "sol-diff/2"},
                     {"across_apis", o.across_apis},
                     {"rank", o.rank_total ? "total" : "steady"},
                     {"a", survey_totals(*a)},
                     {"b", survey_totals(*b)},
                     {"totals", delta_row(totals)},
                     {"ops", json_sections(ops, limit)},
                     {"sites", json_sections(sites, limit)}};
    std::printf("%s\n", doc.dump(2).c_str());
  } else {
    std::vector<std::string> columns = {"kind", "side"};
    for (const auto& c : columns_of(key_row(OpRow{}))) columns.push_back(c);
    columns.push_back("frames");
    for (const auto& c : columns_of(delta_row({}))) columns.push_back(c);
    std::vector<Row> rows;
    csv_rows("op", ops, limit, rows);
    csv_rows("site", sites, limit, rows);
    write_csv(stdout, columns, rows);
  }
  return 0;
}

}  // namespace sol::tools
