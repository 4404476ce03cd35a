// The verbs of the sol command. Each takes the arguments after the verb and returns the exit status.
#pragma once

#include <string>
#include <vector>

namespace sol::tools {

using Args = std::vector<std::string>;

int cmd_run(const Args& args);
int cmd_config(const Args& args);
int cmd_report(const Args& args);
int cmd_diff(const Args& args);
int cmd_backends(const Args& args);

// Prints "sol: <message>" to stderr; returns `status` for `return fail(2, ...)`.
int fail(int status, const std::string& message);

// Path of libsol.so next to this executable (build tree) or in the install tree; "" if none.
std::string find_libsol();

}  // namespace sol::tools
