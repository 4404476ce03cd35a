// common/cpu and common/openblas_core: the instruction level of every core name OpenBLAS reports,
// the core chosen for synthetic CPUs, and the check of the system's OpenBLAS, run in a helper
// process (openblas_probe) under a chosen OPENBLAS_CORETYPE.
#include "common/cpu.hpp"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

#include "common/openblas_core.hpp"

namespace sol {
namespace {

using cpu::Isa;
using openblas_core::best_core;
using openblas_core::core_isa;

TEST(OpenBlasCoreIsa, EveryNameOpenBlas0321Reports) {
  // driver/others/dynamic.c, corename[], of OpenBLAS 0.3.21 (and SapphireRapids of later ones).
  const std::map<std::string, Isa> expected = {
      {"Katmai", Isa::sse2},       {"Coppermine", Isa::sse2},
      {"Northwood", Isa::sse2},    {"Prescott", Isa::sse3},
      {"Banias", Isa::sse2},       {"Atom", Isa::sse3},
      {"Core2", Isa::sse3},        {"Penryn", Isa::sse3},
      {"Dunnington", Isa::sse3},   {"Nehalem", Isa::sse3},
      {"Athlon", Isa::sse2},       {"Opteron", Isa::sse2},
      {"Opteron_SSE3", Isa::sse3}, {"Barcelona", Isa::sse3},
      {"Nano", Isa::sse3},         {"Sandybridge", Isa::avx},
      {"Bobcat", Isa::sse3},       {"Bulldozer", Isa::avx},
      {"Piledriver", Isa::avx},    {"Haswell", Isa::avx2},
      {"Steamroller", Isa::avx},   {"Excavator", Isa::avx},
      {"Zen", Isa::avx2},          {"SkylakeX", Isa::avx512},
      {"Cooperlake", Isa::avx512}, {"SapphireRapids", Isa::avx512},
  };
  for (const auto& [name, isa] : expected) EXPECT_EQ(core_isa(name), isa) << name;
}

TEST(OpenBlasCoreIsa, IgnoresCaseAndRejectsUnknownNames) {
  EXPECT_EQ(core_isa("HASWELL"), Isa::avx2);  // single-target builds report their TARGET
  EXPECT_EQ(core_isa("sandybridge"), Isa::avx);
  EXPECT_EQ(core_isa("skylakex"), Isa::avx512);
  EXPECT_EQ(core_isa("Unknown"), Isa::unknown);
  EXPECT_EQ(core_isa(""), Isa::unknown);
  EXPECT_EQ(core_isa("POWER9"), Isa::unknown);
  EXPECT_EQ(core_isa("Zen2"), Isa::unknown);
}

cpu::Info synthetic(const char* vendor, Isa isa) {
  cpu::Info c;
  c.vendor = vendor;
  c.isa = isa;
  c.sse3 = isa >= Isa::sse3;
  c.avx = c.os_avx = isa >= Isa::avx;
  c.avx2 = c.fma = isa >= Isa::avx2;
  c.avx512f = c.avx512dq = c.avx512cd = c.avx512bw = c.avx512vl = c.os_avx512 = isa >= Isa::avx512;
  return c;
}

TEST(OpenBlasBestCore, SyntheticCpus) {
  cpu::Info xeon = synthetic("GenuineIntel", Isa::avx512);
  EXPECT_EQ(best_core(xeon), "SkylakeX");
  xeon.avx512_bf16 = true;
  EXPECT_EQ(best_core(xeon), "Cooperlake");
  cpu::Info genoa = synthetic("AuthenticAMD", Isa::avx512);
  EXPECT_EQ(best_core(genoa), "SkylakeX");
  EXPECT_EQ(best_core(synthetic("AuthenticAMD", Isa::avx2)), "Zen");
  EXPECT_EQ(best_core(synthetic("HygonGenuine", Isa::avx2)), "Zen");
  EXPECT_EQ(best_core(synthetic("GenuineIntel", Isa::avx2)), "Haswell");
  EXPECT_EQ(best_core(synthetic("GenuineIntel", Isa::avx)), "Sandybridge");
  EXPECT_EQ(best_core(synthetic("AuthenticAMD", Isa::avx)), "Sandybridge");
  EXPECT_EQ(best_core(synthetic("GenuineIntel", Isa::sse3)), "Prescott");
  EXPECT_EQ(best_core(synthetic("GenuineIntel", Isa::sse2)), "");
  EXPECT_EQ(best_core(synthetic("GenuineIntel", Isa::unknown)), "");
}

TEST(OpenBlasBestCore, FitsTheLevelItIsFor) {
  for (const char* vendor : {"GenuineIntel", "AuthenticAMD"})
    for (Isa isa : {Isa::sse3, Isa::avx, Isa::avx2, Isa::avx512})
      EXPECT_EQ(core_isa(best_core(synthetic(vendor, isa))), isa) << vendor << " " << cpu::isa_name(isa);
}

TEST(CpuInfo, LevelAgreesWithTheFeatureBits) {
  const cpu::Info& c = cpu::info();
  EXPECT_FALSE(c.vendor.empty());
  EXPECT_GE(c.cpus, 1);
  ASSERT_GE(c.isa, Isa::sse2);
  EXPECT_EQ(c.isa >= Isa::sse3, c.sse3);
  EXPECT_EQ(c.isa >= Isa::avx, c.sse3 && c.avx && c.os_avx);
  EXPECT_EQ(c.isa >= Isa::avx2, c.isa >= Isa::avx && c.avx2 && c.fma);
  EXPECT_EQ(c.isa >= Isa::avx512, c.isa >= Isa::avx2 && c.avx512f && c.avx512cd && c.avx512bw && c.avx512dq &&
                                      c.avx512vl && c.os_avx512);
  EXPECT_EQ(&c, &cpu::info()) << "computed once";
}

// Runs openblas_probe with OPENBLAS_CORETYPE and SOL_TEST_CPU_MODEL as given ("" leaves them
// unset); its key=value lines, plus "status".
std::map<std::string, std::string> probe(const std::string& coretype, const std::string& model = "") {
  std::string cmd = "env -u OPENBLAS_CORETYPE -u SOL_TEST_CPU_MODEL";
  if (!coretype.empty()) cmd += " OPENBLAS_CORETYPE='" + coretype + "'";
  if (!model.empty()) cmd += " SOL_TEST_CPU_MODEL='" + model + "'";
  cmd += " '" SOL_OPENBLAS_PROBE "'";
  std::map<std::string, std::string> out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  char line[4096];
  while (std::fgets(line, sizeof line, p)) {
    std::string l(line);
    if (!l.empty() && l.back() == '\n') l.pop_back();
    const size_t eq = l.find('=');
    if (eq != std::string::npos) out[l.substr(0, eq)] = l.substr(eq + 1);
  }
  const int status = pclose(p);
  out["status"] = std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  return out;
}

// Skips the calling test unless the system has an OpenBLAS.
#define NEED_OPENBLAS(r)                                                          \
  do {                                                                            \
    if (r["status"] == "2") GTEST_SKIP() << "no system OpenBLAS: " << r["error"]; \
    ASSERT_EQ(r["status"], "0") << r["error"];                                    \
  } while (0)

TEST(OpenBlasCheck, SystemOpenBlasAsItLoads) {
  auto r = probe("");
  NEED_OPENBLAS(r);
  EXPECT_EQ(r["library"].front(), '/') << "a real path: " << r["library"];
  EXPECT_NE(r["config"].find("OpenBLAS"), std::string::npos) << r["config"];
  // Whatever it picked here (on some CPUs 0.3.21 picks Prescott), the verdict follows the levels.
  const bool below = core_isa(r["core"]) != Isa::unknown && core_isa(r["core"]) < cpu::info().isa;
  EXPECT_EQ(r["below_par"], below ? "1" : "0") << r["core"] << " on " << cpu::isa_name(cpu::info().isa);
  EXPECT_EQ(r["fix"].empty(), !below) << r["fix"];
}

TEST(OpenBlasCheck, SystemOpenBlasOnPrescottKernelsIsBelowPar) {
  const std::string best = best_core(cpu::info());
  if (cpu::info().isa <= Isa::sse3)
    GTEST_SKIP() << "this CPU is only " << cpu::isa_name(cpu::info().isa)
                 << ": Prescott kernels are its best";
  auto r = probe("Prescott");
  NEED_OPENBLAS(r);
  EXPECT_EQ(r["core"], "Prescott");
  EXPECT_EQ(r["core_isa"], "SSE3");
  EXPECT_EQ(r["below_par"], "1");
  // Debian's 0.3.21 has every family, but takes OPENBLAS_CORETYPE=Cooperlake only from 0.3.22 on.
  const std::string expected =
      best == "Cooperlake" && r["config"].find("OpenBLAS 0.3.21") == 0 ? "SkylakeX" : best;
  EXPECT_EQ(r["best"], expected);
  EXPECT_EQ(r["fix"], "set OPENBLAS_CORETYPE=" + expected + " (this CPU has " +
                          cpu::isa_name(cpu::info().isa) + "; OpenBLAS runs its Prescott kernels)");
}

TEST(OpenBlasCheck, TheFixedCoreIsTheOneOpenBlasReports) {
  // What best_core() names for each level must be a name this OpenBLAS takes and then reports
  // (loading kernels the CPU lacks is harmless: only running them is not).
  for (const char* vendor : {"GenuineIntel", "AuthenticAMD"})
    for (Isa isa : {Isa::sse3, Isa::avx, Isa::avx2, Isa::avx512}) {
      const std::string name = best_core(synthetic(vendor, isa));
      auto r = probe(name);
      NEED_OPENBLAS(r);
      EXPECT_EQ(r["core"], name) << "OPENBLAS_CORETYPE=" << name;
    }
}

TEST(OpenBlasSpin, TicksOfItsTimeoutAtTheCountersRate) {
  // The counter's rate is timed over the process's life from 20 ms on (a longer sleep on a loaded
  // machine only times it over more); the bounds hold for any counter between 0.5 and 6 GHz.
  ::usleep(25000);
  ::unsetenv("OPENBLAS_THREAD_TIMEOUT");
  const double ns = static_cast<double>(openblas_core::spin_ns());
  // 2^28 ticks, a tenth more: 0.05-0.6 s for any counter between 0.5 and 6 GHz.
  EXPECT_GT(ns, 0.05e9);
  EXPECT_LT(ns, 0.6e9);
  const auto with = [](const char* timeout) {
    ::setenv("OPENBLAS_THREAD_TIMEOUT", timeout, 1);
    const double v = static_cast<double>(openblas_core::spin_ns());
    ::unsetenv("OPENBLAS_THREAD_TIMEOUT");
    return v;
  };
  // The same rate, timed again a little later: within a percent.
  EXPECT_NEAR(with("20") * 256, ns, ns * 0.01);
  EXPECT_NEAR(with("2"), with("4"), with("4") * 0.01);  // clamped to 4..30, as OpenBLAS does
  EXPECT_NEAR(with("31"), with("30"), with("30") * 0.01);
  EXPECT_NEAR(with("0"), ns, ns * 0.01);  // 0 and garbage: the default
  EXPECT_NEAR(with("x"), ns, ns * 0.01);
}

TEST(CpuInfo, TestModelOverride) {
  auto r = probe("", "Test CPU 9000");
  EXPECT_EQ(r["model"], "Test CPU 9000");
}

}  // namespace
}  // namespace sol
