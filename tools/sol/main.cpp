// sol: run programs under libsol; show its configuration, its backends and what traces recorded.
//
// The command line is declared here with CLI11: one subcommand per command, its options bound to
// the fields of that command's options struct (commands.hpp). The command runs once the whole line
// has parsed, so every command gets the same --help, the same checks and the same errors: one
// "sol: " line on stderr, with the nearest known word for a misspelt one, and exit status 2.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "config/config.hpp"
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

using namespace sol::tools;

std::string join(const std::vector<std::string>& words, const std::string& separator) {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : separator) + w;
  return out;
}

// " (did you mean 'x'?)" when one of `known` is close enough to `word` to be what was meant.
std::string did_you_mean(const std::string& word, const std::vector<std::string>& known) {
  const std::string nearest = sol::config::nearest(word, known);
  return nearest.empty() || nearest == word ? std::string() : " (did you mean '" + nearest + "'?)";
}

// The example configuration: in the source tree beside this build, else where it is installed.
std::string example_config() {
  for (const char* path : {SOL_SOURCE_DIR "/config/sol.example.toml", SOL_INSTALL_DOCDIR "/sol.example.toml"})
    if (::access(path, R_OK) == 0) return path;
  return "config/sol.example.toml";
}

// The one flag of every view of a trace that shows set-up calls (ir/setup.hpp).
constexpr const char* kMeasuringHelp =
    "count the time auto spent measuring inside calls in their op times (by default it is apart, on a line "
    "of its "
    "own)";

constexpr const char* kSetupHelp =
    "also show set-up calls (oneDNN's descriptors and memory objects, cuBLAS and cuDNN handles...), which "
    "compute nothing";

// Checks of option values. CLI11 reports a failed one as "--option: <message>".

const CLI::Validator kNotEmpty([](std::string& v) { return v.empty() ? "must not be empty" : std::string(); },
                               "");

const CLI::Validator kReadableFile(
    [](std::string& v) {
      return ::access(v.c_str(), R_OK) == 0 ? std::string() : v + ": " + std::strerror(errno);
    },
    "");

// What SOL_BACKEND takes: a backend or a comma list of them, as libsol itself would read it.
const CLI::Validator kBackendList(
    [](std::string& v) {
      sol::config::Config probe;
      std::string problem = sol::config::set_from_text(probe, sol::config::Key::backend, v);
      if (sol::config::taken_partly(problem)) problem.erase(0, sol::config::kPartly.size());  // strict here
      return problem.empty() ? problem : "'" + v + "' " + problem;
    },
    "");

// A count of at least 1, rewritten in decimal: CLI11 alone would accept "-1" as a huge unsigned
// number and read "010" as octal.
const CLI::Validator kPositiveCount(
    [](std::string& v) {
      const bool digits = !v.empty() && v.find_first_not_of("0123456789") == std::string::npos;
      errno = 0;
      const unsigned long long n = digits ? std::strtoull(v.c_str(), nullptr, 10) : 0;
      if (n == 0 || errno == ERANGE) return "'" + v + "' is not a positive number";
      v = std::to_string(n);
      return std::string();
    },
    "");

CLI::Validator one_of(const std::vector<std::string>& names) {
  return CLI::Validator(
      [names](std::string& v) {
        for (const auto& n : names)
          if (v == n) return std::string();
        return "'" + v + "' is not one of " + join(names, ", ") + did_you_mean(v, names);
      },
      "");
}

// An option whose value is one of the names in `choices`, each standing for a value of `out`:
// the help lists the names, a wrong one is reported with them and the nearest.
template <typename T>
CLI::Option* add_choice(CLI::App* cmd, const std::string& name, T& out,
                        const std::vector<std::pair<std::string, T>>& choices, const std::string& help) {
  std::vector<std::string> names;
  for (const auto& c : choices) names.push_back(c.first);
  return cmd
      ->add_option_function<std::string>(
          name,
          [&out, choices](const std::string& v) {
            for (const auto& [n, value] : choices)
              if (v == n) out = value;
          },
          help)
      ->check(one_of(names))
      ->type_name(join(names, "|"));
}

// --top and --format, which report and diff share.
void add_table_options(CLI::App* cmd, TableOptions& o) {
  cmd->add_option("--top", o.top, "rows per table (default: 20 in text, all in json and csv)")
      ->transform(kPositiveCount)
      ->type_name("N");
  add_choice(cmd, "--format", o.format,
             {{"text", Format::text}, {"json", Format::json}, {"csv", Format::csv}},
             "text for people (the default), json or csv for programs");
}

// The help with the usage line first, as usual for Unix commands.
class Help : public CLI::Formatter {
 public:
  Help() {
    label("Usage", "usage");
    label("SUBCOMMAND", "COMMAND");
    column_width(26);
  }

  std::string make_help(const CLI::App* app, std::string name, CLI::AppFormatMode mode) const override {
    if (mode == CLI::AppFormatMode::Sub) return make_expanded(app);
    return make_usage(app, name) + "\n" + make_description(app) + make_positionals(app) +
           make_groups(app, mode) + make_subcommands(app, mode) + "\n" + make_footer(app);
  }

  // Positionals are all required words, which their names and the usage line describe.
  std::string make_option_opts(const CLI::Option* opt) const override {
    return opt->get_positional() ? std::string() : CLI::Formatter::make_option_opts(opt);
  }
};

// "usage: sol report [OPTIONS] PATH": the first line of the command's help.
std::string usage(const CLI::App& cmd) {
  const std::string help = cmd.get_parent() ? cmd.help(cmd.get_parent()->get_name()) : cmd.help();
  return help.substr(0, help.find('\n'));
}

// A word CLI11 could not place: "unknown option '--trce' (did you mean '--trace'?)", "unknown
// command 'reprot' (did you mean 'report'?)", "unexpected argument 'b' (usage: ...)".
std::string unplaced(const CLI::App& cmd, const std::string& word) {
  if (word.size() > 1 && word[0] == '-') {
    const std::string name = word.substr(0, word.find('='));
    std::vector<std::string> known;
    for (const CLI::Option* o : cmd.get_options()) {
      for (const auto& n : o->get_lnames()) known.push_back("--" + n);
      for (const auto& n : o->get_snames()) known.push_back("-" + n);
    }
    return "unknown option '" + name + "'" + did_you_mean(name, known);
  }
  if (!cmd.get_parent()) {
    std::vector<std::string> known;
    for (const CLI::App* c : cmd.get_subcommands({})) known.push_back(c->get_name());
    return "unknown command '" + word + "'" + did_you_mean(word, known);
  }
  return "unexpected argument '" + word + "' (" + usage(cmd) + ")";
}

// A usage error as one "sol: " line that names the command. A word CLI11 could not place is
// reported first, whatever CLI11 threw: a misspelt option is why an argument went missing.
std::string failure_message(const CLI::App* app, const CLI::Error& e) {
  std::string where = "sol: ";
  const CLI::App* cmd = app;
  while (true) {
    std::vector<std::string> left = cmd->remaining();
    std::erase(left, "--");  // kept there as the end of options, which is no error
    if (!left.empty()) return where + unplaced(*cmd, left.front()) + "\n";
    if (cmd->get_subcommands().empty()) break;
    cmd = cmd->get_subcommands().back();
    where += cmd->get_name() + ": ";
  }
  if (cmd == app) {
    std::vector<std::string> names;
    for (const CLI::App* c : app->get_subcommands({})) names.push_back(c->get_name());
    return "sol: no command given: one of " + join(names, ", ") + " (sol --help says more)\n";
  }
  std::string message = where + e.what();
  if (dynamic_cast<const CLI::RequiredError*>(&e)) message += " (" + usage(*cmd) + ")";
  return message + "\n";
}

// Adds a command: its name, its line in sol --help, and the work that runs it once the line parsed.
using AddCommand = std::function<CLI::App*(const char* name, const char* about, std::function<int()> work)>;

// sol run CMD...: the program under libsol, with the options as SOL_* variables.
void add_run(const AddCommand& command, RunOptions& run) {
  CLI::App* run_cmd =
      command("run", "run CMD with libsol preloaded and these options set; exit with its status",
              [&run] { return cmd_run(run); });
  run_cmd
      ->add_option("--backend", run.backend,
                   sol::config::backend_names_text() + ", or a comma list of them (SOL_BACKEND)")
      ->check(kBackendList)
      ->type_name("B");
  run_cmd->add_flag("--trace", run.trace,
                    "record every intercepted call into the trace directory (SOL_TRACE)");
  run_cmd->add_option("--trace-dir", run.trace_dir, "where trace files go (SOL_TRACE_DIR); implies --trace")
      ->check(kNotEmpty)
      ->type_name("D");
  run_cmd->add_flag("--verify", run.verify,
                    "also run redirected calls on native and compare results (SOL_VERIFY)");
  run_cmd->add_option("--config", run.config, "the TOML file to read (SOL_CONFIG)")
      ->check(kReadableFile)
      ->type_name("F");
  // Every word from the first that is not one of the options above (or from after "--") is the
  // program's, untouched. The option takes as many words as there can be, without allowing
  // "extra" ones: CLI11 splits a word like "[a,b]" given to an option that allows them.
  constexpr int kAll = CLI::detail::expected_max_vector_size;
  run_cmd
      ->add_option("CMD", run.command,
                   "the program and its arguments: all from here on (or after --), as given")
      ->required()
      ->expected(kAll, kAll)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  run_cmd->positionals_at_end();
}

// sol config [--keys]
void add_config(const AddCommand& command, ConfigOptions& config) {
  CLI::App* config_cmd = command("config", "the effective configuration, each value with where it came from",
                                 [&config] { return cmd_config(config); });
  config_cmd->add_flag("--keys", config.keys,
                       "list every key: TOML name, environment variable, type, default");
}

// sol report PATH [options]
void add_report(const AddCommand& command, ReportOptions& report) {
  CLI::App* report_cmd = command("report", "where the traced time went: per op signature, call site or API",
                                 [&report] { return cmd_report(report); });
  report_cmd->footer(
      "A trace directory's processes and ranks are merged. To compare two traces: sol diff A B.");
  report_cmd->add_option("PATH", report.path, "a trace directory or a summary file")->required();
  report_cmd->add_flag("--setup", report.setup, kSetupHelp);
  report_cmd->add_flag("--with-measuring", report.with_measuring, kMeasuringHelp);
  add_table_options(report_cmd, report);
  add_choice(report_cmd, "--by", report.by, {{"op", "op"}, {"site", "site"}, {"api", "api"}},
             "rows per op signature (the default), call site or API");
  report_cmd
      ->add_option("--flamegraph", report.flamegraph, "also write an SVG flame graph of the calls to OUT")
      ->check(kNotEmpty)
      ->type_name("OUT.svg");
  report_cmd
      ->add_option("--perfetto", report.perfetto,
                   "also write the calls, with their stacks, as a Perfetto trace (protobuf) to OUT")
      ->check(kNotEmpty)
      ->type_name("OUT.pftrace");
}

// sol diff A B [options]
void add_diff(const AddCommand& command, DiffOptions& diff) {
  CLI::App* diff_cmd =
      command("diff", "what two surveys do differently: ops and call sites only in one, deltas of the rest",
              [&diff] { return cmd_diff(diff); });
  diff_cmd->add_option("A", diff.a, "a trace directory or a summary file")->required();
  diff_cmd->add_option("B", diff.b, "the same, to compare with A")->required();
  diff_cmd->add_flag("--across-apis", diff.across_apis,
                     "match ops by op, dtype and shape alone (sgemm_ with cblas_sgemm), sites by frames alone");
  diff_cmd->add_flag("--setup", diff.setup, kSetupHelp);
  diff_cmd->add_flag("--with-measuring", diff.with_measuring, kMeasuringHelp);
  add_choice(
      diff_cmd, "--rank", diff.rank_total, {{"steady", false}, {"total", true}},
      "rank and show steady-state time, with the calls that did one-time work (a kernel compile, a backend "
      "start, auto's measuring) apart (the default), or total time");
  add_table_options(diff_cmd, diff);
}

// sol backends [--load LIB]
void add_backends(const AddCommand& command, BackendsOptions& backends) {
  CLI::App* backends_cmd =
      command("backends", "each backend: available or why not, what runs the work, which routines it takes",
              [&backends] { return cmd_backends(backends); });
  backends_cmd
      ->add_option("--load", backends.load,
                   "also load LIB (a library in a wheel, say) and list the BLAS names it defines; repeatable")
      ->check(kNotEmpty)
      ->type_name("LIB");
}

// sol tune [options]
void add_tune(const AddCommand& command, TuneOptions& tune) {
  CLI::App* tune_cmd =
      command("tune", "measure ahead of time what auto measures at a program's first calls; show the profile",
              [&tune] { return cmd_tune(tune); });
  tune_cmd->footer(
      "Runs a standard set of BLAS calls (GEMM and GEMV, f32 and f64, the transposes frameworks use) under\n"
      "libsol with auto measuring, cheapest first, then prints the profile. Measurements already in the\n"
      "profile are not repeated. The profile belongs to this machine, its libraries and the environment\n"
      "variables that change their kernels (OPENBLAS_CORETYPE, thread counts): run sol tune as the programs run.");
  tune_cmd->add_flag("--show", tune.show, "print the profile only: each shape class's rates and choice");
  tune_cmd->add_option("--time-limit", tune.time_limit, "stop measuring after this long (default 120)")
      ->check(CLI::PositiveNumber)
      ->type_name("SECONDS");
  tune_cmd->add_flag("--quick", tune.quick, "a few shapes only");
  tune_cmd->add_option("--from", tune.from,
                       "a trace directory or summary (sol run --trace): measure exactly the GEMM and GEMV shape "
                       "classes it met, so that the program routes right from its first call")
      ->check(kNotEmpty)
      ->type_name("RUN");
  tune_cmd->add_option("--library", tune.library, "the BLAS to measure (default libblas.so.3, as programs load it)")
      ->check(kNotEmpty)
      ->type_name("LIB");
  add_choice(tune_cmd, "--format", tune.format, {{"text", Format::text}, {"json", Format::json}},
             "text for people (the default) or json");
}

// sol replay RUN [options]
void add_replay(const AddCommand& command, ReplayOptions& replay) {
  CLI::App* replay_cmd =
      command("replay", "run a traced run's primitive graph again on SOL's backends, without the program",
              [&replay] { return cmd_replay(replay); });
  replay_cmd->footer("Native is the program's own libraries, opened here; each backend of LIST runs after it. docs/replay.md.");
  replay_cmd->add_option("RUN", replay.run, "a trace directory, one of its runs, or a graph file")->required();
  replay_cmd->add_option("--backend", replay.backend, "backends to replay on after native: a comma list")
      ->check(kBackendList)
      ->type_name("LIST");
  replay_cmd->add_option("--repeat", replay.repeat, "passes over the graph; the fastest is reported (default 1)")
      ->transform(kPositiveCount)
      ->type_name("N");
  replay_cmd->add_flag("--check", replay.check, "compare each node a backend ran with native (verify's tolerances)");
  add_choice(replay_cmd, "--lazy", replay.lazy, {{"1", true}, {"0", false}},
             "device backends defer nodes and keep data resident (1, the default) or run each at once (0)");
  add_choice(replay_cmd, "--format", replay.format, {{"text", Format::text}, {"json", Format::json}},
             "text for people (the default) or json");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("Runs programs under libsol; shows its configuration, its backends and what traces recorded.",
               "sol");
  // Subcommands inherit these when they are added.
  app.formatter(std::make_shared<Help>());
  app.failure_message(failure_message);
  app.set_help_flag("-h,--help", "print this help and exit");
  app.set_version_flag("--version", "sol " SOL_VERSION, "print the version and exit");
  app.require_subcommand(1);

  int status = 0;
  // Adds a command; once the line has parsed, `work` runs it and main returns its exit status.
  const AddCommand command = [&](const char* name, const char* about, std::function<int()> work) {
    CLI::App* cmd = app.add_subcommand(name, about)->group("Commands");
    cmd->callback([&status, work] { status = work(); });
    return cmd;
  };

  // The options live here, as long as the parse and the command that runs.
  RunOptions run;
  ConfigOptions config;
  ReportOptions report;
  DiffOptions diff;
  BackendsOptions backends;
  TuneOptions tune;
  ReplayOptions replay;
  add_run(command, run);
  add_config(command, config);
  add_report(command, report);
  add_diff(command, diff);
  add_backends(command, backends);
  add_tune(command, tune);
  add_replay(command, replay);

  // Set last, so that the commands do not inherit it.
  app.footer(
      "'sol COMMAND --help' describes a command. Environment variables and the TOML file are described\n"
      "in docs/configuration.md and in " +
      example_config() + ", which lists every key.");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // Help and version exit 0; every usage error 2, whatever CLI11's code for it.
    return app.exit(e) == 0 ? 0 : 2;
  }
  return status;
}
