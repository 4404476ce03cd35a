// The configuration loader against its key table: defaults, the example file, precedence, and
// the messages for bad input.
#include "config/config.hpp"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace sol::config {
namespace {

// A fake process environment.
Environment fake(std::map<std::string, std::string> vars) {
  Environment e;
  auto shared = std::make_shared<std::map<std::string, std::string>>(std::move(vars));
  e.get = [shared](const char* name) -> const char* {
    auto it = shared->find(name);
    return it == shared->end() ? nullptr : it->second.c_str();
  };
  for (const auto& [k, v] : *shared)
    if (k.rfind("SOL_", 0) == 0) e.sol_names.push_back(k);
  return e;
}

TEST(Config, EveryDefaultIsValid) {
  for (size_t i = 0; i < kNumKeys; ++i) {
    Config cfg;
    EXPECT_EQ(set_from_text(cfg, static_cast<Key>(i), default_text(kKeys[i])), "") << kKeys[i].field;
  }
}

TEST(Config, EveryKeyHasAName) {
  for (const auto& k : kKeys) {
    EXPECT_TRUE(*k.toml || *k.env) << k.field;
    EXPECT_TRUE(*k.help) << k.field;
    if (*k.env) {
      EXPECT_EQ(std::string(k.env).rfind("SOL_", 0), 0u) << k.env;
    }
  }
}

// config/sol.example.toml documents every key with its default: loading it sets every key that
// has a TOML name, from the file, to exactly the default.
TEST(Config, ExampleFileHasEveryKeyAtItsDefault) {
  const std::string path = std::string(SOL_SOURCE_DIR) + "/config/sol.example.toml";
  const Config example = load(fake({{"SOL_CONFIG", path}}));
  EXPECT_TRUE(example.problems.empty()) << example.problems.front();
  const Config defaults = load(fake({{"HOME", "/nonexistent"}}));
  for (size_t i = 0; i < kNumKeys; ++i) {
    const Key key = static_cast<Key>(i);
    if (!*kKeys[i].toml) continue;
    EXPECT_EQ(example.source[i].kind, Source::file) << kKeys[i].toml << " is missing from the example";
    EXPECT_EQ(format_value(example, key), format_value(defaults, key)) << kKeys[i].toml;
  }
}

TEST(Config, EnvironmentBeatsDefaults) {
  const Config cfg =
      load(fake({{"SOL_BACKEND", "opencl, openblas"}, {"SOL_TRACE_DEPTH", "7"}, {"SOL_TRACE", "yes"}}));
  EXPECT_TRUE(cfg.problems.empty());
  EXPECT_EQ(cfg.backend, (std::vector<std::string>{"opencl", "openblas"}));
  EXPECT_EQ(cfg.trace_depth, 7);
  EXPECT_TRUE(cfg.trace);
  EXPECT_EQ(cfg.source[static_cast<size_t>(Key::trace_depth)].kind, Source::env);
  EXPECT_EQ(cfg.source[static_cast<size_t>(Key::trace_depth)].where, "SOL_TRACE_DEPTH");
}

TEST(Config, BadEnvironmentValueKeepsTheDefault) {
  const Config cfg = load(fake({{"SOL_TRACE_DEPTH", "300"}}));
  ASSERT_EQ(cfg.problems.size(), 1u);
  EXPECT_EQ(cfg.problems[0], "SOL_TRACE_DEPTH='300' is out of range 1..256; using 32 instead");
  EXPECT_EQ(cfg.trace_depth, 32);
  EXPECT_EQ(cfg.source[static_cast<size_t>(Key::trace_depth)].kind, Source::by_default);
}

TEST(Config, DisableSkipsEverythingElse) {
  const Config cfg = load(fake({{"SOL_DISABLE", "1"}, {"SOL_BACKEND", "nonsense"}, {"SOL_BOGUS", "1"}}));
  EXPECT_TRUE(cfg.disable);
  EXPECT_TRUE(cfg.problems.empty());
}

TEST(Config, UnknownEnvironmentVariableIsReported) {
  const Config cfg = load(fake({{"SOL_TRACE_DPETH", "4"}}));
  ASSERT_EQ(cfg.problems.size(), 1u);
  EXPECT_EQ(cfg.problems[0],
            "unknown environment variable SOL_TRACE_DPETH (did you mean 'SOL_TRACE_DEPTH'?); ignored");
}

TEST(Config, BackendListValidation) {
  Config cfg;
  EXPECT_EQ(set_from_text(cfg, Key::backend, "Native , OPENBLAS,native"), "");
  EXPECT_EQ(cfg.backend, (std::vector<std::string>{"native", "openblas"}));
  EXPECT_NE(set_from_text(cfg, Key::backend, "cudnn").find("unknown backend 'cudnn'"), std::string::npos);
  EXPECT_NE(set_from_text(cfg, Key::backend, ""), "");
  EXPECT_EQ(cfg.backend, (std::vector<std::string>{"native", "openblas"}));  // unchanged on error
}

TEST(Config, NumbersAreStrict) {
  Config cfg;
  EXPECT_EQ(set_from_text(cfg, Key::trace_depth, " 12 "), "");
  EXPECT_EQ(cfg.trace_depth, 12);
  EXPECT_EQ(set_from_text(cfg, Key::trace_depth, "12abc"), "is not a number");
  EXPECT_EQ(set_from_text(cfg, Key::trace_depth, "1e3"), "is not a number");
  EXPECT_EQ(set_from_text(cfg, Key::trace_depth, "99999999999999999999"), "is out of range 1..256");
  EXPECT_EQ(cfg.trace_depth, 12);
}

TEST(Config, ChoicesTakeOneOfTheirWords) {
  const KeyInfo& k = info(Key::onednn_gemm);
  EXPECT_EQ(choices(k), (std::vector<std::string>{"auto", "sgemm", "matmul"}));
  EXPECT_EQ(default_text(k), "auto");
  EXPECT_EQ(load(fake({{"HOME", "/nonexistent"}})).onednn_gemm, "auto");
  Config cfg;
  EXPECT_EQ(set_from_text(cfg, Key::onednn_gemm, " MatMul "), "");
  EXPECT_EQ(cfg.onednn_gemm, "matmul");
  EXPECT_EQ(set_from_text(cfg, Key::onednn_gemm, "matmull"),
            "is not one of auto, sgemm, matmul (did you mean 'matmul'?)");
  EXPECT_EQ(set_from_text(cfg, Key::onednn_gemm, "auto|sgemm"), "is not one of auto, sgemm, matmul");
  EXPECT_EQ(set_from_text(cfg, Key::onednn_gemm, "auto|sgemm|matmul"), "is not one of auto, sgemm, matmul");
  EXPECT_EQ(cfg.onednn_gemm, "matmul");  // unchanged on error
  EXPECT_TRUE(choices(info(Key::trace_dir)).empty());
}

TEST(Config, PathsExpandHome) {
  Config cfg;
  setenv("HOME", "/home/someone", 1);
  EXPECT_EQ(set_from_text(cfg, Key::trace_dir, "~/traces"), "");
  EXPECT_EQ(cfg.trace_dir, "/home/someone/traces");
  EXPECT_EQ(set_from_text(cfg, Key::trace_dir, "  "), "is empty, expected a path");
}

TEST(Config, NearestSuggestsOnlyLikelyTypos) {
  const std::vector<std::string> keys = {"trace.depth", "trace.dir", "backend", "log"};
  EXPECT_EQ(nearest("trace.dpeth", keys), "trace.depth");
  EXPECT_EQ(nearest("BACKEND", keys), "backend");
  EXPECT_EQ(nearest("lgo", keys), "log");
  EXPECT_EQ(nearest("completely.different", keys), "");
}

}  // namespace
}  // namespace sol::config
