// The layout follows Brendan Gregg's flamegraph.pl: the root ("all") at the bottom, children
// sorted by name, widths proportional to time, frames narrower than a tenth of a pixel left out.
#include "tools/sol/flamegraph.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "tools/sol/output.hpp"

namespace sol::tools {
namespace {

constexpr double kWidth = 1200;  // image width, px
constexpr double kMargin = 10;   // left and right
constexpr double kFrameHeight = 16;
constexpr double kTop = 44;  // room for the title lines
constexpr double kBottom = 10;
constexpr double kMinWidth = 0.1;   // px; narrower frames would be invisible anyway
constexpr double kCharWidth = 6.6;  // of the 11px monospace-ish label font, for fitting labels

struct Node {
  uint64_t total_ns = 0;
  bool intercepted = false;  // the last element of a stack: the intercepted symbol
  std::map<std::string, Node> children;
};

// Escapes text for XML and drops what XML 1.0 cannot hold (control bytes, invalid UTF-8).
std::string xml_text(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    switch (c) {
      case '&': out += "&amp;"; continue;
      case '<': out += "&lt;"; continue;
      case '>': out += "&gt;"; continue;
      case '"': out += "&quot;"; continue;
      case '\'': out += "&apos;"; continue;
      default: break;
    }
    if (c < 0x80) {
      out += c < 0x20 && c != '\t' ? '?' : static_cast<char>(c);
      continue;
    }
    const size_t len = c >= 0xf0 && c < 0xf5 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c < 0xe0 ? 2 : 0;
    bool valid = len > 0 && i + len <= s.size();
    for (size_t k = 1; valid && k < len; ++k) valid = (static_cast<unsigned char>(s[i + k]) & 0xc0) == 0x80;
    if (!valid) {
      out += '?';
      continue;
    }
    out.append(s, i, len);
    i += len - 1;
  }
  return out;
}

uint32_t fnv1a(const std::string& s) {
  uint32_t h = 2166136261u;
  for (unsigned char c : s) h = (h ^ c) * 16777619u;
  return h;
}

// Frames of one library share a colour (warm hues); the intercepted symbols are blue.
std::string colour(const std::string& name, bool intercepted) {
  const std::string location = frame_location(name);
  const uint32_t h = fnv1a(location.empty() ? name : location.substr(0, location.rfind("+0x")));
  int r, g, b;
  if (intercepted) {
    r = 60 + static_cast<int>(h % 50);
    g = 120 + static_cast<int>((h >> 8) % 60);
    b = 200 + static_cast<int>((h >> 16) % 55);
  } else {
    r = 205 + static_cast<int>(h % 50);
    g = static_cast<int>((h >> 8) % 200);
    b = static_cast<int>((h >> 16) % 55);
  }
  return "rgb(" + std::to_string(r) + "," + std::to_string(g) + "," + std::to_string(b) + ")";
}

std::string fixed(double x, int decimals = 1) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, x);
  return buf;
}

int depth_of(const Node& n) {
  int d = 0;
  for (const auto& [name, c] : n.children) d = std::max(d, 1 + depth_of(c));
  return d;
}

struct Canvas {
  std::ostringstream svg;
  double scale;   // px per ns
  double bottom;  // y of the root frame's top edge
  uint64_t total_ns;

  void frame(const std::string& name, const Node& n, double x, int depth) {
    const double w = n.total_ns * scale;
    if (w < kMinWidth) return;
    const double y = bottom - depth * kFrameHeight;
    const std::string tip =
        name + " (" + human_ns(n.total_ns) + ", " + human_percent(100.0 * ratio(n.total_ns, total_ns)) + ")";
    svg << "<g><title>" << xml_text(tip) << "</title><rect x=\"" << fixed(x, 2) << "\" y=\"" << fixed(y)
        << "\" width=\"" << fixed(w, 2) << "\" height=\"" << fixed(kFrameHeight - 1) << "\" fill=\""
        << colour(name, n.intercepted) << "\" rx=\"2\"/>";
    const size_t fits = static_cast<size_t>((w - 6) / kCharWidth);
    if (fits >= 4) {
      const std::string label = name.size() <= fits ? name : name.substr(0, fits - 2) + "..";
      svg << "<text x=\"" << fixed(x + 3, 2) << "\" y=\"" << fixed(y + kFrameHeight - 4.5) << "\">"
          << xml_text(label) << "</text>";
    }
    svg << "</g>\n";
    double cx = x;
    for (const auto& [child_name, c] : n.children) {
      frame(child_name, c, cx, depth + 1);
      cx += c.total_ns * scale;
    }
  }
};

}  // namespace

bool write_flamegraph(const Survey& s, const std::string& path, std::string& error) {
  Node root;
  for (const auto& [stack, ns] : s.stacks) {
    if (ns == 0 || stack.empty()) continue;
    root.total_ns += ns;
    Node* n = &root;
    for (const auto& f : stack) {
      n = &n->children[f];
      n->total_ns += ns;
    }
    n->intercepted = true;
  }

  const int depth = depth_of(root) + 1;
  const double height = kTop + depth * kFrameHeight + kBottom;
  Canvas c;
  c.scale = root.total_ns == 0 ? 0 : (kWidth - 2 * kMargin) / static_cast<double>(root.total_ns);
  c.bottom = height - kBottom - kFrameHeight;
  c.total_ns = root.total_ns;
  c.svg << "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n"
        << "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"" << kWidth << "\" height=\""
        << fixed(height) << "\" viewBox=\"0 0 " << kWidth << " " << fixed(height) << "\">\n"
        << "<style>text { font-family: monospace; font-size: 11px; fill: #000; pointer-events: none; }\n"
        << "g:hover rect { stroke: #000; stroke-width: 0.8; } .head { font-size: 14px; }</style>\n"
        << "<rect x=\"0\" y=\"0\" width=\"100%\" height=\"100%\" fill=\"#f8f8f4\"/>\n"
        << "<text class=\"head\" x=\"" << kWidth / 2 << "\" y=\"20\" text-anchor=\"middle\">"
        << xml_text("SOL flame graph: " + s.path) << "</text>\n"
        << "<text x=\"" << kWidth / 2 << "\" y=\"36\" text-anchor=\"middle\">"
        << xml_text(survey_line(s) + "; hover a frame for its time") << "</text>\n";
  if (root.total_ns == 0)
    c.svg << "<text x=\"" << kWidth / 2 << "\" y=\"" << fixed(c.bottom) << "\" text-anchor=\"middle\">"
          << "no traced time</text>\n";
  else
    c.frame("all", root, kMargin, 0);
  c.svg << "</svg>\n";

  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << c.svg.str();
  out.close();
  if (!out) {
    error = path + ": cannot write the flame graph: " + std::strerror(errno);
    return false;
  }
  return true;
}

}  // namespace sol::tools
