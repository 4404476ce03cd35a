// Formatting without allocation or locale, for the per-call path of the trace recorder.
#pragma once

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace sol::capture::trace {

// Appends into a fixed buffer; output that does not fit is cut (and `truncated()` says so).
class Text {
 public:
  Text(char* buf, size_t cap) noexcept : buf_(buf), cap_(cap) {}

  Text& str(const char* s) noexcept { return raw(s, std::strlen(s)); }
  // A string literal: its length is known at compile time.
  template <size_t N>
  Text& lit(const char (&s)[N]) noexcept {
    return raw(s, N - 1);
  }
  Text& raw(const char* s, size_t n) noexcept {
    if (n > cap_ - len_) {
      n = cap_ - len_;
      truncated_ = true;
    }
    std::memcpy(buf_ + len_, s, n);
    len_ += n;
    return *this;
  }
  Text& ch(char c) noexcept { return raw(&c, 1); }

  Text& u64(uint64_t v) noexcept {
    char tmp[24];
    int i = sizeof tmp;
    do tmp[--i] = static_cast<char>('0' + v % 10);
    while (v /= 10);
    return raw(tmp + i, sizeof tmp - i);
  }
  Text& i64(int64_t v) noexcept {
    if (v < 0) {
      ch('-');
      return u64(static_cast<uint64_t>(-(v + 1)) + 1);
    }
    return u64(static_cast<uint64_t>(v));
  }
  // Nanoseconds as microseconds with three decimals: 1532118 -> "1532.118".
  Text& usec(uint64_t ns) noexcept {
    u64(ns / 1000).ch('.');
    const unsigned frac = static_cast<unsigned>(ns % 1000);
    const char d[3] = {static_cast<char>('0' + frac / 100), static_cast<char>('0' + frac / 10 % 10),
                       static_cast<char>('0' + frac % 10)};
    return raw(d, 3);
  }
  // A number: integers exactly, anything else in its shortest exact form. JSON has no NaN or infinity; as a
  // JSON value (`quoted`) they become the strings "nan", "inf", "-inf", inside a string they are bare.
  Text& num(double v, bool quoted = true) noexcept {
    if (v > -9e15 && v < 9e15 && v == static_cast<double>(static_cast<int64_t>(v)))
      return i64(static_cast<int64_t>(v));
    if (v != v) return str(quoted ? "\"nan\"" : "nan");
    if (v > 1.7e308 || v < -1.7e308)
      return str(v > 0 ? (quoted ? "\"inf\"" : "inf") : (quoted ? "\"-inf\"" : "-inf"));
    // Shortest text that reads back as the same double; far cheaper than printf's %g.
    char tmp[32];
    const auto r = std::to_chars(tmp, tmp + sizeof tmp, v);
    return raw(tmp, r.ec == std::errc() ? static_cast<size_t>(r.ptr - tmp) : 0);
  }
  // A JSON string literal, quotes included.
  Text& json(const char* s) noexcept {
    ch('"');
    for (; *s; ++s) {
      const unsigned char c = static_cast<unsigned char>(*s);
      if (c == '"' || c == '\\') {
        ch('\\').ch(static_cast<char>(c));
      } else if (c < 0x20) {
        static const char hex[] = "0123456789abcdef";
        const char esc[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
        raw(esc, 6);
      } else {
        ch(static_cast<char>(c));
      }
    }
    return ch('"');
  }

  const char* data() const noexcept { return buf_; }
  size_t size() const noexcept { return len_; }
  bool truncated() const noexcept { return truncated_; }

 private:
  char* buf_;
  size_t cap_;
  size_t len_ = 0;
  bool truncated_ = false;
};

}  // namespace sol::capture::trace
