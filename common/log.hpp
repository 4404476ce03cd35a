// stderr diagnostics. Every line starts with "sol: " and is written with one write(2), so lines
// from several threads or processes never interleave and a line survives a crash right after it.
#pragma once

#include <cstdarg>
#include <string_view>

namespace sol::log {

enum class Level { error = 0, warn = 1, info = 2, debug = 3 };

// Lines above this level are dropped. Defaults to warn until the configuration is read.
void set_level(Level level) noexcept;
Level level() noexcept;
inline bool enabled(Level l) noexcept {
  return static_cast<int>(l) <= static_cast<int>(level());
}

// printf-style; the "sol: " prefix and the trailing newline are added here.
void write(Level level, const char* fmt, ...) noexcept __attribute__((format(printf, 2, 3)));
void vwrite(Level level, const char* fmt, va_list ap) noexcept;

// Like write(), but only the first time a given `cause` is seen in this process: one line per
// distinct cause however often it recurs (a backend that fails on every call, say).
void once(Level level, std::string_view cause, const char* fmt, ...) noexcept
    __attribute__((format(printf, 3, 4)));

}  // namespace sol::log

#define SOL_LOG(lvl, ...)                                                                                    \
  do {                                                                                                       \
    if (::sol::log::enabled(::sol::log::Level::lvl)) ::sol::log::write(::sol::log::Level::lvl, __VA_ARGS__); \
  } while (0)
