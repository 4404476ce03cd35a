// sol run: sets SOL_* variables and LD_PRELOAD, then replaces itself with the command.
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "config/config.hpp"
#include "tools/sol/commands.hpp"

namespace sol::tools {
namespace {

// LD_PRELOAD with libsol first, once.
std::string preload_with(const std::string& lib) {
  const char* cur = std::getenv("LD_PRELOAD");
  std::string out = lib;
  if (!cur) return out;
  std::string rest = cur;
  size_t pos = 0;
  while (pos <= rest.size()) {
    size_t end = rest.find_first_of(": ", pos);
    if (end == std::string::npos) end = rest.size();
    const std::string item = rest.substr(pos, end - pos);
    if (!item.empty() && item != lib) out += ":" + item;
    pos = end + 1;
  }
  return out;
}

}  // namespace

int cmd_run(const Args& args) {
  size_t i = 0;
  auto value = [&](const std::string& opt, std::string& out) -> bool {
    const std::string& a = args[i];
    if (a.size() > opt.size() && a.compare(0, opt.size() + 1, opt + "=") == 0) {
      out = a.substr(opt.size() + 1);
      return true;
    }
    if (a != opt) return false;
    if (i + 1 >= args.size()) {
      out.clear();
      return true;
    }
    out = args[++i];
    return true;
  };

  for (; i < args.size(); ++i) {
    const std::string& a = args[i];
    std::string v;
    if (a == "--") {
      ++i;
      break;
    } else if (value("--backend", v)) {
      config::Config probe;
      const std::string problem = config::set_from_text(probe, config::Key::backend, v);
      if (!problem.empty()) return fail(2, "--backend '" + v + "' " + problem);
      ::setenv("SOL_BACKEND", v.c_str(), 1);
    } else if (a == "--trace") {
      ::setenv("SOL_TRACE", "1", 1);
    } else if (value("--trace-dir", v)) {
      if (v.empty()) return fail(2, "--trace-dir needs a directory");
      ::setenv("SOL_TRACE_DIR", v.c_str(), 1);
      ::setenv("SOL_TRACE", "1", 1);  // a trace directory without tracing would be surprising
    } else if (a == "--verify") {
      ::setenv("SOL_VERIFY", "1", 1);
    } else if (value("--config", v)) {
      if (v.empty()) return fail(2, "--config needs a file");
      if (::access(v.c_str(), R_OK) != 0) return fail(2, "--config " + v + ": " + std::strerror(errno));
      ::setenv("SOL_CONFIG", v.c_str(), 1);
    } else if (!a.empty() && a[0] == '-') {
      return fail(2, "run: unknown option '" + a + "' (options go before --, the command after it)");
    } else {
      break;  // the command itself, without a "--"
    }
  }
  if (i >= args.size()) return fail(2, "run: no command given (sol run [options] -- CMD ARGS...)");

  const std::string lib = find_libsol();
  if (lib.empty()) return fail(2, "run: cannot find libsol.so next to this sol or in " SOL_INSTALL_LIBDIR);
  ::setenv("LD_PRELOAD", preload_with(lib).c_str(), 1);

  std::vector<char*> argv;
  for (size_t j = i; j < args.size(); ++j) argv.push_back(const_cast<char*>(args[j].c_str()));
  argv.push_back(nullptr);
  ::execvp(argv[0], argv.data());
  const int err = errno;
  return fail(err == ENOENT ? 127 : 126, "run: cannot run '" + args[i] + "': " + std::strerror(err));
}

}  // namespace sol::tools
