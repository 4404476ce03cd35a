// sol config: what libsol would read in this environment and directory.
#include <cstdio>
#include <string>

#include "config/config.hpp"
#include "tools/sol/commands.hpp"

namespace sol::tools {
namespace {

std::string source_text(const config::Source& s) {
  switch (s.kind) {
    case config::Source::by_default: return "default";
    case config::Source::env: return "environment " + s.where;
    case config::Source::file: return s.where;
    case config::Source::secure_execution:
      return "secure execution (set-user-ID or capabilities): nothing is read";
  }
  return {};
}

int print_keys() {
  for (const auto& k : config::kKeys) {
    std::string def = config::default_text(k);
    if (def.empty()) def = "(none)";
    if (k.kind == config::Kind::choice) def += "; one of " + std::string(k.def);
    if (k.trust == config::Trust::trusted) def += "; not from ./sol.toml (it loads code)";
    std::printf("%-16s %-18s %-13s default %s\n", *k.toml ? k.toml : "-", *k.env ? k.env : "-",
                config::kind_name(k.kind), def.c_str());
    std::printf("    %s\n", k.help);
  }
  return 0;
}

}  // namespace

int cmd_config(const ConfigOptions& o) {
  if (o.keys) return print_keys();
  const config::Config cfg = config::load();
  for (const auto& p : cfg.problems) std::fprintf(stderr, "sol: %s\n", p.c_str());

  std::printf("# effective SOL configuration; file: %s\n", cfg.file.empty() ? "(none)" : cfg.file.c_str());
  if (!cfg.file_note.empty()) std::printf("# %s\n", cfg.file_note.c_str());
  for (size_t i = 0; i < config::kNumKeys; ++i) {
    const auto key = static_cast<config::Key>(i);
    const auto& k = config::kKeys[i];
    std::string line = *k.toml ? std::string(k.toml) : std::string("# ") + k.env;
    line += " = " + config::format_value(cfg, key);
    std::string source = source_text(cfg.source[i]);
    if (!cfg.not_taken[i].empty()) source += "; not taken: " + cfg.not_taken[i];
    std::printf("%-44s # %s\n", line.c_str(), source.c_str());
  }
  for (const auto& r : cfg.routes) {
    char buf[512];
    std::snprintf(buf, sizeof buf,
                  "[[route]] op = \"%s\", dtype = \"%s\", backend = \"%s\", min_flops = %g, max_flops = %g",
                  r.op.c_str(), r.dtype.c_str(), r.backend.c_str(), r.min_flops, r.max_flops);
    std::printf("%-44s # %s\n", buf, r.where.c_str());
  }
  return cfg.problems.empty() ? 0 : 1;
}

}  // namespace sol::tools
