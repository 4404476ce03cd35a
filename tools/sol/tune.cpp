// sol tune: measure ahead of time what auto would measure at a program's first calls, and show
// the profile those measurements live in (auto/profile.hpp).
#include <dirent.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "auto/profile.hpp"
#include "config/config.hpp"
#include "tools/sol/commands.hpp"
#include "tools/sol/output.hpp"
#include "tools/sol/survey.hpp"

namespace sol::tools {
namespace {

namespace profile = autosel::profile;

std::string find_driver() {
  const std::string lib = find_libsol();
  if (lib.empty()) return {};
  const std::string dir = lib.substr(0, lib.rfind('/'));
  for (const std::string& c : {dir + "/sol-tune-driver", dir + "/../libexec/sol/sol-tune-driver"})
    if (::access(c.c_str(), X_OK) == 0) return c;
  return {};
}

// "sgemm" from the class text's op and element type.
std::string routine_of(uint64_t key) {
  const std::string text = profile::class_text(key);
  const std::string op = text.substr(0, text.find(' '));
  const std::string dtype = text.substr(op.size() + 1, text.find(' ', op.size() + 1) - op.size() - 1);
  const char letter = dtype == "f32" ? 's' : dtype == "f64" ? 'd' : dtype == "c64" ? 'c' : dtype == "c128" ? 'z' : '?';
  return std::string(1, letter) + op;
}

// The class text without its op and element type: "transa=N transb=T m=256 n=256 k=64".
std::string shape_of(uint64_t key) {
  const std::string text = profile::class_text(key);
  const size_t second = text.find(' ', text.find(' ') + 1);
  return second == std::string::npos ? "" : text.substr(second + 1);
}

// Other machines', builds' or environments' profiles in the same directory.
int other_profiles(const std::string& dir, const std::string& mine) {
  int n = 0;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      if (name.rfind("profile-", 0) == 0 && name.size() > 4 && name.compare(name.size() - 4, 4, ".tsv") == 0 &&
          dir + "/" + name != mine)
        ++n;
    }
    ::closedir(d);
  }
  return n;
}

// The value of "name=" in a trace shape ("m=256 n=64 k=128 transa=N transb=T layout=row"), "" if absent.
std::string shape_field(const std::string& shape, const std::string& name) {
  const size_t at = (" " + shape).find(" " + name + "=");
  if (at == std::string::npos) return "";
  const size_t from = at + name.size() + 1, end = shape.find(' ', from);
  return shape.substr(from, end == std::string::npos ? std::string::npos : end - from);
}

// The tune driver's --shape arguments for the GEMM and GEMV calls a survey met (the routines it
// calls: the Fortran ones and CBLAS's, f32 and f64), one per distinct shape. `skipped`: how many of
// the survey's other computing signatures it cannot call.
std::vector<std::string> shapes_from(const Survey& survey, int& skipped) {
  std::vector<std::string> out;
  skipped = 0;
  for (const auto& [k, stats] : survey.ops) {
    const bool gemm = k.op == "gemm", gemv = k.op == "gemv";
    const bool real = k.dtype == "f32" || k.dtype == "f64";
    const bool blas = k.api == "blas" || k.api == "cblas";
    if (!(gemm || gemv) || !real || !blas) {
      if (k.api != "dnnl_api" && k.dtype != "none") ++skipped;
      continue;
    }
    const std::string layout = k.symbol.find("cblas") == std::string::npos ? "fortran"
                               : shape_field(k.shape, "layout") == "row" ? "row"
                                                                          : "col";
    const std::string m = shape_field(k.shape, "m"), n = shape_field(k.shape, "n"), kk = shape_field(k.shape, "k");
    std::string trans = shape_field(k.shape, "transa");
    if (gemm) trans += shape_field(k.shape, "transb");
    if (m.empty() || n.empty() || (gemm && kk.empty()) || trans.size() != (gemm ? 2u : 1u)) {
      ++skipped;
      continue;
    }
    const std::string shape = std::string(1, k.dtype == "f32" ? 's' : 'd') + k.op + " " + layout + " " + trans + " " +
                              m + "x" + n + (gemm ? "x" + kk : "");
    if (std::find(out.begin(), out.end(), shape) == out.end()) out.push_back(shape);
  }
  return out;
}

// `measured`: after a measuring run, which wrote the profile: said first.
int show(const config::Config& cfg, Format format, bool measured = false) {
  const profile::Profile prof(cfg, find_libsol());
  if (measured && !prof.path().empty())
    print_written(prof.path(), "this machine's profile, with the measurements");
  const std::string fingerprint = profile::machine_fingerprint(cfg, find_libsol());
  std::vector<profile::Row> rows;
  std::string why;
  const bool have = !prof.path().empty() && profile::read_file(prof.path(), fingerprint, rows, why);
  std::sort(rows.begin(), rows.end(), [](const profile::Row& a, const profile::Row& b) {
    return std::make_tuple(a.native, routine_of(a.key), a.key) < std::make_tuple(b.native, routine_of(b.key), b.key);
  });
  if (format == Format::json) {
    nlohmann::json out = {{"path", prof.path()}, {"fingerprint", fingerprint}, {"rows", nlohmann::json::array()}};
    if (!have) out["problem"] = prof.path().empty() ? "no profile directory" : why;
    for (const auto& r : rows) {
      nlohmann::json rates = nlohmann::json::object();
      for (const auto& rate : r.rates) rates[rate.candidate] = rate.gflops;
      out["rows"].push_back({{"native", r.native},
                             {"routine", routine_of(r.key)},
                             {"class", shape_of(r.key)},
                             {"measured_at", r.size},
                             {"gflops", rates},
                             {"choice", r.choice},
                             {"processes", r.judged},
                             {"figures", profile::how_name(r.how)}});
    }
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  if (prof.path().empty()) return fail(1, "tune: no profile directory (set HOME, XDG_CACHE_HOME or tune.dir)");
  if (!have) {
    std::printf("No profile for this machine and configuration yet (%s: %s).\n", prof.path().c_str(), why.c_str());
    std::printf("`sol tune` measures a standard set of shapes; any program under libsol with auto adds the ones it calls.\n");
    if (const int others = other_profiles(config::cache_dir(cfg), prof.path()))
      std::printf("%d profile(s) of other machines, library builds or environments are in %s.\n", others,
                  config::cache_dir(cfg).c_str());
    return 0;
  }
  std::printf(
      "Profile %s (%zu shape classes; rates in GFLOP/s, measured at the size shown: each candidate's best\n"
      "in the processes that judged the class)\n",
      prof.path().c_str(), rows.size());
  // One table per native library, each column as wide as its longest cell.
  std::string native;
  std::optional<TextTable> table;
  bool kept = false;  // a choice shown with '*'
  for (const auto& r : rows) {
    if (r.native != native) {
      if (table) table->print(stdout);
      native = r.native;
      std::printf("\nnative library %s\n", native.substr(0, native.find(':')).c_str());
      table.emplace(std::vector<std::string>{"routine", "shape class", "measured at", "candidates", "choice",
                                             "processes", "figures"},
                    std::vector<bool>{true, true, true, true, true, false, true});
    }
    std::string rates;
    for (const auto& rate : r.rates) {
      char b[64];
      std::snprintf(b, sizeof b, "%s%s %.1f", rates.empty() ? "" : ", ", rate.candidate.c_str(), rate.gflops);
      rates += b;
    }
    // Behind another candidate's rate: the program's home, kept while a trial in use against it
    // was still to end (a race beside home's threads is not taken at its word).
    const bool behind = profile::unconfirmed(r);
    kept = kept || behind;
    table->add({routine_of(r.key), shape_of(r.key), r.size, rates, r.choice + (behind ? "*" : ""),
                std::to_string(r.judged), profile::how_name(r.how)});
  }
  if (table) table->print(stdout);
  // Notes as paragraphs, wrapped, their lines after the first indented.
  const auto note = [](const std::string& text) {
    const std::vector<std::string> lines = wrap(text, 98);
    std::printf("\n");
    for (size_t i = 0; i < lines.size(); ++i) std::printf("%s%s\n", i ? "  " : "", lines[i].c_str());
  };
  if (kept)
    note(
        "* Kept although another candidate raced faster: a race run beside the program's own threads is not "
        "taken at its word, and the process ended before that candidate's trial in real calls could confirm "
        "it. Later processes try it, until " +
        std::to_string(profile::kJudges) + " have judged the class.");
  note(
      "figures: calm (a race nothing known disturbed), trial (the calls of a trial in use), tuned (sol tune, "
      "which programs never replace), provisional (a race while the process started or beside a busy pool: "
      "measured again once calm)");
  if (const int others = other_profiles(config::cache_dir(cfg), prof.path()))
    std::printf("\n%d more profile(s) in %s belong to other machines, library builds or environments.\n",
                others, config::cache_dir(cfg).c_str());
  return 0;
}

}  // namespace

int cmd_tune(const TuneOptions& o) {
  const config::Config cfg = config::load();
  if (o.show) return show(cfg, o.format);
  if (!cfg.tune) return fail(2, "tune: measurement is off (SOL_TUNE=0 or tune.measure = false)");
  const std::string lib = find_libsol(), driver = find_driver();
  if (lib.empty()) return fail(2, "tune: cannot find libsol.so next to this sol or in " SOL_INSTALL_LIBDIR);
  if (driver.empty()) return fail(2, "tune: cannot find sol-tune-driver next to libsol.so");
  std::vector<std::string> shapes;
  if (!o.from.empty()) {
    std::string error;
    const std::optional<Survey> survey = load_survey(o.from, error);
    if (!survey) return fail(2, "tune: " + error);
    int skipped = 0;
    shapes = shapes_from(*survey, skipped);
    if (shapes.empty()) return fail(2, "tune: " + o.from + " has no GEMM or GEMV calls to measure");
    std::fprintf(stderr, "sol: tune: %zu shapes from %s%s\n", shapes.size(), o.from.c_str(),
                 skipped ? (" (" + std::to_string(skipped) + " other signatures: not GEMM or GEMV)").c_str() : "");
  }
  const pid_t pid = ::fork();
  if (pid < 0) return fail(1, std::string("tune: fork: ") + std::strerror(errno));
  if (pid == 0) {
    // auto measures each new class at its first call; the rest of the environment (the
    // OPENBLAS_* variables above all) is the user's, as in the programs the profile is for.
    ::setenv("LD_PRELOAD", lib.c_str(), 1);
    ::setenv("SOL_BACKEND", "auto", 1);
    ::unsetenv("SOL_TRACE");
    ::unsetenv("SOL_VERIFY");
    const std::string limit = std::to_string(o.time_limit);
    std::vector<const char*> argv = {driver.c_str(), "--library", o.library.c_str(), "--time-limit", limit.c_str()};
    if (o.quick) argv.push_back("--quick");
    for (const std::string& shape : shapes) {
      argv.push_back("--shape");
      argv.push_back(shape.c_str());
    }
    argv.push_back(nullptr);
    ::execv(driver.c_str(), const_cast<char* const*>(argv.data()));
    std::fprintf(stderr, "sol: tune: cannot run %s: %s\n", driver.c_str(), std::strerror(errno));
    std::_Exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return fail(1, "tune: the measuring run failed" +
                       (WIFSIGNALED(status) ? std::string(" (signal ") + std::to_string(WTERMSIG(status)) + ")"
                                            : " (exit status " + std::to_string(WEXITSTATUS(status)) + ")"));
  return show(cfg, o.format, true);
}

}  // namespace sol::tools
