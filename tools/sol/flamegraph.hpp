// An SVG flame graph of a survey's call stacks, self-contained (no script, no external file).
#pragma once

#include <string>

#include "tools/sol/survey.hpp"

namespace sol::tools {

// Writes the flame graph of `s.stacks` to `path`: one rectangle per frame, as wide as its share
// of the time, callers below callees, a <title> tooltip with the frame's name, time and share.
// Returns false with `error` set when the file cannot be written.
bool write_flamegraph(const Survey& s, const std::string& path, std::string& error);

}  // namespace sol::tools
