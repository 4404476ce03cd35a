#include "auto/profile.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "config/config.hpp"

namespace sol::autosel::profile {
namespace {

using capture::DType;
using capture::Node;
using capture::Op;

Node gemm(int64_t m, int64_t n, int64_t k, char ta = 'N', char tb = 'N', DType dt = DType::f32) {
  Node node(capture::Sym{}, Op::gemm, dt);
  node.blas.layout = 'C';
  node.blas.transa = ta;
  node.blas.transb = tb;
  node.blas.m = m, node.blas.n = n, node.blas.k = k;
  return node;
}

TEST(ShapeClass, HalfOctavesShareAClass) {
  EXPECT_EQ(class_of(gemm(256, 256, 256)), class_of(gemm(300, 383, 350)));
  EXPECT_EQ(class_of(gemm(384, 384, 384)), class_of(gemm(400, 511, 384)));
  EXPECT_NE(class_of(gemm(256, 256, 256)), class_of(gemm(384, 256, 256)));
  EXPECT_NE(class_of(gemm(256, 256, 256)), class_of(gemm(256, 256, 383 + 1)));
  EXPECT_NE(class_of(gemm(256, 256, 256)), class_of(gemm(256, 256, 255)));
  EXPECT_EQ(class_of(gemm(4096, 4096, 4096)), class_of(gemm(9000, 5000, 100000)));  // the largest share one
  EXPECT_NE(class_of(gemm(3072, 3072, 3072)), class_of(gemm(4096, 3072, 3072)));
  EXPECT_EQ(class_floor(300), 256);
  EXPECT_EQ(class_floor(383), 256);
  EXPECT_EQ(class_floor(384), 384);
  EXPECT_EQ(class_floor(511), 384);
  EXPECT_EQ(class_floor(1), 1);
  EXPECT_EQ(class_floor(2), 2);
  EXPECT_EQ(class_floor(3), 3);
  EXPECT_EQ(class_floor(5), 4);
  EXPECT_EQ(class_floor(6), 6);
  EXPECT_EQ(class_floor(100000), kLargest);
  EXPECT_EQ(class_text(class_of(gemm(400, 10, 100000))), "gemm f32 transa=N transb=N m=384 n=8 k=4096+");
}

TEST(ShapeClass, ArgumentsThatChangeKernels) {
  EXPECT_NE(class_of(gemm(64, 64, 64, 'N', 'N')), class_of(gemm(64, 64, 64, 'T', 'N')));
  EXPECT_NE(class_of(gemm(64, 64, 64)), class_of(gemm(64, 64, 64, 'N', 'N', DType::f64)));
  // A real matrix's conjugate transpose is its transpose; case does not matter.
  EXPECT_EQ(class_of(gemm(64, 64, 64, 'C', 'n')), class_of(gemm(64, 64, 64, 't', 'N')));
  EXPECT_NE(class_of(gemm(64, 64, 64, 'C', 'N', DType::c64)),
            class_of(gemm(64, 64, 64, 'T', 'N', DType::c64)));
  Node row = gemm(64, 64, 64);
  row.blas.layout = 'R';
  EXPECT_NE(class_of(row), class_of(gemm(64, 64, 64)));
  Node v(capture::Sym{}, Op::gemv, DType::f32);
  v.blas.layout = 'C', v.blas.transa = 'N', v.blas.m = v.blas.n = 100, v.blas.incx = v.blas.incy = 1;
  const uint64_t unit = class_of(v);
  v.blas.incx = 2;
  EXPECT_NE(class_of(v), unit);
  EXPECT_EQ(class_text(class_of(gemm(300, 70, 5000, 'T', 'N'))),
            "gemm f32 transa=T transb=N m=256 n=64 k=4096+");
}

// A private profile directory per test.
class ProfileFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sol-profile-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    config::Environment env;
    env.get = [](const char*) -> const char* { return nullptr; };
    cfg_ = config::load(env);
    cfg_.tune_dir = dir_ + "/sol";
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }

  static Row row(uint64_t key, const std::string& choice) {
    Row r;
    r.key = key;
    r.size = "1x1x1";
    // Far apart, the choice the fastest (a choice behind another's rate is unconfirmed()): judged once.
    r.rates = {{"native", 1.0}, {"openblas", 2.0}, {"onednn", 4.0}};
    bool listed = false;
    for (Rate& rate : r.rates)
      if (rate.candidate == choice) rate.gflops = 8.0, listed = true;
    if (!listed) r.rates.push_back({choice, 8.0});
    r.choice = choice;
    return r;
  }
  std::string read(const std::string& path) {
    std::ifstream f(path);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }

  std::string dir_;
  config::Config cfg_;
};

TEST_F(ProfileFiles, ASecondProcessRoutesFromTheFirstCall) {
  const uint64_t key = class_of(gemm(512, 512, 512));
  {
    Profile p(cfg_);
    const int lib = p.native_index("/usr/lib/libblas.so.3:1:2");
    EXPECT_EQ(p.lookup(lib, key), Profile::kUnknown);
    ASSERT_TRUE(p.claim(lib, key));
    EXPECT_FALSE(p.claim(lib, key));  // one measurer
    EXPECT_EQ(p.lookup(lib, key), Profile::kMeasuring);
    p.record(lib, row(key, "onednn"));
    EXPECT_STREQ(p.candidate_name(p.lookup(lib, key)), "onednn");
  }
  Profile again(cfg_);
  const int lib = again.native_index("/usr/lib/libblas.so.3:1:2");
  ASSERT_GE(again.lookup(lib, key), 0);
  EXPECT_STREQ(again.candidate_name(again.lookup(lib, key)), "onednn");
  // Another native library has measured nothing.
  EXPECT_EQ(again.lookup(again.native_index("/opt/other/libblas.so.3:1:2"), key), Profile::kUnknown);
}

TEST(ShapeClass, SubClassesByHalves) {
  EXPECT_EQ(halves_of(gemm(256, 256, 256)), 0);
  EXPECT_EQ(halves_of(gemm(319, 300, 383)), 4);  // 256-383 splits at 320
  EXPECT_EQ(halves_of(gemm(320, 448, 64)), 3);   // 384-511 at 448; 64-95 at 80
  EXPECT_EQ(halves_of(gemm(3, 9000, 2)), 0);     // a class of one size, and the largest, do not split
  EXPECT_NE(sub_class_of(gemm(256, 256, 256)), class_of(gemm(256, 256, 256)));
  EXPECT_NE(sub_class_of(gemm(256, 256, 256)), sub_class_of(gemm(320, 320, 320)));
  EXPECT_EQ(sub_class_of(gemm(320, 330, 340)), sub_class_of(gemm(383, 320, 350)));
  EXPECT_EQ(class_text(sub_class_of(gemm(330, 300, 400, 'T', 'N'))),
            "gemm f32 transa=T transb=N m=320 n=256 k=384");
}

TEST_F(ProfileFiles, AClassMeasuredCloseOrSentAwayFromNativeSplitsByHalvesAndTheFileKeepsIt) {
  const uint64_t close = class_of(gemm(256, 256, 256, 'T')), clear = class_of(gemm(256, 256, 256));
  const Node at_320 = gemm(320, 320, 320, 'T'), at_300 = gemm(300, 300, 300, 'T');
  const uint64_t away_key = class_of(gemm(256, 256, 256, 'N', 'T'));
  const Node at_320_nt = gemm(320, 320, 320, 'N', 'T');
  // The class a call of class `key` is routed by.
  const auto routed_by = [](Profile& p, int lib, uint64_t key, const Node& call) {
    p.lookup(lib, key, call);
    return key;
  };
  {
    Profile p(cfg_);
    const int lib = p.native_index("lib");
    Row r = row(close, "native");
    r.size = "256x256x256";
    r.rates = {{"native", 193}, {"onednn", 176}};  // within kCloseRates
    r.judged = kJudges;  // and judged by as many processes as judge any (see the next test)
    p.record(lib, r);
    Row c = row(clear, "native");
    c.rates = {{"native", 226}, {"onednn", 150}};
    p.record(lib, c);
    // Far ahead of native, but away from it: split too (a backend's rate can fall inside a class).
    Row away = row(away_key, "onednn");
    away.size = "256x256x256";
    away.rates = {{"native", 150}, {"onednn", 226}};
    p.record(lib, away);
    EXPECT_EQ(routed_by(p, lib, away_key, at_320_nt), sub_class_of(at_320_nt));
    EXPECT_EQ(routed_by(p, lib, away_key, gemm(300, 300, 300, 'N', 'T')), away_key);
    EXPECT_EQ(routed_by(p, lib, close, at_320), sub_class_of(at_320));
    EXPECT_EQ(routed_by(p, lib, close, at_300), close);  // the measured call's halves
    EXPECT_EQ(routed_by(p, lib, clear, at_320), clear);
    // The sub-class is a class of its own: measured, recorded, and kept.
    const uint64_t sub = sub_class_of(gemm(320, 320, 320, 'T'));
    EXPECT_EQ(p.lookup(lib, sub), Profile::kUnknown);
    ASSERT_TRUE(p.claim(lib, sub));
    Row s = row(sub, "onednn");
    s.size = "320x320x320";
    s.rates = {{"native", 195}, {"onednn", 209}};
    s.judged = kJudges;
    p.record(lib, s);
    EXPECT_EQ(routed_by(p, lib, sub, gemm(256, 256, 256, 'T')), sub);  // sub-classes do not split again
  }
  Profile again(cfg_);
  const int lib = again.native_index("lib");
  ASSERT_GE(again.lookup(lib, close), 0);
  EXPECT_EQ(routed_by(again, lib, close, at_320), sub_class_of(at_320));
  EXPECT_EQ(routed_by(again, lib, close, at_300), close);
  ASSERT_GE(again.lookup(lib, clear), 0);
  EXPECT_EQ(routed_by(again, lib, clear, at_320), clear);
  ASSERT_GE(again.lookup(lib, away_key), 0);
  EXPECT_EQ(routed_by(again, lib, away_key, at_320_nt), sub_class_of(at_320_nt));
  const int v = again.lookup(lib, sub_class_of(gemm(330, 330, 330, 'T')));
  ASSERT_GE(v, 0);
  EXPECT_STREQ(again.candidate_name(v), "onednn");
}

// A process's figures are its own (oneDNN's 256^3 SGEMM at 78 or 56 GFLOP/s by the process's
// address-space layout, native's at 55): a class one process judged within kJudgeAgainRates is
// judged again by the next processes, up to kJudges in all, and keeps each candidate's best.
TEST_F(ProfileFiles, AClassJudgedCloseIsJudgedAgainByTheNextProcessesAndKeepsEachCandidatesBest) {
  const uint64_t key = class_of(gemm(256, 256, 256)), far = class_of(gemm(512, 512, 512));
  const auto with = [](Row r, double native, double onednn) {
    r.size = "256x256x256";
    r.rates = {{"native", native}, {"onednn", onednn}};
    return r;
  };
  {
    Profile first(cfg_);
    const int lib = first.native_index("lib");
    ASSERT_TRUE(first.claim(lib, key));
    first.record(lib, with(row(key, "native"), 55, 56));  // a slow draw for oneDNN
    ASSERT_TRUE(first.claim(lib, far));
    first.record(lib, with(row(far, "onednn"), 40, 80));
    EXPECT_STREQ(first.candidate_name(first.lookup(lib, key)), "native");  // judged: not again here
  }
  std::string path;
  {
    Profile second(cfg_);
    path = second.path();
    const int lib = second.native_index("lib");
    EXPECT_STREQ(second.candidate_name(second.lookup(lib, far)), "onednn");  // 2x apart: settled
    ASSERT_EQ(second.lookup(lib, key), Profile::kJudgeAgain);
    EXPECT_EQ(second.lookup(lib, key), Profile::kMeasuring);  // one judge per process
    Row before;
    ASSERT_TRUE(second.earlier(lib, key, before));
    EXPECT_EQ(before.judged, 1);
    EXPECT_EQ(before.choice, "native");
    second.record(lib, with(row(key, "onednn"), 54, 78));  // a fast draw
    EXPECT_STREQ(second.candidate_name(second.lookup(lib, key)), "onednn");
  }
  std::vector<Row> rows;
  std::string why;
  ASSERT_TRUE(read_file(path, machine_fingerprint(cfg_), rows, why)) << why;
  const auto stored = [&] {
    EXPECT_TRUE(read_file(path, machine_fingerprint(cfg_), rows, why)) << why;
    for (const Row& r : rows)
      if (r.key == key) return r;
    return Row{};
  };
  Row r = stored();
  EXPECT_EQ(r.judged, 2);
  EXPECT_EQ(r.choice, "onednn");
  ASSERT_EQ(r.rates.size(), 2u);
  EXPECT_EQ(r.rates[0].gflops, 55);  // native's best: the first process's
  EXPECT_EQ(r.rates[1].gflops, 78);
  {
    // 78 against 55 is still within 1.5x: a third process judges, and a slow draw there, native
    // ahead by 2 %, does not bring the class back to native.
    Profile third(cfg_);
    const int lib = third.native_index("lib");
    ASSERT_EQ(third.lookup(lib, key), Profile::kJudgeAgain);
    third.record(lib, with(row(key, "native"), 56.1, 55));
    EXPECT_STREQ(third.candidate_name(third.lookup(lib, key)), "onednn");
  }
  r = stored();
  EXPECT_EQ(r.judged, 3);
  EXPECT_EQ(r.choice, "onednn");
  EXPECT_EQ(r.rates[0].gflops, 56.1);
  {
    Profile fourth(cfg_);  // judged by kJudges processes: routed as it stands
    const int lib = fourth.native_index("lib");
    EXPECT_STREQ(fourth.candidate_name(fourth.lookup(lib, key)), "onednn");
  }
  // Within 3 % of the best, the judging process's own choice stands.
  const uint64_t tied = class_of(gemm(128, 128, 128));
  {
    Profile p(cfg_);
    const int lib = p.native_index("lib");
    p.record(lib, with(row(tied, "onednn"), 50, 60));
  }
  {
    Profile p(cfg_);
    const int lib = p.native_index("lib");
    ASSERT_EQ(p.lookup(lib, tied), Profile::kJudgeAgain);
    p.record(lib, with(row(tied, "native"), 59, 45));
    EXPECT_STREQ(p.candidate_name(p.lookup(lib, tied)), "native");
  }
  // A process that does not judge (its call was invalid, or there is no second candidate to try
  // here) routes by the row as it stands and leaves it for the next.
  const uint64_t left = class_of(gemm(64, 64, 64));
  {
    Profile p(cfg_);
    const int lib = p.native_index("lib");
    p.record(lib, with(row(left, "onednn"), 50, 60));
  }
  for (int i = 0; i < 2; ++i) {
    Profile p(cfg_);
    const int lib = p.native_index("lib");
    ASSERT_EQ(p.lookup(lib, left), Profile::kJudgeAgain);
    p.keep_earlier(lib, left);
    EXPECT_STREQ(p.candidate_name(p.lookup(lib, left)), "onednn");
  }
  // A process that ends before its trial is over still counts once it began judging: short runs
  // of a program do not try the class again and again.
  const uint64_t short_runs = class_of(gemm(96, 96, 96));
  {
    Profile p(cfg_);
    p.record(p.native_index("lib"), with(row(short_runs, "onednn"), 50, 60));
  }
  for (int i = 0; i < kJudges - 1; ++i) {
    Profile p(cfg_);
    const int lib = p.native_index("lib");
    ASSERT_EQ(p.lookup(lib, short_runs), Profile::kJudgeAgain) << i;
    p.judging(lib, short_runs);  // and the process ends
  }
  {
    Profile p(cfg_);
    const int lib = p.native_index("lib");
    EXPECT_STREQ(p.candidate_name(p.lookup(lib, short_runs)), "onednn");
  }
  // With measurement off, nothing is judged again.
  cfg_.tune = false;
  Profile off(cfg_);
  const int lib = off.native_index("lib");
  EXPECT_STREQ(off.candidate_name(off.lookup(lib, left)), "onednn");
}

// A class that a race beside home's threads sent elsewhere, kept on home because its process
// ended before the trial against home did (its choice trails the race's rates): later processes
// judge it again however far apart the rates, and the trial's figures replace the race's, where
// a class judged close keeps each candidate's best.
TEST_F(ProfileFiles, AnUnconfirmedChoiceIsJudgedAgainAndTheTrialsFiguresReplaceTheRaces) {
  const uint64_t key = class_of(gemm(128, 128, 128));
  const auto with = [](Row r, double openblas, double onednn) {
    r.size = "128x128x128";
    r.rates = {{"openblas", openblas}, {"onednn", onednn}};
    return r;
  };
  EXPECT_TRUE(unconfirmed(with(row(key, "openblas"), 20, 45)));
  EXPECT_FALSE(unconfirmed(with(row(key, "openblas"), 44, 45)));  // within 3 %
  EXPECT_FALSE(unconfirmed(with(row(key, "onednn"), 20, 45)));
  {
    Profile first(cfg_);
    const int lib = first.native_index("lib");
    ASSERT_TRUE(first.claim(lib, key));
    first.record(lib, with(row(key, "openblas"), 20, 45));  // 2.25x apart: not judged close
    EXPECT_STREQ(first.candidate_name(first.lookup(lib, key)), "openblas");
  }
  std::string path;
  {
    Profile second(cfg_);
    path = second.path();
    const int lib = second.native_index("lib");
    ASSERT_EQ(second.lookup(lib, key), Profile::kJudgeAgain);
    // Its trial in use: oneDNN charged what the program's steps lost, below the instance.
    second.record(lib, with(row(key, "openblas"), 30, 18));
    EXPECT_STREQ(second.candidate_name(second.lookup(lib, key)), "openblas");
  }
  std::vector<Row> rows;
  std::string why;
  ASSERT_TRUE(read_file(path, machine_fingerprint(cfg_), rows, why)) << why;
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].judged, 2);
  EXPECT_EQ(rows[0].choice, "openblas");
  ASSERT_EQ(rows[0].rates.size(), 2u);
  EXPECT_EQ(rows[0].rates[1].gflops, 18);  // not the race's 45
  {
    Profile third(cfg_);  // confirmed, 30 against 18: settled
    const int lib = third.native_index("lib");
    EXPECT_STREQ(third.candidate_name(third.lookup(lib, key)), "openblas");
  }
}

TEST_F(ProfileFiles, AJudgedCountOutsideItsRangeIsCorrupt) {
  std::string path;
  {
    Profile p(cfg_);
    p.record(p.native_index("lib"), row(class_of(gemm(512, 512, 512)), "openblas"));
    path = p.path();
  }
  const std::string text = read(path);
  const size_t at = text.find("\topenblas\t1\t");
  ASSERT_NE(at, std::string::npos) << text;
  std::vector<Row> rows;
  std::string why;
  for (const char* judged : {"0", "4", "x", ""}) {
    std::string bad = text;
    bad.replace(at + 10, 1, judged);
    std::ofstream(path) << bad;
    EXPECT_FALSE(read_file(path, machine_fingerprint(cfg_), rows, why)) << judged;
    EXPECT_NE(why.find("corrupt"), std::string::npos) << why;
  }
}

TEST_F(ProfileFiles, AnotherLibraryBuildStartsAnotherProfile) {
  const uint64_t key = class_of(gemm(512, 512, 512));
  Profile p(cfg_);
  p.record(p.native_index("lib"), row(key, "openblas"));
  config::Config other = cfg_;
  other.onednn_library = "/nonexistent/libdnnl.so.2";  // the backend would open another oneDNN
  Profile q(other);
  EXPECT_NE(q.path(), p.path());
  EXPECT_EQ(q.lookup(q.native_index("lib"), key), Profile::kUnknown);
  // A file whose fingerprint is not this machine's is refused even under this machine's name.
  std::vector<Row> rows;
  std::string why;
  EXPECT_FALSE(read_file(p.path(), machine_fingerprint(other), rows, why));
  EXPECT_NE(why.find("another machine"), std::string::npos) << why;
  EXPECT_TRUE(read_file(p.path(), machine_fingerprint(cfg_), rows, why)) << why;
  EXPECT_EQ(rows.size(), 1u);
}

TEST_F(ProfileFiles, ACorruptFileIsIgnoredAndRebuilt) {
  const uint64_t key = class_of(gemm(512, 512, 512));
  std::string path;
  {
    Profile p(cfg_);
    p.record(p.native_index("lib"), row(key, "openblas"));
    path = p.path();
  }
  std::string text = read(path);
  const size_t at = text.find("openblas=8.000");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 14, "openblas=8.0x0");
  std::ofstream(path) << text;
  std::vector<Row> rows;
  std::string why;
  EXPECT_FALSE(read_file(path, machine_fingerprint(cfg_), rows, why));
  EXPECT_NE(why.find("corrupt"), std::string::npos) << why;

  Profile p(cfg_);
  const int lib = p.native_index("lib");
  EXPECT_EQ(p.lookup(lib, key), Profile::kUnknown);  // measured again
  ASSERT_TRUE(p.claim(lib, key));
  p.record(lib, row(key, "onednn"));
  EXPECT_TRUE(read_file(path, machine_fingerprint(cfg_), rows, why)) << why;
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].choice, "onednn");

  std::ofstream(path) << "garbage\n";
  EXPECT_FALSE(read_file(path, machine_fingerprint(cfg_), rows, why));
  std::ofstream(path) << "";
  EXPECT_FALSE(read_file(path, machine_fingerprint(cfg_), rows, why));
}

// Each row is appended to the file, not written with the whole file again (a rename over it made
// ext4 start writing at once: 200-400 us a row); a class measured again has its later row.
TEST_F(ProfileFiles, RowsAreAppendedAndTheLastOfAClassCounts) {
  Profile p(cfg_);
  const int lib = p.native_index("lib");
  const uint64_t a = class_of(gemm(512, 512, 512)), b = class_of(gemm(64, 64, 64));
  p.record(lib, row(a, "openblas"));
  struct stat first, later;
  ASSERT_EQ(::stat(p.path().c_str(), &first), 0);
  p.record(lib, row(b, "native"));
  p.record(lib, row(a, "onednn"));  // measured again
  ASSERT_EQ(::stat(p.path().c_str(), &later), 0);
  EXPECT_EQ(later.st_ino, first.st_ino) << "the file was replaced, not appended to";
  std::vector<Row> rows;
  std::string why;
  FileState state;
  ASSERT_TRUE(read_file(p.path(), machine_fingerprint(cfg_), rows, why, &state)) << why;
  EXPECT_EQ(state.row_lines, 3u);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].key, a);
  EXPECT_EQ(rows[0].choice, "onednn");
  Profile again(cfg_);
  EXPECT_STREQ(again.candidate_name(again.lookup(again.native_index("lib"), a)), "onednn");
}

// How each row's figures were obtained, and their order across processes, travel with the row;
// a process never replaces another's calm figures with provisional ones of its own, and nothing a
// program measures replaces a tuned row.
TEST_F(ProfileFiles, NoProcessSpoilsAnothersRows) {
  const uint64_t a = class_of(gemm(512, 512, 512)), b = class_of(gemm(64, 64, 64)),
                 c = class_of(gemm(256, 256, 256));
  Profile first(cfg_), second(cfg_);  // two processes, both started before either wrote
  const int lib1 = first.native_index("lib"), lib2 = second.native_index("lib");
  EXPECT_EQ(second.lookup(lib2, a), Profile::kUnknown);  // read the (empty) file
  Row calm = row(a, "openblas");
  first.record(lib1, calm);
  Row provisional = row(a, "onednn");
  provisional.how = How::provisional;
  second.record(lib2, provisional);  // later, and less trusted: not written
  Row tuned = row(b, "native");
  tuned.how = How::tuned;
  first.record(lib1, tuned);
  Row measured = row(b, "onednn");
  second.record(lib2, measured);  // a program's calm figures against a tuned row: not written
  Row older = row(c, "native"), newer = row(c, "onednn");
  first.record(lib1, older);
  second.record(lib2, newer);  // as trusted and later: it replaces the other's
  std::vector<Row> rows;
  std::string why;
  FileState state;
  ASSERT_TRUE(read_file(first.path(), machine_fingerprint(cfg_), rows, why, &state)) << why;
  std::map<uint64_t, Row> by_key;
  for (const Row& r : rows) by_key[r.key] = r;
  EXPECT_EQ(by_key[a].choice, "openblas");
  EXPECT_EQ(by_key[a].how, How::calm);
  EXPECT_EQ(by_key[b].choice, "native");
  EXPECT_EQ(by_key[b].how, How::tuned);
  EXPECT_EQ(by_key[c].choice, "onednn");
  EXPECT_GT(by_key[c].seq, by_key[b].seq);
  EXPECT_EQ(state.last_seq, by_key[c].seq);
  EXPECT_EQ(state.row_lines, 4u);  // a, b, c and c again
  // A third process routes by what the file holds.
  Profile third(cfg_);
  const int lib3 = third.native_index("lib");
  EXPECT_STREQ(third.candidate_name(third.lookup(lib3, a)), "openblas");
  EXPECT_STREQ(third.candidate_name(third.lookup(lib3, b)), "native");
  // A rewritten file keeps each row's order and how (the torn-line repair rewrites it whole).
  std::ofstream(first.path(), std::ios::app) << "row\ttorn";
  Row d = row(class_of(gemm(32, 32, 32)), "native");
  third.record(lib3, d);
  ASSERT_TRUE(read_file(first.path(), machine_fingerprint(cfg_), rows, why, &state)) << why;
  EXPECT_FALSE(state.torn);
  for (const Row& r : rows) {
    if (r.key == b) {
      EXPECT_EQ(r.how, How::tuned);
    }
  }
}

// A provisional row routes the class, and asks for one measurement more in each process, once it
// is calm (claim_again()); it is never judged again by trials, and the profile is not settled.
TEST_F(ProfileFiles, AProvisionalRowIsMeasuredAgainOncePerProcess) {
  const uint64_t key = class_of(gemm(256, 256, 256));
  Node call = gemm(256, 256, 256);
  {
    Profile p(cfg_);
    const int lib = p.native_index("lib");
    ASSERT_TRUE(p.claim(lib, key));
    Row r = row(key, "onednn");
    r.how = How::provisional;
    p.record(lib, r);
    uint64_t k = key;
    bool again = false;
    EXPECT_STREQ(p.candidate_name(p.lookup(lib, k, call, &again)), "onednn");
    EXPECT_TRUE(again);
    ASSERT_TRUE(p.claim_again(lib, key));
    EXPECT_EQ(p.lookup(lib, key), Profile::kMeasuring);
    p.record(lib, r);  // still provisional: no second try in this process
    k = key;
    p.lookup(lib, k, call, &again);
    EXPECT_FALSE(again);
    EXPECT_FALSE(p.claim_again(lib, key));
    EXPECT_FALSE(p.settled());
  }
  Profile next(cfg_);
  const int lib = next.native_index("lib");
  uint64_t k = key;
  bool again = false;
  EXPECT_STREQ(next.candidate_name(next.lookup(lib, k, call, &again)), "onednn");  // not kJudgeAgain
  EXPECT_TRUE(again);
  ASSERT_TRUE(next.claim_again(lib, key));
  Row calm = row(key, "native");
  next.record(lib, calm);
  k = key;
  next.lookup(lib, k, call, &again);
  EXPECT_FALSE(again);
  EXPECT_TRUE(next.settled());
}

// A line cut short (a crash of the system while appending) is dropped when read, and the next
// writer rewrites the file rather than append after it.
TEST_F(ProfileFiles, ATornLastLineIsDroppedAndRepaired) {
  const uint64_t a = class_of(gemm(512, 512, 512)), b = class_of(gemm(64, 64, 64));
  std::string path;
  {
    Profile p(cfg_);
    p.record(p.native_index("lib"), row(a, "openblas"));
    path = p.path();
  }
  std::ofstream(path, std::ios::app) << "row\tlib\t" << std::hex << b << "\tgemm f32";
  std::vector<Row> rows;
  std::string why;
  FileState state;
  ASSERT_TRUE(read_file(path, machine_fingerprint(cfg_), rows, why, &state)) << why;
  EXPECT_TRUE(state.torn);
  ASSERT_EQ(rows.size(), 1u);
  Profile p(cfg_);
  const int lib = p.native_index("lib");
  EXPECT_STREQ(p.candidate_name(p.lookup(lib, a)), "openblas");
  ASSERT_TRUE(p.claim(lib, b));
  p.record(lib, row(b, "onednn"));
  ASSERT_TRUE(read_file(path, machine_fingerprint(cfg_), rows, why, &state)) << why;
  EXPECT_FALSE(state.torn);
  EXPECT_EQ(rows.size(), 2u);
}

// Rows that later ones replaced do not pile up: past twice the classes (and 16), the file is
// written whole again with one row a class.
TEST_F(ProfileFiles, ReplacedRowsAreCompacted) {
  Profile p(cfg_);
  const int lib = p.native_index("lib");
  const uint64_t a = class_of(gemm(512, 512, 512));
  size_t most = 0;
  for (int i = 0; i < 60; ++i) {
    p.record(lib, row(a, i % 2 ? "onednn" : "openblas"));
    std::vector<Row> rows;
    std::string why;
    FileState state;
    ASSERT_TRUE(read_file(p.path(), machine_fingerprint(cfg_), rows, why, &state)) << why;
    ASSERT_EQ(rows.size(), 1u);
    EXPECT_EQ(rows[0].choice, i % 2 ? "onednn" : "openblas");
    most = std::max(most, state.row_lines);
  }
  EXPECT_LE(most, 2u * 1 + 16);
}

TEST_F(ProfileFiles, MeasurementOff) {
  cfg_.tune = false;
  Profile p(cfg_);
  EXPECT_FALSE(p.measuring());
  const uint64_t key = class_of(gemm(512, 512, 512));
  const int lib = p.native_index("lib");
  p.unrouted(lib, key);
  EXPECT_EQ(p.lookup(lib, key), Profile::kUnrouted);
  EXPECT_FALSE(p.claim(lib, key));
  struct stat st;
  EXPECT_NE(::stat(p.path().c_str(), &st), 0);  // nothing written
}

TEST_F(ProfileFiles, ConcurrentThreadsLoseNothing) {
  constexpr int kThreads = 4, kEach = 25;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      Profile p(cfg_);  // as separate processes would: each merges under the lock
      const int lib = p.native_index("lib");
      for (int i = 0; i < kEach; ++i) {
        const uint64_t key = class_of(gemm(1 << (i % 12), 1 << (i / 12 + 4 * t % 12), 1 << t));
        if (p.claim(lib, key)) p.record(lib, row(key, "openblas"));
      }
    });
  for (auto& t : threads) t.join();
  Profile p(cfg_);
  std::vector<Row> rows;
  std::string why;
  ASSERT_TRUE(read_file(p.path(), machine_fingerprint(cfg_), rows, why)) << why;
  EXPECT_EQ(rows.size(), static_cast<size_t>(kThreads * kEach));
}

TEST_F(ProfileFiles, ForkedWritersLoseNothing) {
  constexpr int kChildren = 4, kEach = 20;
  Profile parent(cfg_);
  const int lib = parent.native_index("lib");
  parent.record(lib, row(class_of(gemm(3, 3, 3)), "native"));
  std::vector<pid_t> pids;
  for (int c = 0; c < kChildren; ++c) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      parent.after_fork_child();
      for (int i = 0; i < kEach; ++i) {
        const uint64_t key = class_of(gemm(1 << c, 1 << (i % 12), 1 << (i / 12 + 6)));
        if (parent.claim(lib, key)) parent.record(lib, row(key, "onednn"));
      }
      std::_Exit(0);
    }
    pids.push_back(pid);
  }
  for (pid_t pid : pids) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  std::vector<Row> rows;
  std::string why;
  ASSERT_TRUE(read_file(parent.path(), machine_fingerprint(cfg_), rows, why)) << why;
  EXPECT_EQ(rows.size(), static_cast<size_t>(1 + kChildren * kEach));
}

TEST_F(ProfileFiles, ADirectoryOthersCanWriteIsNotUsed) {
  const std::string shared = dir_ + "/shared";
  ASSERT_EQ(::mkdir(shared.c_str(), 0777), 0);
  ASSERT_EQ(::chmod(shared.c_str(), 0777), 0);
  cfg_.tune_dir = shared;
  Profile p(cfg_);
  const std::string path = p.path();
  const uint64_t key = class_of(gemm(512, 512, 512));
  const int lib = p.native_index("lib");
  ASSERT_TRUE(p.claim(lib, key));
  p.record(lib, row(key, "openblas"));
  EXPECT_STREQ(p.candidate_name(p.lookup(lib, key)), "openblas");  // kept for this process
  struct stat st;
  EXPECT_NE(::stat(path.c_str(), &st), 0);
}

// Where the program's calls mostly run (by the measured calls' sizes) is its home; a record
// that moves the home sends the classes that went elsewhere back to measurement, once each.
TEST_F(ProfileFiles, ClassesThatLeftTheNewHomeAreMeasuredAgainOnce) {
  Profile p(cfg_);
  const int lib = p.native_index("lib");
  const uint64_t small = class_of(gemm(1024, 10, 256, 'N', 'T')), large = class_of(gemm(1024, 256, 1024));
  EXPECT_EQ(p.home(lib), "");  // nothing measured: the caller treats the program as alone
  Row s = row(small, "onednn");
  s.size = "1024x10x256";
  ASSERT_TRUE(p.claim(lib, small));
  p.record(lib, s);
  EXPECT_EQ(p.home(lib), "onednn");
  Row l = row(large, "native");
  l.size = "1024x256x1024";
  ASSERT_TRUE(p.claim(lib, large));
  p.record(lib, l);
  EXPECT_EQ(p.home(lib), "native");                    // 268M against 2.6M
  EXPECT_EQ(p.lookup(lib, small), Profile::kUnknown);  // measured again at its next call
  EXPECT_STREQ(p.candidate_name(p.lookup(lib, large)), "native");
  // Measured again, it stays with oneDNN: the home does not move back, and it is not sent back a
  // second time when the home moves again.
  ASSERT_TRUE(p.claim(lib, small));
  p.record(lib, s);
  EXPECT_STREQ(p.candidate_name(p.lookup(lib, small)), "onednn");
  Row huge = row(class_of(gemm(4096, 4096, 4096)), "openblas");
  huge.size = "4096x4096x4096";
  ASSERT_TRUE(p.claim(lib, huge.key));
  p.record(lib, huge);
  EXPECT_EQ(p.home(lib), "openblas");
  EXPECT_STREQ(p.candidate_name(p.lookup(lib, small)), "onednn");
  EXPECT_EQ(p.lookup(lib, large), Profile::kUnknown);  // native's large class: once, now
  // Another library's classes are its own.
  EXPECT_EQ(p.home(p.native_index("other")), "");
}

// A trial that ended away from the home: its class goes back to measurement, once; the home is
// counted without the class being judged.
TEST_F(ProfileFiles, AClassIsSentBackToMeasurementOnce) {
  Profile p(cfg_);
  const int lib = p.native_index("lib");
  const uint64_t small = class_of(gemm(1024, 10, 256, 'N', 'T')), large = class_of(gemm(1024, 256, 1024));
  Row s = row(small, "native");  // the measured choice, recorded when its trial began
  s.size = "1024x10x256";
  ASSERT_TRUE(p.claim(lib, small));
  p.record(lib, s);
  p.begin_trial(lib, small);
  Row l = row(large, "native");
  l.size = "1024x256x1024";
  ASSERT_TRUE(p.claim(lib, large));
  p.record(lib, l);
  EXPECT_EQ(p.home(lib), "native");
  EXPECT_EQ(p.home(lib, large), "native");  // the small class alone
  Row only = row(small, "onednn");
  only.size = "1x1x1";
  EXPECT_TRUE(p.measure_again(lib, small));
  EXPECT_EQ(p.lookup(lib, small), Profile::kUnknown);
  EXPECT_EQ(p.home(lib, large), "");  // no longer counted until it is recorded again
  ASSERT_TRUE(p.claim(lib, small));
  p.record(lib, only);
  EXPECT_FALSE(p.measure_again(lib, small));  // once
  EXPECT_STREQ(p.candidate_name(p.lookup(lib, small)), "onednn");
}

// A thread's memo of calls that stay native holds while changes() is what it was when the call
// was routed: every change to where a known class goes counts, a routed call's lookup does not.
TEST_F(ProfileFiles, EveryChangeOfAKnownClassesRouteIsCounted) {
  {
    Profile writer(cfg_);
    const int lib = writer.native_index("lib");
    const uint64_t stored = class_of(gemm(64, 64, 64));
    ASSERT_TRUE(writer.claim(lib, stored));
    writer.record(lib, row(stored, "native"));
  }
  Profile p(cfg_);
  const int lib = p.native_index("lib");
  const uint64_t small = class_of(gemm(1024, 10, 256, 'N', 'T')), large = class_of(gemm(1024, 256, 1024));
  uint32_t seen = p.changes();
  EXPECT_NE(seen, 0u);
  auto changed = [&] {
    const uint32_t now = p.changes();
    const bool moved = now != seen;
    seen = now;
    return moved;
  };
  EXPECT_EQ(p.lookup(lib, small), Profile::kUnknown);
  EXPECT_FALSE(changed());
  ASSERT_TRUE(p.claim(lib, small));  // an unknown class has no memo to void
  EXPECT_FALSE(changed());
  Row s = row(small, "native");
  s.size = "1024x10x256";
  p.record(lib, s);
  EXPECT_TRUE(changed());
  EXPECT_STREQ(p.candidate_name(p.lookup(lib, small)), "native");  // a routed call
  EXPECT_FALSE(changed());
  p.begin_trial(lib, small);
  EXPECT_TRUE(changed());
  p.record(lib, s);  // the trial's end
  EXPECT_TRUE(changed());
  EXPECT_TRUE(p.measure_again(lib, small));
  EXPECT_TRUE(changed());
  ASSERT_TRUE(p.claim(lib, small));
  p.release(lib, small);
  EXPECT_TRUE(changed());
  // The home moves to oneDNN: native's classes are sent back to measurement by that record.
  ASSERT_TRUE(p.claim(lib, large));
  Row l = row(large, "onednn");
  l.size = "1024x256x1024";
  p.record(lib, l);
  EXPECT_TRUE(changed());
  // A class first read from the file.
  EXPECT_STREQ(p.candidate_name(p.lookup(lib, class_of(gemm(64, 64, 64)))), "native");
  EXPECT_TRUE(changed());
  EXPECT_STREQ(p.candidate_name(p.lookup(lib, class_of(gemm(64, 64, 64)))), "native");
  EXPECT_FALSE(changed());
}

TEST_F(ProfileFiles, TheGemmClassesOfACandidateForItsWarmUp) {
  {
    Profile p(cfg_);
    const int lib = p.native_index("lib");
    Row a = row(class_of(gemm(1024, 10, 256, 'N', 'T')), "onednn");
    a.size = "1024x10x256";
    Row b = row(class_of(gemm(64, 64, 64, 'T', 'N', DType::f64)), "openblas");
    b.size = "64x64x64";
    for (Row* r : {&a, &b}) {
      ASSERT_TRUE(p.claim(lib, r->key));
      p.record(lib, *r);
    }
  }
  Profile again(cfg_);  // from the file
  const auto got = again.gemms_for("onednn", 16);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].dtype, DType::f32);
  EXPECT_EQ(got[0].transa, 'N');
  EXPECT_EQ(got[0].transb, 'T');
  EXPECT_EQ(got[0].m, 1024);
  EXPECT_EQ(got[0].n, 10);
  EXPECT_EQ(got[0].k, 256);
  EXPECT_EQ(again.gemms_for("openblas", 16).size(), 1u);
  EXPECT_TRUE(again.gemms_for("openblas", 0).empty());
  EXPECT_TRUE(again.gemms_for("native", 16).empty());
}

TEST_F(ProfileFiles, SettledWhenItHoldsRowsAndNoneIsJudgedAgain) {
  const uint64_t near = class_of(gemm(256, 256, 256)), far = class_of(gemm(512, 512, 512));
  EXPECT_FALSE(Profile(cfg_).settled());  // no file: a first run measures
  {
    Profile p(cfg_);
    const int lib = p.native_index("lib");
    ASSERT_TRUE(p.claim(lib, far));
    p.record(lib, row(far, "onednn"));  // 2x ahead, judged once: settled
  }
  EXPECT_TRUE(Profile(cfg_).settled());
  {
    Profile p(cfg_);
    const int lib = p.native_index("lib");
    ASSERT_TRUE(p.claim(lib, near));
    Row r = row(near, "native");
    r.rates = {{"native", 55}, {"onednn", 56}};  // close: the next processes judge it again
    p.record(lib, r);
  }
  EXPECT_FALSE(Profile(cfg_).settled());
  for (int judge = 2; judge <= kJudges; ++judge) {
    Profile p(cfg_);
    const int lib = p.native_index("lib");
    ASSERT_EQ(p.lookup(lib, near), Profile::kJudgeAgain);
    Row r = row(near, "native");
    r.rates = {{"native", 55}, {"onednn", 56}};
    p.record(lib, r);
  }
  EXPECT_TRUE(Profile(cfg_).settled());  // judged by kJudges processes
}

}  // namespace
}  // namespace sol::autosel::profile
