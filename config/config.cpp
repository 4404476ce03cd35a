#include "config/config.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "common/fs_safety.hpp"
#include "config/toml_file.hpp"

extern char** environ;

namespace sol::config {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::vector<std::string> backend_names() {
  return {std::begin(kBackendNames), std::end(kBackendNames)};
}

std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates) {
  std::string n = nearest(word, candidates);
  return n.empty() ? std::string() : " (did you mean '" + n + "'?)";
}

// ---- parsing one value from text, per kind. Each returns "" or the problem.

std::string parse(std::string_view text, bool& out, const KeyInfo&) {
  const std::string t = lower(trim(text));
  if (t == "1" || t == "true" || t == "yes" || t == "on") {
    out = true;
  } else if (t == "0" || t == "false" || t == "no" || t == "off") {
    out = false;
  } else {
    return "is not a boolean (use 0 or 1)";
  }
  return {};
}

std::string parse(std::string_view text, int64_t& out, const KeyInfo& k) {
  const std::string t(trim(text));
  if (t.empty()) return "is empty, expected a number";
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(t.c_str(), &end, 10);
  if (*end != '\0') return "is not a number";
  if (errno == ERANGE || v < k.min || v > k.max)
    return "is out of range " + std::to_string(k.min) + ".." + std::to_string(k.max);
  out = v;
  return {};
}

std::string parse_string(std::string_view text, std::string& out, const KeyInfo& k) {
  if (k.kind == Kind::path) {
    std::string_view t = trim(text);
    if (t.empty()) {
      if (*k.def) return "is empty, expected a path";
      out.clear();  // a path whose default is empty is optional: empty means none
      return {};
    }
    if (t == "~" || t.substr(0, 2) == "~/") {
      const char* home = std::getenv("HOME");
      if (!home || !*home) return "starts with ~ but HOME is not set";
      out = std::string(home) + std::string(t.substr(1));
      return {};
    }
    out = std::string(t);
    return {};
  }
  out = std::string(text);
  return {};
}

std::string parse(std::string_view text, std::string& out, const KeyInfo& k) {
  if (k.kind != Kind::choice) return parse_string(text, out, k);
  const std::vector<std::string> words = choices(k);
  const std::string t = lower(trim(text));
  if (std::find(words.begin(), words.end(), t) != words.end()) {
    out = t;
    return {};
  }
  std::string list;
  for (const auto& w : words) list += (list.empty() ? "" : ", ") + w;
  return "is not one of " + list + did_you_mean(t, words);
}

std::string parse(std::string_view text, log::Level& out, const KeyInfo&) {
  static const std::vector<std::string> names = {"error", "warn", "info", "debug"};
  const std::string t = lower(trim(text));
  for (size_t i = 0; i < names.size(); ++i) {
    if (t == names[i]) {
      out = static_cast<log::Level>(i);
      return {};
    }
  }
  return "is not a log level (error, warn, info, debug)" + did_you_mean(t, names);
}

std::string parse(std::string_view text, std::vector<std::string>& out, const KeyInfo&) {
  const auto known = backend_names();
  std::vector<std::string> list;
  std::string bad;  // the first problem; every unknown name is dropped
  int dropped = 0;
  std::string_view rest = text;
  while (true) {
    const size_t comma = rest.find(',');
    const std::string name = lower(trim(rest.substr(0, comma)));
    if (name.empty()) {
      if (bad.empty()) bad = "has an empty backend name";
      ++dropped;
    } else if (std::find(known.begin(), known.end(), name) == known.end()) {
      if (bad.empty())
        bad = "names an unknown backend '" + name + "'" + did_you_mean(name, known) +
              "; known: " + backend_names_text();
      ++dropped;
    } else if (std::find(list.begin(), list.end(), name) == list.end()) {
      list.push_back(name);
    }
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  if (!bad.empty() && list.empty()) return bad;  // nothing usable: the key keeps its value
  out = std::move(list);
  if (bad.empty()) return {};
  // A typo in one entry of a list costs that entry, not the list.
  return std::string(kPartly) + bad + (dropped > 1 ? " (and " + std::to_string(dropped - 1) + " more)" : "");
}

// "abc" for a string value, 32 for an integer: how the value reads in TOML.
std::string quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string format(bool v) {
  return v ? "true" : "false";
}
std::string format(int64_t v) {
  return std::to_string(v);
}
std::string format(const std::string& v) {
  return quote(v);
}
std::string format(log::Level v) {
  static const char* names[] = {"error", "warn", "info", "debug"};
  return quote(names[static_cast<int>(v)]);
}
std::string format(const std::vector<std::string>& v) {
  std::string joined;
  for (const auto& s : v) joined += (joined.empty() ? "" : ",") + s;
  return quote(joined);
}

void set_defaults(Config& cfg) {
#define SOL_KEY(field, toml, env, kind, trust, def, min, max, help)                      \
  {                                                                                      \
    const KeyInfo& k = info(Key::field);                                                 \
    std::string problem = parse(default_text(k), cfg.field, k);                          \
    (void)problem; /* defaults are valid: tested by config_test's EveryDefaultIsValid */ \
  }
#include "config/keys.def"
#undef SOL_KEY
}

// Where the configuration file is, whether it was named explicitly (then it must exist), and
// whether it may set trusted keys.
struct FileChoice {
  std::string path;
  bool explicit_ = false;
  bool trusted = false;
  std::string how_to_trust;  // for ./sol.toml
};

FileChoice choose_file(const Config& cfg, const Environment& env) {
  if (!cfg.config.empty()) return {cfg.config, true, true, {}};
  // The user's own file: $XDG_CONFIG_HOME/sol/sol.toml, else ~/.config/sol/sol.toml.
  std::string user, user_hint = "~/.config/sol/sol.toml";
  const char* xdg = env.get("XDG_CONFIG_HOME");
  const char* home = env.get("HOME");
  struct stat mine;
  if (xdg && *xdg) {
    user_hint = std::string(xdg) + "/sol/sol.toml";
    if (::stat(user_hint.c_str(), &mine) == 0) user = user_hint;
  }
  if (user.empty() && home && *home) {
    const std::string p = std::string(home) + "/.config/sol/sol.toml";
    if (::stat(p.c_str(), &mine) == 0) user = p;
  }
  struct stat here;
  if (::stat("sol.toml", &here) == 0) {
    // A repository, an archive or a shared folder may carry a sol.toml: it must not make SOL load
    // code (CWE-426). The user's own file, reached from its own directory, is still the user's.
    const bool same = !user.empty() && here.st_dev == mine.st_dev && here.st_ino == mine.st_ino;
    return {"sol.toml", false, same, "trust it with SOL_CONFIG=./sol.toml or move it to " + user_hint};
  }
  if (!user.empty()) return {user, false, true, {}};
  return {};
}

}  // namespace

std::string backend_names_text() {
  std::string out;
  for (const char* b : kBackendNames) out += (out.empty() ? "" : ", ") + std::string(b);
  return out;
}

const char* kind_name(Kind kind) noexcept {
  switch (kind) {
    case Kind::boolean: return "boolean";
    case Kind::integer: return "integer";
    case Kind::string: return "string";
    case Kind::path: return "path";
    case Kind::log_level: return "log level";
    case Kind::backend_list: return "backend list";
    case Kind::choice: return "choice";
  }
  return "?";
}

std::vector<std::string> choices(const KeyInfo& k) {
  std::vector<std::string> words;
  if (k.kind != Kind::choice) return words;
  std::string_view rest = k.def;
  while (true) {
    const size_t bar = rest.find('|');
    words.emplace_back(rest.substr(0, bar));
    if (bar == std::string_view::npos) break;
    rest.remove_prefix(bar + 1);
  }
  return words;
}

std::string default_text(const KeyInfo& k) {
  return k.kind == Kind::choice ? choices(k).front() : std::string(k.def);
}

std::string nearest(std::string_view word, const std::vector<std::string>& candidates) {
  // Levenshtein distance, accepted when small relative to the word: one typo in a short name,
  // a few in a long one.
  auto distance = [](std::string_view a, std::string_view b) {
    std::vector<size_t> row(b.size() + 1);
    for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
    for (size_t i = 1; i <= a.size(); ++i) {
      size_t diag = row[0];
      row[0] = i;
      for (size_t j = 1; j <= b.size(); ++j) {
        const size_t up = row[j];
        row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
        diag = up;
      }
    }
    return row[b.size()];
  };
  std::string best;
  size_t best_d = std::max<size_t>(2, word.size() / 3) + 1;
  for (const auto& c : candidates) {
    const size_t d = distance(lower(word), lower(c));
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  return best;
}

std::string check_route(const RouteRule& rule) {
  static const std::vector<std::string> ops = [] {
    std::vector<std::string> v = {"*", "blas1", "blas2", "blas3", "dnn", "dnnl"};
#define SOL_OP(name, family) v.push_back(#name);
#include "ir/ops.def"
#undef SOL_OP
    return v;
  }();
  static const std::vector<std::string> dtypes = {"*", "f32", "f64", "c64", "c128"};
  auto known = [](const std::vector<std::string>& v, const std::string& x) {
    return std::find(v.begin(), v.end(), x) != v.end();
  };
  if (rule.backend.empty()) return "route.backend is missing";
  std::vector<std::string> backends;
  for (const char* b : kBackendNames)
    if (std::string(b) != "auto") backends.emplace_back(b);
  if (!known(backends, rule.backend))
    return "route.backend = '" + rule.backend + "' is not a backend" + did_you_mean(rule.backend, backends);
  if (!known(ops, rule.op))
    return "route.op = '" + rule.op + "' is not an operation or family" + did_you_mean(rule.op, ops);
  if (!known(dtypes, rule.dtype))
    return "route.dtype = '" + rule.dtype + "' is not f32, f64, c64, c128 or *" +
           did_you_mean(rule.dtype, dtypes);
  if (rule.min_flops > rule.max_flops) return "route.min_flops is larger than route.max_flops";
  return {};
}

std::string set_from_text(Config& cfg, Key key, std::string_view text) {
  switch (key) {
#define SOL_KEY(field, toml, env, kind, trust, def, min, max, help) \
  case Key::field:                                                  \
    return parse(text, cfg.field, info(Key::field));
#include "config/keys.def"
#undef SOL_KEY
  }
  return "unknown key";
}

std::string format_value(const Config& cfg, Key key) {
  switch (key) {
#define SOL_KEY(field, toml, env, kind, trust, def, min, max, help) \
  case Key::field:                                                  \
    return format(cfg.field);
#include "config/keys.def"
#undef SOL_KEY
  }
  return {};
}

Environment Environment::process() {
  Environment e;
  e.secure = fs_safety::secure_execution();
  e.get = [](const char* name) -> const char* { return ::secure_getenv(name); };
  if (e.secure) return e;
  for (char** p = environ; p && *p; ++p) {
    if (std::strncmp(*p, "SOL_", 4) != 0) continue;
    const char* eq = std::strchr(*p, '=');
    e.sol_names.emplace_back(*p, eq ? static_cast<size_t>(eq - *p) : std::strlen(*p));
  }
  return e;
}

Config load(const Environment& env) {
  Config cfg;
  set_defaults(cfg);

  // A set-user-ID program's environment is its caller's: SOL_CONFIG or a library path from there
  // would run the caller's code with the program's privileges. libsol stays a passthrough.
  if (env.secure) {
    cfg.disable = true;
    cfg.source[static_cast<size_t>(Key::disable)] = {Source::secure_execution, "AT_SECURE", false};
    return cfg;
  }

  // SOL_DISABLE=1 makes libsol inert: nothing else is read, nothing is reported.
  if (const char* d = env.get("SOL_DISABLE")) {
    bool off = false;
    if (parse(d, off, info(Key::disable)).empty() && off) {
      cfg.disable = true;
      cfg.source[static_cast<size_t>(Key::disable)] = {Source::env, "SOL_DISABLE", true};
      return cfg;
    }
  }

  // Environment values are applied after the file, but SOL_CONFIG decides which file is read.
  auto apply_env = [&](Key key) {
    const KeyInfo& k = info(key);
    if (!*k.env) return;
    const char* v = env.get(k.env);
    if (!v) return;
    Config trial = cfg;
    std::string problem = set_from_text(trial, key, v);
    if (taken_partly(problem)) {
      cfg = std::move(trial);
      cfg.source[static_cast<size_t>(key)] = {Source::env, k.env, true};
      cfg.problems.push_back(std::string(k.env) + "='" + v + "' " + problem.substr(kPartly.size()) + "; using " +
                             format_value(cfg, key));
      return;
    }
    if (!problem.empty()) {
      cfg.not_taken[static_cast<size_t>(key)] = std::string(k.env) + "='" + v + "' " + problem;
      cfg.problems.push_back(std::string(k.env) + "='" + v + "' " + problem + "; using " +
                             format_value(cfg, key) + " instead");
      return;
    }
    cfg = std::move(trial);
    cfg.source[static_cast<size_t>(key)] = {Source::env, k.env, true};
  };
  apply_env(Key::config);

  const FileChoice file = choose_file(cfg, env);
  // A missing file is reported by read_file below, in the words it always had.
  const std::string unsafe = file.path.empty() ? std::string() : fs_safety::untrusted_reason(file.path, true);
  if (!unsafe.empty()) {
    cfg.file_note = file.path + " not read: " + unsafe;
    cfg.problems.push_back("config file " + file.path + " is not used: " + unsafe +
                           " (only you or root may be able to change it); using defaults");
  } else if (!file.path.empty()) {
    std::string text, error;
    if (read_file(file.path, text, error)) {
      cfg.file = file.path;
      cfg.file_trusted = file.trusted;
      if (!file.trusted)
        cfg.file_note = "in the current directory: trusted keys are not taken from it; " + file.how_to_trust;
      load_toml(cfg, file.path, text, file.trusted ? std::string() : file.how_to_trust);
    } else if (file.explicit_ || error.find("No such file") == std::string::npos) {
      cfg.problems.push_back("cannot read config file " + file.path + ": " + error + "; using defaults");
    }
  }

  for (size_t i = 0; i < kNumKeys; ++i) apply_env(static_cast<Key>(i));

  // Asking where traces go without asking for traces: most likely a forgotten SOL_TRACE=1.
  if (!cfg.trace && cfg.source[static_cast<size_t>(Key::trace_dir)].kind == Source::env &&
      cfg.source[static_cast<size_t>(Key::trace)].kind == Source::by_default)
    cfg.problems.push_back("SOL_TRACE_DIR is set but tracing is off (SOL_TRACE=1 turns it on); nothing is traced");

  // A misspelt variable would otherwise be silently ignored.
  std::vector<std::string> env_names;
  for (const auto& k : kKeys)
    if (*k.env) env_names.emplace_back(k.env);
  for (const auto& name : env.sol_names) {
    if (std::find(env_names.begin(), env_names.end(), name) != env_names.end()) continue;
    // SOL_TEST_*: switches the test suite sets for one backend (a planted wrong kernel), not
    // configuration.
    if (name.rfind("SOL_TEST_", 0) == 0) continue;
    cfg.problems.push_back("unknown environment variable " + name + did_you_mean(name, env_names) +
                           "; ignored");
  }
  return cfg;
}

std::string cache_dir(const Config& cfg) {
  if (!cfg.tune_dir.empty()) return cfg.tune_dir;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && x[0] == '/') return std::string(x) + "/sol";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/sol";
  return "";
}

}  // namespace sol::config
