// A survey's Chrome traces as one Perfetto trace (protobuf, Perfetto's own format), for
// `sol report PATH --perfetto OUT`.
//
// Perfetto's importer of Chrome JSON traces ignores the stackFrames dictionary and the events'
// "sf", which chrome://tracing shows; in its own format a slice can carry its stack
// (TrackEvent.callstack), which the Perfetto UI shows with the slice and trace processor imports.
#pragma once

#include <string>

#include "tools/sol/survey.hpp"

namespace sol::tools {

// Writes every process of `s` that has a trace.json (beside its summary, or read in its place)
// to `path`: a track per process and thread, named as in the trace; each call a slice with its
// arguments (op, dtype, shape, backend, ...) as debug annotations and its stack, outermost frame
// first, Python frames with their file and line; instants (the lazy executor's node completions)
// as instant events; set-up calls (ir/setup.hpp) only with `setup`, as in the report's
// tables. Times are the trace's (microseconds from the process's start) in nanoseconds. Returns
// false with `error` set when no process has a usable trace or the file cannot be written; a
// process whose trace is missing or damaged is a warning in `warnings`.
bool write_perfetto(const Survey& s, const std::string& path, bool setup, std::vector<std::string>& warnings,
                    std::string& error);

}  // namespace sol::tools
