// The commands of the sol tool. main.cpp parses the command line (CLI11) into a command's
// options struct, checking every value it can; cmd_* then does the work and returns the exit
// status.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace sol::tools {

// sol run [options] [--] CMD ARGS...
struct RunOptions {
  std::string backend;               // SOL_BACKEND, a valid backend list; "": leave it as it is
  bool trace = false;                // SOL_TRACE=1
  std::string trace_dir;             // SOL_TRACE_DIR, implies trace; "": leave it as it is
  bool verify = false;               // SOL_VERIFY=1
  std::string config;                // SOL_CONFIG, a readable file; "": leave it as it is
  std::vector<std::string> command;  // the program and its arguments, as given; not empty
};

// sol config [--keys]
struct ConfigOptions {
  bool keys = false;  // every key with its environment variable, type and default, not the values
};

enum class Format { text, json, csv };

// What sol report and sol diff share: how their tables are printed.
struct TableOptions {
  size_t top = 0;  // rows per table; 0: the format's default (20 for text, all for json and csv)
  Format format = Format::text;

  size_t limit() const { return top != 0 ? top : format == Format::text ? 20 : SIZE_MAX; }
};

// sol report PATH [options]
struct ReportOptions : TableOptions {
  std::string path;        // a trace directory or a summary file
  std::string by = "op";   // op, site or api
  std::string flamegraph;  // the SVG file to write; "": none
  std::string perfetto;    // the Perfetto trace to write; "": none
  bool setup = false;      // show set-up calls (ir/setup.hpp; hidden by default: they compute nothing)
  bool with_measuring = false;  // count auto's measuring in the op times (apart by default)
};

// sol diff A B [options]
struct DiffOptions : TableOptions {
  std::string a, b;          // each a trace directory or a summary file
  bool across_apis = false;  // match ops by op, dtype and shape alone, sites by frames alone
  bool setup = false;        // show set-up calls (hidden by default, as in sol report)
  bool rank_total = false;   // rank and show total time; default: steady-state time (first calls apart)
  bool with_measuring = false;  // as in sol report
};

// sol backends
struct BackendsOptions {
  std::vector<std::string> load;  // more libraries to list the BLAS names of (a wheel's, say)
};

// sol tune [--show] [options]
struct TuneOptions {
  bool show = false;                    // print the profile instead of measuring
  double time_limit = 120;              // seconds of measuring, after which the rest waits for a next run
  bool quick = false;                   // a few shapes only (tests, a first look)
  std::string library = "libblas.so.3";  // the BLAS whose calls are measured, as programs load it
  std::string from;                      // a traced run: the shape classes it met instead of the standard set
  Format format = Format::text;
};

// sol replay RUN [options]
struct ReplayOptions {
  std::string run;         // a trace directory, one of its runs, or a graph file
  std::string backend;     // a valid backend list, replayed after native; "": native only
  size_t repeat = 1;       // passes over each graph; the fastest is reported
  bool check = false;      // compare each node a backend ran with native (verify's tolerances)
  bool lazy = true;        // SOL_LAZY for device backends
  Format format = Format::text;
};

int cmd_run(const RunOptions& options);
int cmd_replay(const ReplayOptions& options);
int cmd_tune(const TuneOptions& options);
int cmd_config(const ConfigOptions& options);
int cmd_report(const ReportOptions& options);
int cmd_diff(const DiffOptions& options);
int cmd_backends(const BackendsOptions& options);

// Prints "sol: <message>" to stderr; returns `status` for `return fail(2, ...)`.
int fail(int status, const std::string& message);

// Path of libsol.so next to this executable (build tree) or in the install tree; "" if none.
std::string find_libsol();

}  // namespace sol::tools
