// common/fs_safety: which paths are trusted, and files created without following links or
// clobbering what is not SOL's. Each case builds its own directory tree under a private
// temporary directory.
#include "common/fs_safety.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace sol::fs_safety {
namespace {

constexpr uid_t kNobody = 65534;

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void put(const std::string& path, const std::string& text, mode_t mode = 0600) {
  std::ofstream(path) << text;
  ASSERT_EQ(::chmod(path.c_str(), mode), 0) << path;
}

void mkdir_mode(const std::string& path, mode_t mode) {
  ASSERT_EQ(::mkdir(path.c_str(), 0700), 0) << path;
  ASSERT_EQ(::chmod(path.c_str(), mode), 0) << path;  // chmod: the umask does not apply
}

mode_t mode_of(const std::string& path) {
  struct stat st {};
  ::lstat(path.c_str(), &st);
  return st.st_mode & 07777;
}

class FsSafety : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sol-fs-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    const std::string cmd = "rm -rf '" + dir_ + "'";
    ASSERT_EQ(std::system(cmd.c_str()), 0);
  }
  std::string at(const std::string& name) const { return dir_ + "/" + name; }

  std::string dir_;
};

TEST_F(FsSafety, OwnFilesInPrivateDirectoriesAreTrusted) {
  put(at("sol.toml"), "x");
  EXPECT_EQ(untrusted_reason(at("sol.toml")), "");
  EXPECT_EQ(untrusted_reason(dir_), "");
  // Reached by a relative path with "." and "..", from inside the directory.
  mkdir_mode(at("sub"), 0700);
  char cwd[4096];
  ASSERT_NE(::getcwd(cwd, sizeof cwd), nullptr);
  ASSERT_EQ(::chdir(at("sub").c_str()), 0);
  EXPECT_EQ(untrusted_reason("./../sol.toml"), "");
  ASSERT_EQ(::chdir(cwd), 0);
}

TEST_F(FsSafety, MissingTailIsJudgedByItsExistingPart) {
  EXPECT_EQ(untrusted_reason(at("a/b/c"), true), "");
  EXPECT_NE(untrusted_reason(at("a/b/c")).find("No such file or directory"), std::string::npos);
  mkdir_mode(at("open"), 0777);
  EXPECT_EQ(untrusted_reason(at("open/a/b"), true), at("open") + " is writable by group or others");
}

TEST_F(FsSafety, FilesOthersCanWriteAreNot) {
  put(at("group.toml"), "x", 0620);
  put(at("world.toml"), "x", 0602);
  EXPECT_EQ(untrusted_reason(at("group.toml")), at("group.toml") + " is writable by group or others");
  EXPECT_EQ(untrusted_reason(at("world.toml")), at("world.toml") + " is writable by group or others");
}

TEST_F(FsSafety, NorFilesInDirectoriesOthersCanWrite) {
  mkdir_mode(at("shared"), 0770);
  put(at("shared/sol.toml"), "x");
  EXPECT_EQ(untrusted_reason(at("shared/sol.toml")), at("shared") + " is writable by group or others");
}

TEST_F(FsSafety, StickyDirectoriesHoldOwnEntriesButAreNotTrustedThemselves) {
  // Like /tmp: others may add entries but not replace ours.
  mkdir_mode(at("tmp"), 01777);
  mkdir_mode(at("tmp/mine"), 0700);
  put(at("tmp/mine/sol.toml"), "x");
  EXPECT_EQ(untrusted_reason(at("tmp/mine/sol.toml")), "");
  EXPECT_EQ(untrusted_reason(at("tmp")), at("tmp") + " is writable by group or others");
}

TEST_F(FsSafety, EntriesOfOtherUsersAreNotTrusted) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a file to another user";
  put(at("theirs.toml"), "x");
  ASSERT_EQ(::chown(at("theirs.toml").c_str(), kNobody, kNobody), 0);
  EXPECT_EQ(untrusted_reason(at("theirs.toml")),
            at("theirs.toml") + " belongs to uid 65534, not to you or root");
  // In a sticky directory, an entry someone else made first (a cache directory, say).
  mkdir_mode(at("tmp"), 01777);
  mkdir_mode(at("tmp/cache"), 0700);
  ASSERT_EQ(::chown(at("tmp/cache").c_str(), kNobody, kNobody), 0);
  EXPECT_EQ(untrusted_reason(at("tmp/cache/x"), true),
            at("tmp/cache") + " belongs to uid 65534, not to you or root");
}

TEST_F(FsSafety, SymbolicLinksAreFollowedAndWhereTheyLieCounts) {
  mkdir_mode(at("safe"), 0700);
  put(at("safe/lib.so"), "x");
  mkdir_mode(at("open"), 0777);
  put(at("open/lib.so"), "x");
  // A link in a directory anyone can write could be swapped after the check.
  ASSERT_EQ(::symlink(at("safe/lib.so").c_str(), at("open/link").c_str()), 0);
  EXPECT_EQ(untrusted_reason(at("open/link")), at("open") + " is writable by group or others");
  // A safe link to an unsafe place, absolute or relative.
  ASSERT_EQ(::symlink(at("open/lib.so").c_str(), at("safe/abs").c_str()), 0);
  ASSERT_EQ(::symlink("../open/lib.so", at("safe/rel").c_str()), 0);
  EXPECT_EQ(untrusted_reason(at("safe/abs")), at("open") + " is writable by group or others");
  EXPECT_EQ(untrusted_reason(at("safe/rel")), at("open") + " is writable by group or others");
  // A safe link to a safe place.
  ASSERT_EQ(::symlink("lib.so", at("safe/good").c_str()), 0);
  EXPECT_EQ(untrusted_reason(at("safe/good")), "");
  ASSERT_EQ(::symlink("loop", at("safe/loop").c_str()), 0);
  EXPECT_NE(untrusted_reason(at("safe/loop")).find("too many levels of symbolic links"), std::string::npos);
}

TEST_F(FsSafety, PrivateDirectoriesAreCreated0700AndCheckedAfterwards) {
  EXPECT_EQ(make_private_dir(at("cache/sol/opencl")), "");
  EXPECT_EQ(mode_of(at("cache")), 0700u);
  EXPECT_EQ(mode_of(at("cache/sol/opencl")), 0700u);
  EXPECT_EQ(make_private_dir(at("cache/sol/opencl")), "");  // exists: fine
  mkdir_mode(at("open"), 0777);
  EXPECT_EQ(make_private_dir(at("open/cache")), at("open") + " is writable by group or others");
  EXPECT_NE(::access(at("open/cache").c_str(), F_OK), 0);  // nothing created there
  put(at("file"), "x");
  EXPECT_EQ(make_private_dir(at("file")), at("file") + " is not a directory");
}

TEST_F(FsSafety, NewFilesAre0600AndReplaceOnlyOurOwnFiles) {
  std::string error;
  int fd = open_new_private(at("sol-1.trace.json"), O_APPEND, error);
  ASSERT_GE(fd, 0) << error;
  ASSERT_EQ(::write(fd, "new", 3), 3);
  ::close(fd);
  EXPECT_EQ(mode_of(at("sol-1.trace.json")), 0600u);
  // An earlier process's file of ours, with the same name: replaced, not appended to.
  fd = open_new_private(at("sol-1.trace.json"), O_APPEND, error);
  ASSERT_GE(fd, 0) << error;
  ASSERT_EQ(::write(fd, "again", 5), 5);
  ::close(fd);
  EXPECT_EQ(slurp(at("sol-1.trace.json")), "again");
}

TEST_F(FsSafety, PlantedSymbolicLinksAreNotWrittenThrough) {
  put(at("victim"), "precious", 0644);
  ASSERT_EQ(::symlink(at("victim").c_str(), at("sol-2.trace.json").c_str()), 0);
  ASSERT_EQ(::symlink(at("nowhere").c_str(), at("sol-2.summary.txt").c_str()), 0);
  std::string error;
  EXPECT_EQ(open_new_private(at("sol-2.trace.json"), 0, error), -1);
  EXPECT_EQ(error, at("sol-2.trace.json") + " is a symbolic link; SOL does not write through one");
  EXPECT_EQ(open_new_private(at("sol-2.summary.txt"), 0, error), -1);  // dangling: not created either
  EXPECT_NE(::access(at("nowhere").c_str(), F_OK), 0);
  // The rename that publishes a finished file leaves the link (and its target) alone as well.
  put(at("part"), "trace");
  EXPECT_FALSE(rename_over_own(at("part"), at("sol-2.trace.json"), error));
  EXPECT_EQ(slurp(at("victim")), "precious");
  EXPECT_EQ(mode_of(at("victim")), 0644u);
  put(at("sol-3.trace.json"), "old");
  EXPECT_TRUE(rename_over_own(at("part"), at("sol-3.trace.json"), error)) << error;
  EXPECT_EQ(slurp(at("sol-3.trace.json")), "trace");
}

TEST_F(FsSafety, OtherUsersFilesAreNotReplaced) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a file to another user";
  put(at("sol-4.trace.json"), "theirs");
  ASSERT_EQ(::chown(at("sol-4.trace.json").c_str(), kNobody, kNobody), 0);
  std::string error;
  EXPECT_EQ(open_new_private(at("sol-4.trace.json"), 0, error), -1);
  EXPECT_EQ(error, at("sol-4.trace.json") + " exists and belongs to uid 65534");
  EXPECT_EQ(slurp(at("sol-4.trace.json")), "theirs");
}

TEST_F(FsSafety, LibrariesByPathMustBeTrustedSonamesAreLeftToTheLoader) {
  mkdir_mode(at("open"), 0777);
  put(at("open/libx.so"), "not a library", 0755);
  std::string why;
  EXPECT_EQ(open_library(at("open/libx.so"), RTLD_NOW, why), nullptr);
  EXPECT_EQ(why, at("open/libx.so") + " is not loaded: " + at("open") + " is writable by group or others");
  EXPECT_EQ(open_library("libsol-no-such-library.so.0", RTLD_NOW, why), nullptr);
  EXPECT_NE(why.find("libsol-no-such-library.so.0"), std::string::npos);  // dlerror's text
  void* libc = open_library("libc.so.6", RTLD_NOW, why);
  EXPECT_NE(libc, nullptr) << why;
  if (libc) ::dlclose(libc);
}

TEST(SecureExecution, IsOffInAnOrdinaryProcess) {
  // The set-user-ID case runs in tests/integration/test_trust.py where the machine allows it;
  // config_trust_test checks what the loader does with the answer.
  EXPECT_FALSE(secure_execution());
}

}  // namespace
}  // namespace sol::fs_safety
