#include "config/toml_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <string_view>

// No exceptions: a parse error comes back as a value and becomes one "sol: " line.
#define TOML_EXCEPTIONS 0
#include <toml++/toml.h>

#include "common/fs_safety.hpp"

namespace sol::config {
namespace {

std::string where(const std::string& path, const toml::source_region& src) {
  return path + ":" + std::to_string(src.begin.line) + ":" + std::to_string(src.begin.column);
}

const char* toml_type(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::table: return "a table";
    case toml::node_type::array: return "an array";
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a float";
    case toml::node_type::boolean: return "a boolean";
    default: return "a date or time";
  }
}

class Loader {
 public:
  Loader(Config& cfg, const std::string& path, const std::string& how_to_trust)
      : cfg_(cfg), path_(path), how_to_trust_(how_to_trust) {
    for (const auto& k : kKeys)
      if (*k.toml) known_.emplace_back(k.toml);
  }

  void walk(const toml::table& table, const std::string& prefix) {
    for (const auto& [name, node] : table) {
      const std::string key =
          prefix.empty() ? std::string(name.str()) : prefix + "." + std::string(name.str());
      if (const Key* k = find(key)) {
        apply(*k, key, node);
      } else if (key == "route") {
        routes(node);
      } else if (node.is_table() && is_prefix(key)) {
        walk(*node.as_table(), key);
      } else {
        // Point at the key itself, not at its value.
        cfg_.problems.push_back(where(path_, name.source()) + ": unknown key '" + key + "'" +
                                suggestion(key) + "; ignored");
      }
    }
  }

 private:
  const Key* find(const std::string& key) {
    for (size_t i = 0; i < kNumKeys; ++i) {
      if (key == kKeys[i].toml) {
        found_ = static_cast<Key>(i);
        return &found_;
      }
    }
    return nullptr;
  }

  bool is_prefix(const std::string& key) const {
    for (const auto& k : known_)
      if (k.size() > key.size() && k.compare(0, key.size(), key) == 0 && k[key.size()] == '.') return true;
    return false;
  }

  std::string suggestion(const std::string& key) const {
    std::string n = nearest(key, known_);
    return n.empty() ? std::string() : " (did you mean '" + n + "'?)";
  }

  // [[route]]: an array of tables. A rule with any problem is dropped whole, with one line.
  void routes(const toml::node& node) {
    const auto* arr = node.as_array();
    if (!arr || !arr->is_array_of_tables()) {
      problem(node, "route must be an array of tables ([[route]]); ignored");
      return;
    }
    for (const auto& el : *arr) {
      RouteRule rule;
      rule.where = where(path_, el.source());
      std::string error;
      for (const auto& [name, value] : *el.as_table()) {
        const std::string key(name.str());
        if (!error.empty()) break;
        if (key == "op" || key == "dtype" || key == "backend") {
          auto v = value.value_exact<std::string>();
          if (!v) {
            error = "route." + key + " must be a string, not " + std::string(toml_type(value));
          } else {
            (key == "op" ? rule.op : key == "dtype" ? rule.dtype : rule.backend) = *v;
          }
        } else if (key == "min_flops" || key == "max_flops") {
          auto v = value.value<double>();  // an integer or a float
          if (!v || *v < 0) {
            error = "route." + key + " must be a number >= 0";
          } else {
            (key == "min_flops" ? rule.min_flops : rule.max_flops) = *v;
          }
        } else {
          const std::vector<std::string> keys = {"op", "dtype", "backend", "min_flops", "max_flops"};
          const std::string n = nearest(key, keys);
          error = "unknown key 'route." + key + "'" + (n.empty() ? "" : " (did you mean '" + n + "'?)");
        }
      }
      if (error.empty()) error = check_route(rule);
      if (!error.empty()) {
        cfg_.problems.push_back(rule.where + ": " + error + "; this [[route]] is ignored");
        continue;
      }
      cfg_.routes.push_back(std::move(rule));
    }
  }

  void problem(const toml::node& node, const std::string& what) {
    cfg_.problems.push_back(where(path_, node.source()) + ": " + what);
  }

  // The node's value as the text the environment would give, or "" with `type_error` set.
  std::string text_of(Kind kind, const toml::node& node, std::string& type_error) {
    switch (kind) {
      case Kind::boolean:
        if (auto v = node.value_exact<bool>()) return *v ? "1" : "0";
        type_error = "must be true or false";
        return {};
      case Kind::integer:
        if (auto v = node.value_exact<int64_t>()) return std::to_string(*v);
        type_error = "must be an integer";
        return {};
      case Kind::backend_list:
        if (const auto* arr = node.as_array()) {
          std::string joined;
          for (const auto& el : *arr) {
            auto s = el.value_exact<std::string>();
            if (!s) {
              type_error = "must be a string or an array of strings";
              return {};
            }
            joined += (joined.empty() ? "" : ",") + *s;
          }
          return joined;
        }
        [[fallthrough]];
      default:
        if (auto v = node.value_exact<std::string>()) return *v;
        type_error = "must be a string";
        return {};
    }
  }

  void apply(Key key, const std::string& name, const toml::node& node) {
    const KeyInfo& k = info(key);
    if (k.trust == Trust::trusted && !how_to_trust_.empty()) {
      problem(node, name + " is ignored: a sol.toml in the current directory may not make SOL load code (" +
                        how_to_trust_ + ")");
      cfg_.not_taken[static_cast<size_t>(key)] =
          where(path_, node.source()) + " is in the current directory, not trusted";
      return;
    }
    std::string type_error;
    const std::string text = text_of(k.kind, node, type_error);
    if (!type_error.empty()) {
      cfg_.not_taken[static_cast<size_t>(key)] = where(path_, node.source()) + " " + type_error;
      std::string hint;
      // The contract's [backend.NAME] tables cannot coexist with the backend key in TOML.
      if (key == Key::backend && node.is_table())
        hint = " (per-backend settings go in [backends.NAME] tables)";
      problem(node, name + " " + type_error + ", not " + toml_type(node) + hint + "; using the default " +
                        format_value(cfg_, key));
      return;
    }
    Config trial = cfg_;
    std::string p = set_from_text(trial, key, text);
    if (taken_partly(p)) {
      problem(node, name + " = " + text + " " + p.substr(kPartly.size()) + "; using " + format_value(trial, key));
      p.clear();
    }
    if (!p.empty()) {
      cfg_.not_taken[static_cast<size_t>(key)] = where(path_, node.source()) + " " + p;
      problem(node, name + " = " + text + " " + p + "; using the default " + format_value(cfg_, key));
      return;
    }
    trial.problems = std::move(cfg_.problems);
    trial.not_taken = std::move(cfg_.not_taken);
    cfg_ = std::move(trial);
    cfg_.source[static_cast<size_t>(key)] = {Source::file, where(path_, node.source()),
                                             how_to_trust_.empty()};
  }

  Config& cfg_;
  const std::string& path_;
  const std::string& how_to_trust_;
  std::vector<std::string> known_;
  Key found_{};
};

// A parse error as a person would put it, where it has a common cause: a string without its
// closing quote, a key without '=', a key or table given twice, a word without quotes. Other errors
// keep TOML++'s own description. The position is where the mistake is (the string's opening quote,
// the repeated key), which is not always where TOML++ stopped.
struct Malformed {
  size_t line, column;
  std::string what;
};

// The column (1-based) of the quote that opens a string still open at `end` on `line`, or 0.
size_t open_quote(std::string_view line, size_t end) {
  char quote = 0;
  size_t opened = 0;
  for (size_t i = 0; i < end && i < line.size(); ++i) {
    const char c = line[i];
    if (quote == '"' && c == '\\') {
      ++i;
    } else if (quote && c == quote) {
      quote = 0;
    } else if (!quote && (c == '"' || c == '\'')) {
      quote = c;
      opened = i + 1;
    } else if (!quote && c == '#') {
      break;
    }
  }
  return quote ? opened : 0;
}

Malformed malformed(std::string_view text, const toml::parse_error& e) {
  Malformed m{e.source().begin.line, e.source().begin.column, std::string(e.description())};
  // TOML++ says where it was: "Error while parsing key-value pair: expected '=', saw '\n'".
  std::string context, detail = m.what;
  if (m.what.rfind("Error while parsing ", 0) == 0)
    if (const size_t colon = m.what.find(": "); colon != std::string::npos) {
      context = m.what.substr(20, colon - 20);
      detail = m.what.substr(colon + 2);
    }
  std::string_view line = text;
  for (size_t n = 1; n < m.line && !line.empty(); ++n) {
    const size_t nl = line.find('\n');
    line = nl == std::string_view::npos ? std::string_view() : line.substr(nl + 1);
  }
  line = line.substr(0, line.find('\n'));
  const size_t at = m.column > 0 ? m.column - 1 : 0;  // the character TOML++ stopped at
  const bool line_ended = at >= line.size() || line[at] == '\r';
  const size_t indent = std::min(line.find_first_not_of(" \t"), line.size());
  const auto quoted = [&] {  // the last '...' of TOML++'s text: the key it names
    const size_t close = detail.rfind('\'');
    const size_t open =
        close == std::string::npos || close == 0 ? std::string::npos : detail.rfind('\'', close - 1);
    return open == std::string::npos ? std::string("''") : detail.substr(open, close - open + 1);
  };

  if (context.find("string") != std::string::npos &&
      (detail.rfind("encountered end-of-file", 0) == 0 ||
       (detail.find("control characters") != std::string::npos && line_ended))) {
    const char quote = context.find("literal") != std::string::npos ? '\'' : '"';
    const std::string triple(3, quote);
    // A multi-line string left open runs to the end of the file: it opens at the last of an odd
    // number of triple quotes.
    size_t count = 0, last = std::string_view::npos;
    for (size_t i = text.find(triple); i != std::string_view::npos; i = text.find(triple, i + 3))
      ++count, last = i;
    if (count % 2 == 1 && detail.rfind("encountered end-of-file", 0) == 0) {
      const size_t line_start =
          text.rfind('\n', last) == std::string_view::npos ? 0 : text.rfind('\n', last) + 1;
      m.line = 1 + static_cast<size_t>(
                       std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(last), '\n'));
      m.column = last - line_start + 1;
      m.what = "string not closed: this multi-line string needs a closing " + triple +
               " before the end of the file";
    } else {
      if (const size_t opened = open_quote(line, at)) m.column = opened;
      m.what = std::string("string not closed: it needs a closing ") + quote + " before the end of the line";
    }
  } else if (detail.rfind("expected '='", 0) == 0) {
    const std::string key(line.substr(indent, at > indent ? at - indent : 0));
    const size_t end = key.find_last_not_of(" \t");
    m.what = "missing '=' after the key '" + key.substr(0, end == std::string::npos ? 0 : end + 1) + "'";
  } else if (detail.rfind("cannot redefine existing", 0) == 0 && detail.find(" as ") == std::string::npos) {
    // TOML++ points at the value; the repeated key starts the line.
    m.column = indent + 1;
    const std::string name = quoted();
    m.what = context == "table header"
                 ? "duplicate table [" + name.substr(1, name.size() - 2) + "]: each table is opened once"
                 : "duplicate key " + name + ": each key is set once";
  } else if (context == "table header" && detail.rfind("expected ']'", 0) == 0) {
    m.what = "table header not closed: it needs a ']' before the end of the line";
  } else if (detail.rfind("expected value", 0) == 0 && line_ended) {
    m.what = "missing value after '='";
  } else if (const size_t eq = line.find('='); eq != std::string_view::npos && eq < at) {
    // A bare word (log = info): TOML reads it as a number, a boolean or nothing.
    const size_t begin = line.find_first_not_of(" \t", eq + 1);
    const size_t end = std::min(line.find_first_of(" \t#", begin), line.size());
    const std::string word(begin == std::string_view::npos ? std::string_view()
                                                           : line.substr(begin, end - begin));
    const bool bare =
        !word.empty() && std::isalpha(static_cast<unsigned char>(word[0])) &&
        word.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.") ==
            std::string::npos &&
        word != "true" && word != "false" && word != "inf" && word != "nan";
    if (bare) {
      m.column = begin + 1;
      m.what = "the value " + word + " needs quotes: \"" + word + "\"";
    }
  }
  if (m.what.rfind("Error while parsing ", 0) == 0 && !context.empty())
    m.what = detail + " (in the " + context + ")";
  // The architecture document's [backend.NAME] tables cannot live beside the backend key.
  if (detail.find("'backend.") != std::string::npos && detail.find("redefine") != std::string::npos)
    m.what += "; `backend` is the backend list, so per-backend settings go in [backends.NAME] tables";
  return m;
}

}  // namespace

bool read_file(const std::string& path, std::string& text, std::string& error) {
  // A configuration file may be a link (dotfile managers make them); its trust is checked apart.
  return fs_safety::read_file(path, size_t{16} << 20, true, text, error);
}

void load_toml(Config& cfg, const std::string& path, const std::string& text,
               const std::string& how_to_trust) {
  toml::parse_result result = toml::parse(text, path);
  if (!result) {
    const Malformed m = malformed(text, result.error());
    cfg.problems.push_back(path + ":" + std::to_string(m.line) + ":" + std::to_string(m.column) +
                           ": malformed TOML: " + m.what +
                           "; the whole file is ignored (every key keeps its default or environment value)");
    return;
  }
  Loader(cfg, path, how_to_trust).walk(result.table(), "");
}

}  // namespace sol::config
