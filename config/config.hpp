// SOL's configuration: defaults, then the TOML file, then the environment.
//
// Loading never fails: a bad value is reported (one line naming the key or file and the problem)
// and that key keeps its default. SOL_STRICT=1 turns reported problems into an exit.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/log.hpp"

namespace sol::config {

// choice: one word of a fixed set, which the default spells as "first|second|...": the first is
// the default.
enum class Kind : uint8_t { boolean, integer, string, path, log_level, backend_list, choice };

// Where a key may come from (keys.def explains the column).
enum class Trust : uint8_t { any, trusted };

struct KeyInfo {
  const char* field;
  const char* toml;  // "" when environment-only
  const char* env;   // "" when file-only
  Kind kind;
  Trust trust;
  const char* def;
  int64_t min, max;
  const char* help;
};

enum class Key : uint8_t {
#define SOL_KEY(field, toml, env, kind, trust, def, min, max, help) field,
#include "config/keys.def"
#undef SOL_KEY
};

inline constexpr KeyInfo kKeys[] = {
#define SOL_KEY(field, toml, env, kind, trust, def, min, max, help) \
  {#field, toml, env, Kind::kind, Trust::trust, def, min, max, help},
#include "config/keys.def"
#undef SOL_KEY
};
inline constexpr size_t kNumKeys = sizeof kKeys / sizeof kKeys[0];
inline const KeyInfo& info(Key k) {
  return kKeys[static_cast<size_t>(k)];
}

const char* kind_name(Kind kind) noexcept;
// The words a choice key takes (its default first); empty for other kinds.
std::vector<std::string> choices(const KeyInfo& k);
// The default as a value of the key: a choice's first word, else the default text.
std::string default_text(const KeyInfo& k);

// The backend names a backend_list may hold, in documentation order: auto, native, then the
// backends SOL is built with, from their one list. Every message, --help and `sol backends` use it.
inline constexpr const char* kBackendNames[] = {
    "auto",
    "native",
#define SOL_BACKEND(name) #name,
#include "backends/registry.def"
#undef SOL_BACKEND
};
// "auto, native, reference, ...": the list as messages and help texts show it.
std::string backend_names_text();

template <Kind K>
struct CType;
template <>
struct CType<Kind::boolean> {
  using type = bool;
};
template <>
struct CType<Kind::integer> {
  using type = int64_t;
};
template <>
struct CType<Kind::string> {
  using type = std::string;
};
template <>
struct CType<Kind::path> {
  using type = std::string;
};
template <>
struct CType<Kind::choice> {
  using type = std::string;
};
template <>
struct CType<Kind::log_level> {
  using type = log::Level;
};
template <>
struct CType<Kind::backend_list> {
  using type = std::vector<std::string>;
};

// Where a value came from. secure_execution: the process runs set-user-ID or with capabilities
// (AT_SECURE), where SOL reads nothing and `disable` is true.
struct Source {
  enum Kind : uint8_t { by_default, file, env, secure_execution } kind = by_default;
  std::string where;     // "path:line:column" for the file, the variable's name for env
  bool trusted = false;  // for file: it was named explicitly or is the user's own config file
};

// A [[route]] table: nodes matching op, dtype and the flops range go to `backend` first.
struct RouteRule {
  std::string op = "*";     // an operation (gemm), a family (blas1, blas2, blas3) or "*"
  std::string dtype = "*";  // f32, f64, c64, c128 or "*"
  std::string backend;      // any name SOL_BACKEND accepts but auto
  double min_flops = 0;
  double max_flops = 1e300;
  std::string where;  // file:line:column of the table
};

struct Config {
#define SOL_KEY(field, toml, env, kind, trust, def, min, max, help) CType<Kind::kind>::type field{};
#include "config/keys.def"
#undef SOL_KEY

  std::vector<RouteRule> routes;  // in file order; the first that matches a node wins

  std::array<Source, kNumKeys> source;
  // Why a value given for a key was not taken ("" when none was refused), for `sol config`.
  std::array<std::string, kNumKeys> not_taken;
  std::string file;                   // the TOML file that was read; empty when none
  bool file_trusted = false;          // whether it may set trusted keys
  std::string file_note;              // why the file was not read, or why it is not trusted
  std::vector<std::string> problems;  // one message per problem, without the "sol: " prefix

  // Whether auto decides anywhere: in the preference list (`backend`) or as a [[route]]'s target.
  bool uses_auto() const noexcept {
    for (const auto& name : backend)
      if (name == "auto") return true;
    for (const auto& r : routes)
      if (r.backend == "auto") return true;
    return false;
  }
};

// What the loader reads from the process: environment lookup, the names of all SOL_* variables
// present, and the current directory / home for the file search. Tests substitute their own.
struct Environment {
  std::function<const char*(const char*)> get;
  std::vector<std::string> sol_names;
  // A secure-execution process (fs_safety::secure_execution()): its environment belongs to a less
  // privileged user, so nothing is read, not even SOL_DISABLE, and libsol is a passthrough.
  bool secure = false;

  static Environment process();
};

Config load(const Environment& env);
inline Config load() {
  return load(Environment::process());
}

// Sets one key from text (as the environment would give it). Returns an empty string on
// success, else the problem. Exposed for `sol run`, which validates its options with it. A
// problem that starts with kPartly was taken all the same, without the parts it names (a backend
// list keeps its known names: "opencl,openblsa" is "opencl").
std::string set_from_text(Config& cfg, Key key, std::string_view text);
inline constexpr std::string_view kPartly = "partly: ";
inline bool taken_partly(std::string_view problem) {
  return problem.substr(0, kPartly.size()) == kPartly;
}

// The value of a key as TOML text: "auto", 32, true, "./sol-trace".
std::string format_value(const Config& cfg, Key key);

// The closest of `candidates` to `word` when it is close enough to be a likely typo, else "".
std::string nearest(std::string_view word, const std::vector<std::string>& candidates);

// The directory of SOL's per-machine caches (auto's profile, the device backends' measured costs):
// tune.dir, else $XDG_CACHE_HOME/sol, else ~/.cache/sol; "" when there is no home.
std::string cache_dir(const Config& cfg);

}  // namespace sol::config
