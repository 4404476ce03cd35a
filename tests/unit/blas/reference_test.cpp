// The reference backend, reached through capture::blas::with_column_major as the executor
// reaches it, against netlib's libblas.so.3: every BLAS routine SOL intercepts (Fortran, the
// xxxsub_ shims, CBLAS in both layouts, dnnl_sgemm), random valid calls, compared bit for bit:
// every array the call may touch plus slack around it, and the function result.
#include "backends/reference/reference.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <complex>
#include <cstring>
#include <functional>
#include <sstream>
#include <string>

#include "capture/blas/blas.hpp"
#include "cases.hpp"
#include "netlib.hpp"

namespace sol::test {
namespace {

using capture::Api;
using capture::DType;
using capture::Node;
using capture::Op;

// Level 1 calls are cheap and some (nrm2, rotg, rotmg) have many paths: more of them.
int cases_per_layout(int level) {
  return level == 1 ? 2000 : 300;
}

std::atomic<long> g_calls{0};
std::atomic<long> g_routines{0};

// Equal bits, or NaN on both sides: gfortran may order the operands of a commutative operation
// either way, and which of two NaN operands an x86 instruction returns depends on that order.
template <class R>
bool same(R a, R b) {
  return std::memcmp(&a, &b, sizeof a) == 0 || (std::isnan(a) && std::isnan(b));
}

template <class R>
std::string first_difference(const std::vector<unsigned char>& want, const std::vector<unsigned char>& got) {
  if (want.size() != got.size()) return "sizes differ";
  for (size_t i = 0; i + sizeof(R) <= want.size(); i += sizeof(R)) {
    R w, g;
    std::memcpy(&w, want.data() + i, sizeof w);
    std::memcpy(&g, got.data() + i, sizeof g);
    if (!same(w, g)) {
      char text[160];
      std::snprintf(text, sizeof text, "real element %zu: netlib %.17g (%a), reference %.17g (%a)",
                    i / sizeof(R), double(w), double(w), double(g), double(g));
      return text;
    }
  }
  return "";
}

// The function result of the routine, compared in its own type.
std::string ret_difference(const Node& node, DType dtype, const capture::Ret& want, const capture::Ret& got) {
  auto cmp = [&](auto tag) -> std::string {
    using V = decltype(tag);
    V w = want.get<V>(), g = got.get<V>();
    bool ok;
    if constexpr (std::is_integral_v<V>) {
      ok = w == g;
    } else if constexpr (std::is_floating_point_v<V>) {
      ok = same(w, g);
    } else {
      ok = same(w.real(), g.real()) && same(w.imag(), g.imag());
    }
    if (ok) return "";
    std::ostringstream s;
    s << "result: netlib " << w << ", reference " << g;
    return s.str();
  };
  bool dbl = dtype == DType::f64 || dtype == DType::c128;
  switch (node.op) {
    case Op::asum:
    case Op::nrm2:
    case Op::cabs1: return dbl ? cmp(double{}) : cmp(float{});
    case Op::iamax: return cmp(int{});
    case Op::dot: return dbl ? cmp(double{}) : cmp(float{});
    case Op::dotu:
    case Op::dotc: return dbl ? cmp(std::complex<double>{}) : cmp(std::complex<float>{});
    case Op::sdsdot: return cmp(float{});
    case Op::dsdot: return cmp(double{});
    default: return "";
  }
}

class ReferenceBitwise : public ::testing::TestWithParam<Routine> {};

TEST_P(ReferenceBitwise, MatchesNetlib) {
  Netlib& lib = Netlib::get();
  if (!lib.available()) GTEST_SKIP() << "netlib BLAS not available: " << lib.error();
  const Routine& r = GetParam();
  auto backend = backends::reference::create();
  ASSERT_EQ(backend->supports(Node(r.sym, r.op, r.dtype)), hal::Reason::ok);

  std::vector<char> layouts{'C'};
  if (r.api == Api::cblas && r.level > 1) layouts = {'C', 'R'};
  if (r.api == Api::dnnl) layouts = {'R'};
  bool dbl = r.dtype == DType::f64 || r.dtype == DType::c128;
  int compared = 0;
  for (char layout : layouts) {
    for (int i = 0; i < cases_per_layout(r.level); ++i) {
      CaseMaker maker(r, std::hash<std::string>{}(r.name) ^ (uint64_t(layout) << 32) ^ uint64_t(i));
      Case cs = maker.valid(layout);
      Buffers want = cs.buffers, got = cs.buffers;
      Node nn = cs.node, rn = cs.node;
      bind(nn, want);
      bind(rn, got);
      if (reference_hangs(nn) || reference_undefined(nn)) continue;
      std::string call = describe(nn) + " [case " + std::to_string(i) + "]";

      const bool valid = capture::blas::check(rn).level == capture::blas::ArgError::none;
      reset_reports();
      capture::Ret expected = lib.call(nn);
      if (first_report().count > 0) {
        // A zero increment netlib rejects; check_test.cpp compares the report itself.
        ASSERT_FALSE(valid) << "netlib rejects " << call << " (info " << first_report().info
                            << "), check() not";
        continue;
      }
      ASSERT_TRUE(valid) << "valid call rejected: " << call;

      auto run = [&](Node& n) { return backend->run(n); };
      ASSERT_EQ(capture::blas::with_column_major(rn, run), hal::Reason::ok) << call;

      const std::pair<const char*, std::vector<unsigned char> Buffers::*> arrays[] = {
          {"a", &Buffers::a},    {"b", &Buffers::b},         {"c", &Buffers::c},     {"x", &Buffers::x},
          {"y", &Buffers::y},    {"param", &Buffers::param}, {"ra", &Buffers::ra},   {"rb", &Buffers::rb},
          {"rc", &Buffers::rc},  {"rs", &Buffers::rs},       {"rd1", &Buffers::rd1}, {"rd2", &Buffers::rd2},
          {"rx1", &Buffers::rx1}};
      for (const auto& [name, field] : arrays) {
        std::string diff = dbl ? first_difference<double>(want.*field, got.*field)
                               : first_difference<float>(want.*field, got.*field);
        ASSERT_EQ(diff, "") << "array " << name << " of " << call;
      }
      ASSERT_EQ(ret_difference(nn, r.dtype, expected, rn.ret), "") << call;
      ++compared;
    }
  }
  g_calls += compared;
  ++g_routines;
  RecordProperty("compared", compared);
}

std::string routine_name(const ::testing::TestParamInfo<Routine>& info) {
  return info.param.name;
}

INSTANTIATE_TEST_SUITE_P(AllRoutines, ReferenceBitwise, ::testing::ValuesIn(blas_routines()), routine_name);

// Row-major complex calls conjugate the caller's vector in place around the Fortran call; when
// the backend fails, the caller's data must be as it was (the executor then runs the call
// elsewhere).
TEST(WithColumnMajor, UndoesInPlaceConjugationWhenRunFails) {
  const Routine* ctrmv = nullptr;
  for (const Routine& r : blas_routines())
    if (r.name == "cblas_ctrmv") ctrmv = &r;
  ASSERT_NE(ctrmv, nullptr);
  CaseMaker maker(*ctrmv, 7);
  Case cs = maker.valid('R');
  while (cs.node.blas.n < 2) cs = maker.valid('R');
  cs.node.blas.transa = 'C';
  Buffers before = cs.buffers;
  bind(cs.node, cs.buffers);
  int calls = 0;
  auto fail = [&](Node& n) {
    ++calls;
    EXPECT_EQ(n.blas.layout, 'C');
    return hal::Reason::device_error;
  };
  EXPECT_EQ(capture::blas::with_column_major(cs.node, fail), hal::Reason::device_error);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(cs.buffers.x, before.x);
}

// What the backend declines, and why (no netlib counterpart to ask).
TEST(ReferenceBackend, DeclinesWhatIsNotBlas) {
  auto backend = backends::reference::create();
  EXPECT_STREQ(backend->name(), "reference");
  using capture::Sym;
  EXPECT_EQ(backend->supports(Node(Sym::dnnl_primitive_execute, Op::dnnl_execute, DType::none)),
            hal::Reason::not_blas);
  EXPECT_EQ(backend->supports(Node(Sym::dnnl_gemm_u8s8s32, Op::gemm, DType::u8)), hal::Reason::not_blas);
  EXPECT_EQ(backend->supports(Node(Sym::dnnl_sgemm, Op::gemm, DType::f32)), hal::Reason::ok);
  // A Hermitian op on real data, or a real-only op on complex data, is no routine.
  EXPECT_EQ(backend->supports(Node(Sym::chemv_, Op::hemv, DType::f32)), hal::Reason::dtype_unsupported);
  EXPECT_EQ(backend->supports(Node(Sym::ssymv_, Op::symv, DType::c64)), hal::Reason::dtype_unsupported);
}

class Totals : public ::testing::Environment {
 public:
  void TearDown() override {
    if (g_routines > 0) {
      std::printf("[ reference ] %ld calls compared bitwise with netlib over %ld routines\n", g_calls.load(),
                  g_routines.load());
    }
  }
};
const auto* const kTotals = ::testing::AddGlobalTestEnvironment(new Totals);

}  // namespace
}  // namespace sol::test
