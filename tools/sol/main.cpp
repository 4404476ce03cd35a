// sol: run programs under libsol and inspect its configuration.
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstring>
#include <string>

#include "tools/sol/commands.hpp"

namespace sol::tools {

int fail(int status, const std::string& message) {
  std::fprintf(stderr, "sol: %s\n", message.c_str());
  return status;
}

std::string find_libsol() {
  char exe[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  std::string dir;
  if (n > 0) {
    exe[n] = '\0';
    dir = exe;
    dir = dir.substr(0, dir.rfind('/'));
  }
  const std::string candidates[] = {dir + "/libsol.so", dir + "/../lib/libsol.so",
                                    std::string(SOL_INSTALL_LIBDIR) + "/libsol.so"};
  for (const auto& c : candidates) {
    char real[PATH_MAX];
    if (!dir.empty() && ::realpath(c.c_str(), real)) return real;
  }
  return {};
}

}  // namespace sol::tools

namespace {

constexpr const char* kUsage =
    "usage: sol <command> [options]\n"
    "\n"
    "  run [--backend B] [--trace] [--trace-dir D] [--verify] [--config F] -- CMD ARGS...\n"
    "                 run CMD with libsol preloaded and these options set\n"
    "  config [--keys]\n"
    "                 the effective configuration, each value with where it came from;\n"
    "                 --keys lists every key with its environment variable, type and default\n"
    "  report PATH [--top N] [--by op|site|api] [--format text|json|csv] [--flamegraph OUT.svg]\n"
    "                 where the time went in a trace directory (all processes and ranks merged)\n"
    "                 or a summary file: per op signature, call site or API; an SVG flame graph\n"
    "  diff A B [--top N] [--format text|json|csv]\n"
    "                 what two surveys do differently: ops and call sites only in one, and the\n"
    "                 call and time deltas of the common ones\n"
    "  backends       each backend: available or why not, what runs the work, which routines\n"
    "                 it takes\n"
    "\n"
    "Environment variables and the TOML file are described in the README and in\n"
    "sol.example.toml.\n";

}  // namespace

int main(int argc, char** argv) {
  using namespace sol::tools;
  if (argc < 2) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  const std::string verb = argv[1];
  Args args(argv + 2, argv + argc);
  if (verb == "-h" || verb == "--help" || verb == "help") {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (verb == "--version") {
    std::printf("sol %s\n", SOL_VERSION);
    return 0;
  }
  if (verb == "run") return cmd_run(args);
  if (verb == "config") return cmd_config(args);
  if (verb == "report") return cmd_report(args);
  if (verb == "backends") return cmd_backends(args);
  if (verb == "diff") return cmd_diff(args);
  return fail(2, "unknown command '" + verb + "' (try: sol --help)");
}
