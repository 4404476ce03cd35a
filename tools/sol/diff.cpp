// sol diff A B [--across-apis] [--top N] [--format text|json|csv]
//
// What two surveys (each a trace directory or a summary file) do differently: the op signatures
// and the call sites found in only one of them, and for those in both the change in calls and
// time. Sections: only in A and only in B sorted by their time, longest first; common ones by
// |time delta|, largest first. --top N keeps N rows per section (default: 20 in text, all in
// json and csv).
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
//   {"format": "sol-diff/2", "across_apis": bool,
//    "a": <input>, "b": <input>          (the "input" object of sol report's JSON),
//    "totals": <deltas>                  (calls and traced time of the whole surveys),
//    "ops":   {"only_a": [op row], "only_b": [op row], "common": [op row],
//              "counts": {"only_a": n, "only_b": n, "common": n}}     (counts before --top),
//    "sites": {"only_a": [site row], ... the same}}
//   op row:   api, symbol, op, dtype, shape, backend_a, backend_b, <deltas>
//   site row: symbol, frames ([str], innermost first), <deltas>
//   <deltas>: calls_a, calls_b, calls_delta (b - a), calls_rel (delta / a, null when a is 0),
//             total_ns_a, total_ns_b, total_ns_delta, total_ns_rel (the same for time)
//   Rows only in A have the B values 0 (rel -1); rows only in B have the A values 0 (rel null).
//   (sol-diff/1 had one "backend", part of the match: a change of backend was two rows.)
// CSV (--format csv): one table, header
//   kind,side,api,symbol,op,dtype,shape,backend_a,backend_b,frames,calls_a,calls_b,calls_delta,
//   calls_rel,total_ns_a,total_ns_b,total_ns_delta,total_ns_rel
// kind is "op" or "site", side "only_a", "only_b" or "common"; fields a kind does not have are
// empty; frames are joined by ";"; rel fields are floats rounded to three decimals, empty for null.
//
// Exit status: 0 whether or not the surveys differ; 2 for a bad option or an unusable input (as
// for sol report).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <utility>

#include "tools/sol/commands.hpp"
#include "tools/sol/output.hpp"
#include "tools/sol/survey.hpp"

namespace sol::tools {
namespace {

struct Delta {
  uint64_t calls_a = 0, calls_b = 0, ns_a = 0, ns_b = 0;
  int64_t calls_delta() const { return static_cast<int64_t>(calls_b) - static_cast<int64_t>(calls_a); }
  int64_t ns_delta() const { return static_cast<int64_t>(ns_b) - static_cast<int64_t>(ns_a); }
};

// What a row of the diff is matched by, and what it shows besides.
struct OpMatch {
  std::string api, symbol, op, dtype, shape;  // api and symbol empty with --across-apis
  auto operator<=>(const OpMatch&) const = default;
};
struct Seen {
  uint64_t calls = 0, total_ns = 0;
  std::set<std::string> apis, symbols, backends;
};
struct OpRow {
  OpMatch key;
  std::string api, symbol, backend_a, backend_b;  // "+"-joined sets
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
    e.calls += st.calls;
    e.total_ns += st.total_ns;
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
    e.calls += st.calls;
    e.total_ns += st.total_ns;
    e.symbols.insert(k.symbol);
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
SiteKey row_of(const SiteKey& k, const Seen* a, const Seen* b) {
  std::set<std::string> symbols;
  for (const Seen* s : {a, b})
    if (s) symbols.insert(s->symbols.begin(), s->symbols.end());
  return {joined(symbols), k.frames};
}

template <typename Key>
struct Sections {
  std::vector<std::pair<Key, Delta>> only_a, only_b, common;
};

template <typename Match>
auto compare(const std::map<Match, Seen>& a, const std::map<Match, Seen>& b) {
  using Row = decltype(row_of(std::declval<Match>(), nullptr, nullptr));
  Sections<Row> out;
  for (const auto& [k, s] : a) {
    const auto it = b.find(k);
    if (it == b.end())
      out.only_a.push_back({row_of(k, &s, nullptr), {s.calls, 0, s.total_ns, 0}});
    else
      out.common.push_back({row_of(k, &s, &it->second), {s.calls, it->second.calls, s.total_ns, it->second.total_ns}});
  }
  for (const auto& [k, s] : b)
    if (!a.count(k)) out.only_b.push_back({row_of(k, nullptr, &s), {0, s.calls, 0, s.total_ns}});
  const auto by = [](auto value) {
    return [value](const auto& x, const auto& y) { return value(x.second) > value(y.second); };
  };
  std::stable_sort(out.only_a.begin(), out.only_a.end(), by([](const Delta& d) { return d.ns_a; }));
  std::stable_sort(out.only_b.begin(), out.only_b.end(), by([](const Delta& d) { return d.ns_b; }));
  std::stable_sort(out.common.begin(), out.common.end(), by([](const Delta& d) {
                     return std::make_pair(std::llabs(d.ns_delta()), std::llabs(d.calls_delta()));
                   }));
  return out;
}

Row rel(int64_t delta, uint64_t base) {
  return base == 0 ? Row(nullptr) : Row(round3(static_cast<double>(delta) / static_cast<double>(base)));
}

Row delta_row(const Delta& d) {
  return {{"calls_a", d.calls_a},           {"calls_b", d.calls_b},
          {"calls_delta", d.calls_delta()}, {"calls_rel", rel(d.calls_delta(), d.calls_a)},
          {"total_ns_a", d.ns_a},           {"total_ns_b", d.ns_b},
          {"total_ns_delta", d.ns_delta()}, {"total_ns_rel", rel(d.ns_delta(), d.ns_a)}};
}

Row key_row(const OpRow& r) {
  return {{"api", r.api},           {"symbol", r.symbol},       {"op", r.key.op},
          {"dtype", r.key.dtype},   {"shape", r.key.shape},     {"backend_a", r.backend_a},
          {"backend_b", r.backend_b}};
}

Row key_row(const SiteKey& k) {
  return {{"symbol", k.symbol}, {"frames", k.frames}};
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
std::vector<std::string> text_key(const SiteKey& k, const SiteLabels& labels) {
  return {labels.at(k)};
}
std::vector<std::string> text_key_header(const OpRow&) {
  return {"api", "symbol", "op", "dtype", "backend", "shape"};
}
std::vector<std::string> text_key_header(const SiteKey&) {
  return {"site (symbol < innermost frames)"};
}

std::string rel_text(int64_t delta, uint64_t base) {
  return base == 0 ? "new"
                   : human_percent(100.0 * static_cast<double>(delta) / static_cast<double>(base), true);
}

template <typename Key>
void print_section(const char* title, const std::vector<std::pair<Key, Delta>>& rows, bool common,
                   size_t limit, const SiteLabels& labels = {}) {
  if (rows.empty()) {
    std::printf("\n%s: none\n", title);
    return;
  }
  std::printf("\n%s: %zu%s\n", title, rows.size(), common ? ", by |time delta|" : "");
  std::vector<std::string> header =
      common ? std::vector<std::string>{"calls A", "calls B", "delta", "time A", "time B", "delta", "rel"}
             : std::vector<std::string>{"calls", "total"};
  const size_t numeric = header.size();
  for (auto& h : text_key_header(Key{})) header.push_back(h);
  std::vector<bool> left(header.size(), true);
  std::fill(left.begin(), left.begin() + numeric, false);
  TextTable t(header, left);
  for (size_t i = 0; i < rows.size() && i < limit; ++i) {
    const auto& [k, d] = rows[i];
    std::vector<std::string> cells;
    if (common)
      cells = {std::to_string(d.calls_a),
               std::to_string(d.calls_b),
               signed_count(d.calls_delta()),
               human_ns(d.ns_a),
               human_ns(d.ns_b),
               signed_ns(d.ns_delta()),
               rel_text(d.ns_delta(), d.ns_a)};
    else if (d.calls_a > 0)
      cells = {std::to_string(d.calls_a), human_ns(d.ns_a)};
    else
      cells = {std::to_string(d.calls_b), human_ns(d.ns_b)};
    for (auto& c : text_key(k, labels)) cells.push_back(c);
    t.add(cells);
  }
  t.print(stdout);
  if (rows.size() > limit) std::printf("  (%zu more; --top N shows more)\n", rows.size() - limit);
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
  const auto a = load_survey(o.a, error);
  if (!a) return fail(2, error);
  const auto b = load_survey(o.b, error);
  if (!b) return fail(2, error);
  print_warnings(*a);
  print_warnings(*b);

  const Sections<OpRow> ops = compare(ops_of(*a, o.across_apis), ops_of(*b, o.across_apis));
  const Sections<SiteKey> sites = compare(sites_of(*a, o.across_apis), sites_of(*b, o.across_apis));
  const Delta totals{a->calls(), b->calls(), a->traced_ns(), b->traced_ns()};
  const size_t limit = o.limit();

  if (o.format == Format::text) {
    std::printf("sol diff:\n  A: %s: %s\n  B: %s: %s\n", a->path.c_str(), survey_line(*a).c_str(),
                b->path.c_str(), survey_line(*b).c_str());
    std::printf("  calls %llu -> %llu (%s, %s), traced %s -> %s (%s, %s)\n",
                static_cast<unsigned long long>(totals.calls_a),
                static_cast<unsigned long long>(totals.calls_b), signed_count(totals.calls_delta()).c_str(),
                rel_text(totals.calls_delta(), totals.calls_a).c_str(), human_ns(totals.ns_a).c_str(),
                human_ns(totals.ns_b).c_str(), signed_ns(totals.ns_delta()).c_str(),
                rel_text(totals.ns_delta(), totals.ns_a).c_str());
    print_section("Op signatures only in A", ops.only_a, false, limit);
    print_section("Op signatures only in B", ops.only_b, false, limit);
    std::vector<SiteKey> keys;
    for (const auto* section : {&sites.only_a, &sites.only_b, &sites.common})
      for (const auto& [k, d] : *section) keys.push_back(k);
    const SiteLabels labels = site_labels(keys);
    print_section("Call sites only in A", sites.only_a, false, limit, labels);
    print_section("Call sites only in B", sites.only_b, false, limit, labels);
    print_section("Op signatures in both", ops.common, true, limit);
    print_section("Call sites in both", sites.common, true, limit, labels);
  } else if (o.format == Format::json) {
    const Row doc = {{"format", "sol-diff/2"},           {"across_apis", o.across_apis}, {"a", survey_totals(*a)},
                     {"b", survey_totals(*b)},           {"totals", delta_row(totals)},
                     {"ops", json_sections(ops, limit)}, {"sites", json_sections(sites, limit)}};
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
