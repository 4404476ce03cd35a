// sol run: sets SOL_* variables and LD_PRELOAD, then replaces itself with the command.
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

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

int cmd_run(const RunOptions& o) {
  if (!o.backend.empty()) ::setenv("SOL_BACKEND", o.backend.c_str(), 1);
  // A trace directory without tracing would be surprising.
  if (o.trace || !o.trace_dir.empty()) ::setenv("SOL_TRACE", "1", 1);
  if (!o.trace_dir.empty()) ::setenv("SOL_TRACE_DIR", o.trace_dir.c_str(), 1);
  if (o.verify) ::setenv("SOL_VERIFY", "1", 1);
  if (!o.config.empty()) ::setenv("SOL_CONFIG", o.config.c_str(), 1);

  const std::string lib = find_libsol();
  if (lib.empty()) return fail(2, "run: cannot find libsol.so next to this sol or in " SOL_INSTALL_LIBDIR);
  ::setenv("LD_PRELOAD", preload_with(lib).c_str(), 1);

  std::vector<char*> argv;
  for (const auto& a : o.command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  ::execvp(argv[0], argv.data());
  const int err = errno;
  return fail(err == ENOENT ? 127 : 126, "run: cannot run '" + o.command[0] + "': " + std::strerror(err));
}

}  // namespace sol::tools
