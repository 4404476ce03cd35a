// capture::blas::check() against what netlib's libblas.so.3 reports through xerbla_ and
// cblas_xerbla for the same call: the level (CBLAS layer or Fortran routine), INFO, the routine
// name, RowMajorStrg and, for the CBLAS layer, the message.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <functional>
#include <string>

#include "capture/blas/blas.hpp"
#include "cases.hpp"
#include "netlib.hpp"

namespace sol::test {
namespace {

using capture::Api;
using capture::BlasArgs;
using capture::DType;
using capture::Node;
using capture::Op;
using capture::blas::ArgError;

std::atomic<long> g_compared{0};
std::atomic<long> g_invalid{0};

int level_of(const ArgError& e) {
  return e.level == ArgError::none    ? Report::none
         : e.level == ArgError::cblas ? Report::cblas
                                      : Report::fortran;
}

// Runs the call on netlib and compares check() with what netlib reported; "" when they agree.
// A valid call computes on `buffers`, which must be large enough for it.
std::string compare_with_netlib(Node node, Buffers& buffers) {
  bind(node, buffers);
  ArgError e = capture::blas::check(node);
  reset_reports();
  Netlib::get().call(node);
  const Report& rep = first_report();
  ++g_compared;
  if (rep.level != Report::none) ++g_invalid;

  std::ostringstream s;
  s << describe(node) << ": netlib ";
  if (rep.level == Report::none) {
    s << "accepts it";
  } else {
    s << (rep.level == Report::cblas ? "cblas_xerbla(" : "xerbla_(") << rep.info << ", \"" << rep.routine
      << "\") RowMajorStrg=" << rep.row_major << " message=\"" << rep.message << "\" value=" << rep.value;
  }
  s << "; check() ";
  if (e.level == ArgError::none) {
    s << "accepts it";
  } else {
    s << (e.level == ArgError::cblas ? "cblas " : "fortran ") << e.info << " \"" << e.routine
      << "\" row_major=" << e.row_major << " message=\"" << e.message << "\" value=" << e.bad_value;
  }
  bool same = level_of(e) == rep.level;
  if (same && rep.level != Report::none) {
    same = e.info == rep.info && rep.routine == e.routine && e.row_major == rep.row_major;
    if (rep.level == Report::cblas) {
      same = same && rep.message == e.message && e.bad_value == rep.value;
    }
  }
  return same ? "" : s.str();
}

// Collects disagreements; reports the first few in full.
class Mismatches {
 public:
  void add(const std::string& what) {
    if (what.empty()) return;
    if (count_++ < 10) ADD_FAILURE() << what;
  }
  int count() const { return count_; }

 private:
  int count_ = 0;
};

std::vector<char> layouts_of(const Routine& r) {
  if (r.api == Api::cblas && r.level > 1) return {'C', 'R', 0};
  return {'C'};
}

class ArgumentChecks : public ::testing::TestWithParam<Routine> {
 protected:
  void SetUp() override {
    if (!Netlib::get().available()) GTEST_SKIP() << "netlib BLAS not available: " << Netlib::get().error();
  }
};

// Valid calls with one argument made invalid (each dimension negative, each leading dimension
// from -1 up to its valid value, each increment 0, each character or enum bad, the layout bad),
// and with two of these at once, which shows the order of the checks.
TEST_P(ArgumentChecks, OneOrTwoBadArguments) {
  const Routine& r = GetParam();
  if (r.level == 1 || r.api == Api::dnnl) GTEST_SKIP() << "level 1 routines check nothing";
  const bool fortran = r.api == Api::blas;
  using Change = std::function<void(BlasArgs&)>;
  std::vector<Change> changes;
  for (int64_t BlasArgs::*f : {&BlasArgs::m, &BlasArgs::n, &BlasArgs::k, &BlasArgs::kl, &BlasArgs::ku}) {
    changes.push_back([f](BlasArgs& b) { b.*f = -1; });
  }
  for (int64_t BlasArgs::*f : {&BlasArgs::incx, &BlasArgs::incy})
    changes.push_back([f](BlasArgs& b) { b.*f = 0; });
  const std::pair<char BlasArgs::*, int32_t*(*)(BlasArgs&)> enums[] = {
      {&BlasArgs::transa, [](BlasArgs& b) { return &b.cblas.transa; }},
      {&BlasArgs::transb, [](BlasArgs& b) { return &b.cblas.transb; }},
      {&BlasArgs::uplo, [](BlasArgs& b) { return &b.cblas.uplo; }},
      {&BlasArgs::side, [](BlasArgs& b) { return &b.cblas.side; }},
      {&BlasArgs::diag, [](BlasArgs& b) { return &b.cblas.diag; }}};
  for (const auto& [f, raw] : enums) {
    changes.push_back([f = f, raw = raw, fortran](BlasArgs& b) {
      b.*f = fortran ? 'X' : 0;
      if (!fortran) *raw(b) = kBadEnum;
    });
  }
  Mismatches bad;
  for (char layout : {'C', 'R'}) {
    if (layout == 'R' && r.api != Api::cblas) continue;
    for (int i = 0; i < 24; ++i) {
      CaseMaker maker(r, std::hash<std::string>{}(r.name) ^ (uint64_t(layout) << 40) ^ uint64_t(i));
      Case base = maker.valid(layout);
      std::vector<Change> all = changes;
      for (int64_t BlasArgs::*f : {&BlasArgs::lda, &BlasArgs::ldb, &BlasArgs::ldc}) {
        for (int64_t v = -1; v < base.node.blas.*f; ++v) all.push_back([f, v](BlasArgs& b) { b.*f = v; });
      }
      if (r.api == Api::cblas) all.push_back([](BlasArgs& b) { b.layout = 0, b.cblas.layout = kBadEnum; });
      for (size_t c1 = 0; c1 < all.size(); ++c1) {
        Node node = base.node;
        all[c1](node.blas);
        Buffers buffers = base.buffers;
        if (!reference_hangs(node)) bad.add(compare_with_netlib(node, buffers));
        size_t c2 = size_t(std::uniform_int_distribution<size_t>(0, all.size() - 1)(maker.rng()));
        all[c2](node.blas);
        buffers = base.buffers;
        if (!reference_hangs(node)) bad.add(compare_with_netlib(node, buffers));
      }
    }
  }
  EXPECT_EQ(bad.count(), 0);
}

// Every argument drawn at random from small ranges that include invalid values.
TEST_P(ArgumentChecks, ArbitraryCalls) {
  const Routine& r = GetParam();
  if (r.api == Api::dnnl) GTEST_SKIP() << "see DnnlSgemm";
  Mismatches bad;
  for (char layout : layouts_of(r)) {
    CaseMaker maker(r, std::hash<std::string>{}(r.name) ^ (uint64_t(layout) << 48));
    Buffers buffers = maker.arbitrary(layout).buffers;
    for (int i = 0; i < 1500; ++i) {
      Node node = maker.arbitrary_call(layout);
      if (reference_hangs(node)) continue;
      bad.add(compare_with_netlib(node, buffers));
    }
  }
  EXPECT_EQ(bad.count(), 0);
}

std::string routine_name(const ::testing::TestParamInfo<Routine>& info) {
  return info.param.name;
}

INSTANTIATE_TEST_SUITE_P(AllRoutines, ArgumentChecks, ::testing::ValuesIn(blas_routines()), routine_name);

// dnnl_sgemm is validated as the column-major SGEMM call of the row-major product. netlib has no
// dnnl_sgemm, but its row-major cblas_sgemm makes exactly that call.
TEST(DnnlSgemm, ValidatedAsTheSwappedSgemm) {
  if (!Netlib::get().available()) GTEST_SKIP() << Netlib::get().error();
  const Routine* dnnl = nullptr;
  for (const Routine& r : blas_routines())
    if (r.api == Api::dnnl) dnnl = &r;
  ASSERT_NE(dnnl, nullptr);
  CaseMaker maker(*dnnl, 11);
  Mismatches bad;
  int rejected = 0;
  for (int i = 0; i < 3000; ++i) {
    Case cs = maker.arbitrary('R');
    static constexpr char kTrans[] = {'N', 'n', 'T', 't'};
    cs.node.blas.transa = kTrans[i % 4];
    cs.node.blas.transb = kTrans[(i / 4) % 4];
    Node node = cs.node;
    bind(node, cs.buffers);
    ArgError e = capture::blas::check(node);
    reset_reports();
    Netlib::get().call(node);  // as cblas_sgemm(CblasRowMajor, ...)
    const Report& rep = first_report();
    if (rep.level == Report::none) {
      if (e.level != ArgError::none) bad.add(describe(node) + ": rejected, netlib accepts it");
      continue;
    }
    ++rejected;
    if (e.level != ArgError::fortran || e.info != rep.info || rep.routine != e.routine) {
      bad.add(describe(node) + ": netlib reports " + std::to_string(rep.info) + ", check() " +
              std::to_string(e.info) + " " + e.routine);
    }
  }
  EXPECT_EQ(bad.count(), 0);
  EXPECT_GT(rejected, 0);
}

// oneDNN accepts only N and T: a conjugate transpose is invalid there, although SGEMM would
// take it. No netlib routine can say so, hence the explicit expectation.
TEST(DnnlSgemm, RejectsConjugateTranspose) {
  Node node(capture::Sym::dnnl_sgemm, Op::gemm, DType::f32);
  BlasArgs& b = node.blas;
  b.layout = 'R';
  b.transa = 'C';
  b.transb = 'N';
  b.m = b.n = b.k = 2;
  b.lda = b.ldb = b.ldc = 2;
  ArgError e = capture::blas::check(node);
  EXPECT_EQ(e.level, ArgError::fortran);
  EXPECT_EQ(e.info, 2);  // TRANSB of SGEMM(transb, transa, n, m, ...)
  b.transa = 'N';
  b.transb = 'c';
  EXPECT_EQ(capture::blas::check(node).info, 1);
}

class Totals : public ::testing::Environment {
 public:
  void TearDown() override {
    if (g_compared > 0) {
      std::printf("[ checks ] %ld calls compared with netlib's argument checks, %ld of them invalid\n",
                  g_compared.load(), g_invalid.load());
    }
  }
};
const auto* const kTotals = ::testing::AddGlobalTestEnvironment(new Totals);

}  // namespace
}  // namespace sol::test
