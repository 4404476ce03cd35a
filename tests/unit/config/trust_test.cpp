// Where trusted keys (those that make SOL load or run something) may come from, config files
// others can write, and secure-execution processes.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <string>

#include "config/config.hpp"

namespace sol::config {
namespace {

constexpr size_t idx(Key k) {
  return static_cast<size_t>(k);
}

const char* kCodeKeys =
    "backend = \"native\"\n"
    "[backends.openblas]\n"
    "library = \"/tmp/evil/libmark.so\"\n"
    "threads = 3\n";

// A fresh directory as the current one, with HOME and XDG_CONFIG_HOME inside it.
class Trust : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sol-trust-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    ASSERT_NE(::getcwd(old_cwd_, sizeof old_cwd_), nullptr);
    ASSERT_EQ(::mkdir((dir_ + "/work").c_str(), 0700), 0);
    ASSERT_EQ(::chdir((dir_ + "/work").c_str()), 0);
    vars_ = {{"HOME", dir_ + "/home"}};
  }
  void TearDown() override {
    ASSERT_EQ(::chdir(old_cwd_), 0);
    ASSERT_EQ(std::system(("rm -rf '" + dir_ + "'").c_str()), 0);
  }

  Config load_here() const {
    Environment e;
    auto vars = std::make_shared<std::map<std::string, std::string>>(vars_);
    e.get = [vars](const char* name) -> const char* {
      auto it = vars->find(name);
      return it == vars->end() ? nullptr : it->second.c_str();
    };
    for (const auto& [k, v] : *vars)
      if (k.rfind("SOL_", 0) == 0) e.sol_names.push_back(k);
    return load(e);
  }

  static void write(const std::string& path, const char* text, mode_t mode = 0600) {
    std::ofstream(path) << text;
    ASSERT_EQ(::chmod(path.c_str(), mode), 0);
  }

  std::string user_file() {
    const std::string d = dir_ + "/home/.config/sol";
    EXPECT_EQ(std::system(("mkdir -p '" + d + "'").c_str()), 0);
    return d + "/sol.toml";
  }

  std::string dir_;
  char old_cwd_[4096];
  std::map<std::string, std::string> vars_;
};

TEST_F(Trust, TheCurrentDirectorysFileSetsNoTrustedKey) {
  write("sol.toml", kCodeKeys);
  const Config cfg = load_here();
  EXPECT_EQ(cfg.file, "sol.toml");
  EXPECT_FALSE(cfg.file_trusted);
  EXPECT_EQ(cfg.openblas_library, "libopenblas.so.0");
  EXPECT_EQ(cfg.source[idx(Key::openblas_library)].kind, Source::by_default);
  EXPECT_EQ(cfg.not_taken[idx(Key::openblas_library)],
            "sol.toml:3:11 is in the current directory, not trusted");
  ASSERT_EQ(cfg.problems.size(), 1u);
  EXPECT_EQ(
      cfg.problems[0],
      "sol.toml:3:11: backends.openblas.library is ignored: a sol.toml in the current directory may not "
      "make SOL load code (trust it with SOL_CONFIG=./sol.toml or move it to ~/.config/sol/sol.toml)");
  // The other keys still apply, marked as coming from an untrusted file.
  EXPECT_EQ(cfg.backend, std::vector<std::string>{"native"});
  EXPECT_EQ(cfg.openblas_threads, 3);
  EXPECT_EQ(cfg.source[idx(Key::openblas_threads)].kind, Source::file);
  EXPECT_FALSE(cfg.source[idx(Key::openblas_threads)].trusted);
}

TEST_F(Trust, EveryCodeLoadingKeyIsTrustedOnly) {
  for (const char* toml :
       {"backends.openblas.library", "backends.onednn.library", "backends.opencl.cache_dir"}) {
    bool found = false;
    for (const auto& k : kKeys)
      if (std::string(k.toml) == toml) {
        found = true;
        EXPECT_EQ(k.trust, config::Trust::trusted) << toml;
      }
    EXPECT_TRUE(found) << toml;
  }
  EXPECT_EQ(info(Key::backend).trust, config::Trust::any);
}

TEST_F(Trust, AFileNamedExplicitlyIsFollowed) {
  write("sol.toml", kCodeKeys);
  vars_["SOL_CONFIG"] = "./sol.toml";
  const Config cfg = load_here();
  EXPECT_TRUE(cfg.problems.empty()) << cfg.problems.front();
  EXPECT_TRUE(cfg.file_trusted);
  EXPECT_EQ(cfg.openblas_library, "/tmp/evil/libmark.so");
  EXPECT_TRUE(cfg.source[idx(Key::openblas_library)].trusted);
}

TEST_F(Trust, TheUsersOwnFileIsFollowed) {
  const std::string user = user_file();
  write(user, kCodeKeys);
  Config cfg = load_here();
  EXPECT_EQ(cfg.file, user);
  EXPECT_TRUE(cfg.problems.empty()) << cfg.problems.front();
  EXPECT_EQ(cfg.openblas_library, "/tmp/evil/libmark.so");
  // Also when read as ./sol.toml from its own directory.
  ASSERT_EQ(::chdir((dir_ + "/home/.config/sol").c_str()), 0);
  cfg = load_here();
  EXPECT_EQ(cfg.file, "sol.toml");
  EXPECT_TRUE(cfg.file_trusted);
  EXPECT_EQ(cfg.openblas_library, "/tmp/evil/libmark.so");
}

TEST_F(Trust, XdgConfigHomeIsNamedInTheAdvice) {
  vars_["XDG_CONFIG_HOME"] = dir_ + "/xdg";
  write("sol.toml", "[backends.opencl]\ncache_dir = \"/tmp/shared\"\n");
  const Config cfg = load_here();
  ASSERT_EQ(cfg.problems.size(), 1u);
  EXPECT_NE(cfg.problems[0].find("backends.opencl.cache_dir is ignored"), std::string::npos);
  EXPECT_NE(cfg.problems[0].find("move it to " + dir_ + "/xdg/sol/sol.toml)"), std::string::npos);
}

TEST_F(Trust, AConfigFileOthersCanWriteIsNotRead) {
  write("shared.toml", kCodeKeys, 0666);
  vars_["SOL_CONFIG"] = "shared.toml";
  vars_["SOL_TRACE_DEPTH"] = "7";
  const Config cfg = load_here();
  EXPECT_EQ(cfg.file, "");
  EXPECT_EQ(cfg.backend, std::vector<std::string>{"auto"});
  EXPECT_EQ(cfg.trace_depth, 7);  // the environment still applies
  ASSERT_EQ(cfg.problems.size(), 1u);
  EXPECT_EQ(cfg.problems[0], "config file shared.toml is not used: " + dir_ +
                                 "/work/shared.toml is writable by group or others (only you or root may "
                                 "be able to change it); using defaults");
}

TEST_F(Trust, SecureExecutionReadsNothing) {
  Environment e;
  int reads = 0;
  e.get = [&reads](const char*) -> const char* {
    ++reads;
    return "1";
  };
  e.sol_names = {"SOL_BACKEND", "SOL_BOGUS"};
  e.secure = true;
  write("sol.toml", "backend = 'opencll'\n");
  const Config cfg = load(e);
  EXPECT_EQ(reads, 0);
  EXPECT_TRUE(cfg.disable);
  EXPECT_EQ(cfg.source[idx(Key::disable)].kind, Source::secure_execution);
  EXPECT_EQ(cfg.file, "");
  EXPECT_TRUE(cfg.problems.empty());
}

TEST_F(Trust, AnOrdinaryProcessIsNotSecure) {
  EXPECT_FALSE(Environment::process().secure);
}

}  // namespace
}  // namespace sol::config
