// The TOML half of the loader, kept apart because TOML++ is a heavy header: one translation unit
// compiles it.
#pragma once

#include <string>

#include "config/config.hpp"

namespace sol::config {

// Reads a whole file. On failure returns false and sets `error` to strerror's text.
bool read_file(const std::string& path, std::string& text, std::string& error);

// "" when a [[route]] rule names a known op, dtype and backend and a sane flops range, else the
// problem (config.cpp).
std::string check_route(const RouteRule& rule);

// Applies the keys of a parsed TOML document to `cfg`, recording sources and problems.
// `how_to_trust` empty: the file may set every key. Otherwise its trusted keys are refused, each
// with one problem that ends with this advice.
void load_toml(Config& cfg, const std::string& path, const std::string& text,
               const std::string& how_to_trust);

}  // namespace sol::config
