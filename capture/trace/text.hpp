// Formatting without allocation or locale, for the per-call path of the trace recorder.
#pragma once

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "common/macros.hpp"

namespace sol::capture::trace {

// Appends into a fixed buffer; output that does not fit is cut (and `truncated()` says so).
class Text {
 public:
  Text(char* buf, size_t cap) noexcept : buf_(buf), cap_(cap) {}

  Text& str(const char* s) noexcept { return raw(s, std::strlen(s)); }
  // A string literal: its length is known at compile time.
  template <size_t N>
  Text& lit(const char (&s)[N]) noexcept {
    // What every member keeps: said for GCC 12 at -O3, which otherwise warns of a copy past the end
    // on a path where len_ would exceed cap_.
    if (len_ > cap_) __builtin_unreachable();
    if (N - 1 > cap_ - len_) return raw(s, N - 1);  // cut, and marked so
    std::memcpy(buf_ + len_, s, N - 1);  // a constant size: the compiler inlines the copy
    len_ += N - 1;
    return *this;
  }
  Text& raw(const char* s, size_t n) noexcept {
    if (n > cap_ - len_) {
      n = cap_ - len_;
      truncated_ = true;
    }
    copy(buf_ + len_, s, n);
    len_ += n;
    return *this;
  }
  Text& ch(char c) noexcept {
    if (len_ < cap_) buf_[len_++] = c;
    else truncated_ = true;
    return *this;
  }
  Text& boolean(bool b) noexcept { return b ? lit("true") : lit("false"); }

  Text& u64(uint64_t v) noexcept {
    if (SOL_UNLIKELY(cap_ - len_ < 20)) {  // near the end: through a copy that cuts
      char tmp[20];
      return raw(tmp, put_digits(tmp, v));
    }
    len_ += put_digits(buf_ + len_, v);
    return *this;
  }
  // "0x1f2e": an address, as the trace shows handles and streams.
  Text& hex(uint64_t v) noexcept {
    char d[18];
    int n = 0;
    do {
      d[n++] = "0123456789abcdef"[v & 15];
      v >>= 4;
    } while (v);
    raw("0x", 2);
    while (n) ch(d[--n]);
    return *this;
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
    const uint64_t us = ns / 1000;
    const unsigned frac = static_cast<unsigned>(ns - us * 1000), pair = frac % 100 * 2;
    const char d[4] = {'.', static_cast<char>('0' + frac / 100), kPairs[pair], kPairs[pair + 1]};
    if (SOL_UNLIKELY(cap_ - len_ < 24)) return u64(us).raw(d, 4);  // near the end: cut
    char* out = buf_ + len_;
    const size_t n = put_digits(out, us);
    std::memcpy(out + n, d, 4);
    len_ += n + 4;
    return *this;
  }
  // A number: integers exactly, anything else in its shortest exact form. JSON has no NaN or infinity; as a
  // JSON value (`quoted`) they become the strings "nan", "inf", "-inf", inside a string they are bare.
  Text& num(double v, bool quoted = true) noexcept {
    if (v > -9e15 && v < 9e15 && v == static_cast<double>(static_cast<int64_t>(v)))
      return i64(static_cast<int64_t>(v));
    if (v != v) return quoted ? lit("\"nan\"") : lit("nan");
    if (v > 1.7e308) return quoted ? lit("\"inf\"") : lit("inf");
    if (v < -1.7e308) return quoted ? lit("\"-inf\"") : lit("-inf");
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
  static constexpr char kPairs[] =
      "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
      "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
      "8081828384858687888990919293949596979899";
  // The decimal digits of v written at `out`, two per step from kPairs (half the
  // multiplications of a digit-by-digit loop) from the last one back; returns how many.
  static size_t put_digits(char* out, uint64_t v) noexcept {
    static constexpr uint64_t kPow10[20] = {1ull,
                                            10ull,
                                            100ull,
                                            1000ull,
                                            10000ull,
                                            100000ull,
                                            1000000ull,
                                            10000000ull,
                                            100000000ull,
                                            1000000000ull,
                                            10000000000ull,
                                            100000000000ull,
                                            1000000000000ull,
                                            10000000000000ull,
                                            100000000000000ull,
                                            1000000000000000ull,
                                            10000000000000000ull,
                                            100000000000000000ull,
                                            1000000000000000000ull,
                                            10000000000000000000ull};
    if (v < 10) {
      *out = static_cast<char>('0' + v);
      return 1;
    }
    // log10 from the bit length (1233/4096 ~ log10(2)), corrected by one comparison.
    const int t = (64 - __builtin_clzll(v)) * 1233 >> 12;
    const size_t n = static_cast<size_t>(t - (v < kPow10[t]) + 1);
    char* p = out + n;
    while (v >= 100) {
      const unsigned pair = static_cast<unsigned>(v % 100) * 2;
      v /= 100;
      *--p = kPairs[pair + 1];
      *--p = kPairs[pair];
    }
    if (v >= 10) {
      *--p = kPairs[v * 2 + 1];
      *--p = kPairs[v * 2];
    } else {
      *--p = static_cast<char>('0' + v);
    }
    return n;
  }
  // Most pieces of an event are a few bytes (a number, a key): two overlapping word copies
  // instead of a call to memcpy, whose overhead is larger than the copy.
  static void copy(char* d, const char* s, size_t n) noexcept {
    if (n >= 8 && n <= 16) {
      uint64_t a, b;
      std::memcpy(&a, s, 8);
      std::memcpy(&b, s + n - 8, 8);
      std::memcpy(d, &a, 8);
      std::memcpy(d + n - 8, &b, 8);
    } else if (n >= 4 && n < 8) {
      uint32_t a, b;
      std::memcpy(&a, s, 4);
      std::memcpy(&b, s + n - 4, 4);
      std::memcpy(d, &a, 4);
      std::memcpy(d + n - 4, &b, 4);
    } else if (n < 4) {
      for (size_t i = 0; i < n; ++i) d[i] = s[i];
    } else {
      std::memcpy(d, s, n);
    }
  }

  char* buf_;
  size_t cap_;
  size_t len_ = 0;
  bool truncated_ = false;
};

}  // namespace sol::capture::trace
