// Durations and sizes for people: the one format of summary.txt (written by libsol) and `sol report`, so
// that the two read alike.
#pragma once

#include <sys/ioctl.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace sol {

// 812 ns, 15.3 us, 4.27 ms, 1.503 s
inline std::string human_ns(uint64_t ns) {
  char buf[32];
  if (ns < 1000)
    std::snprintf(buf, sizeof buf, "%" PRIu64 " ns", ns);
  else if (ns < 1000000)
    std::snprintf(buf, sizeof buf, "%.1f us", ns / 1e3);
  else if (ns < 1000000000)
    std::snprintf(buf, sizeof buf, "%.2f ms", ns / 1e6);
  else
    std::snprintf(buf, sizeof buf, "%.3f s", ns / 1e9);
  return buf;
}

// 812 B, 15.3 KiB, 4.27 MiB, 1.50 GiB
inline std::string human_bytes(uint64_t bytes) {
  char buf[32];
  if (bytes < 1024)
    std::snprintf(buf, sizeof buf, "%" PRIu64 " B", bytes);
  else if (bytes < (uint64_t{1} << 20))
    std::snprintf(buf, sizeof buf, "%.1f KiB", bytes / 1024.0);
  else if (bytes < (uint64_t{1} << 30))
    std::snprintf(buf, sizeof buf, "%.2f MiB", bytes / 1048576.0);
  else
    std::snprintf(buf, sizeof buf, "%.2f GiB", bytes / 1073741824.0);
  return buf;
}

// The width of the terminal `fd` writes to, 0 when it is no terminal: long lists wrap for people
// at a terminal and stay one line for programs that read them from a pipe or file.
inline size_t terminal_columns(int fd) {
  struct winsize w {};
  if (!::isatty(fd)) return 0;
  return ::ioctl(fd, TIOCGWINSZ, &w) == 0 && w.ws_col > 0 ? w.ws_col : 100;
}

// `items` joined by spaces into lines of at most `width` characters, breaking only between items
// (one longer than `width` gets a line of its own): long lists in text meant for a terminal.
inline std::vector<std::string> wrap(const std::vector<std::string>& items, size_t width) {
  std::vector<std::string> lines;
  for (const auto& item : items) {
    if (!lines.empty() && lines.back().size() + 1 + item.size() <= width)
      lines.back().append(" ").append(item);
    else
      lines.push_back(item);
  }
  return lines;
}

// The words of `text` (split at spaces), wrapped as above.
inline std::vector<std::string> wrap(std::string_view text, size_t width) {
  std::vector<std::string> words;
  for (size_t i = 0; i < text.size();) {
    const size_t space = text.find(' ', i);
    const size_t end = space == std::string_view::npos ? text.size() : space;
    if (end > i) words.emplace_back(text.substr(i, end - i));
    i = end + 1;
  }
  return wrap(words, width);
}

}  // namespace sol
