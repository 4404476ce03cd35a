#include "capture/trace/python_frames.hpp"

#include <dlfcn.h>

#include <cstdio>
#include <cstring>

namespace sol::capture::trace::python {
namespace {

template <class T>
T load(uintptr_t addr) noexcept {
  T v;
  std::memcpy(&v, reinterpret_cast<const void*>(addr), sizeof v);
  return v;
}

uintptr_t ob_type(uintptr_t obj) noexcept {
  return load<uintptr_t>(obj + 8);  // PyObject: ob_refcnt, ob_type (default, non free-threaded builds)
}

void utf8(std::string& out, uint32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xc0 | c >> 6);
    out += static_cast<char>(0x80 | (c & 0x3f));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xe0 | c >> 12);
    out += static_cast<char>(0x80 | (c >> 6 & 0x3f));
    out += static_cast<char>(0x80 | (c & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | c >> 18);
    out += static_cast<char>(0x80 | (c >> 12 & 0x3f));
    out += static_cast<char>(0x80 | (c >> 6 & 0x3f));
    out += static_cast<char>(0x80 | (c & 0x3f));
  }
}

}  // namespace

bool Interpreter::layout_for(unsigned major, unsigned minor, const void* runtime) noexcept {
  Layout& l = l_;
  if (major != 3) return false;
  if (minor == 11) {
    l.tstate_cframe = 56, l.cframe_current = 8, l.tstate_frame = npos;
    l.frame_code = 32, l.frame_previous = 48, l.frame_instr = 56, l.frame_owner = 69;
    l.frame_is_entry = 68, l.owner_cstack = -1;
    l.code_filename = 112, l.code_qualname = 128, l.code_adaptive = 184;
    l.ascii_size = 48, l.compact_size = 72;
    return true;
  }
  if (minor == 12) {
    l.tstate_cframe = 56, l.cframe_current = 0, l.tstate_frame = npos;
    l.frame_code = 0, l.frame_previous = 8, l.frame_instr = 56, l.frame_owner = 70;
    l.frame_is_entry = npos, l.owner_cstack = 3;
    l.code_filename = 112, l.code_qualname = 128, l.code_adaptive = 192;
    l.ascii_size = 40, l.compact_size = 56;
    return true;
  }
  if (minor == 13 && runtime) {
    // _PyRuntime starts with _Py_DebugOffsets: the cookie, the version, then tables of uint64_t
    // offsets whose order is fixed for a minor version (positions from 3.13's pycore_runtime.h).
    const auto base = reinterpret_cast<uintptr_t>(runtime);
    if (std::memcmp(runtime, "xdebugpy", 8) != 0 || load<uint64_t>(base + 16) != 0) return false;  // free-threaded
    const auto off = [&](size_t at) { return static_cast<size_t>(load<uint64_t>(base + at)); };
    l.tstate_cframe = npos, l.tstate_frame = off(184);
    l.frame_previous = off(232), l.frame_code = off(240), l.frame_instr = off(248), l.frame_owner = off(264);
    l.frame_is_entry = npos, l.owner_cstack = 3;
    l.code_filename = off(280), l.code_qualname = off(296), l.code_adaptive = off(344);
    l.ascii_size = off(560), l.compact_size = l.ascii_size + 16;  // + utf8_length, utf8
    return true;
  }
  return false;
}

Interpreter::Status Interpreter::find() noexcept {
  if (status() != Status::not_found) return status();
  const auto* version = static_cast<const unsigned long*>(dlsym(RTLD_DEFAULT, "Py_Version"));  // 3.11 on
  if (!version) return Status::not_found;
  const unsigned major = *version >> 24 & 0xff, minor = *version >> 16 & 0xff;
  std::snprintf(version_, sizeof version_, "%u.%u", major, minor);
  this_thread_state_ = reinterpret_cast<void* (*)()>(dlsym(RTLD_DEFAULT, "PyGILState_GetThisThreadState"));
  is_initialized_ = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "Py_IsInitialized"));
  addr2line_ = reinterpret_cast<int (*)(void*, int)>(dlsym(RTLD_DEFAULT, "PyCode_Addr2Line"));
  code_type_ = reinterpret_cast<uintptr_t>(dlsym(RTLD_DEFAULT, "PyCode_Type"));
  unicode_type_ = reinterpret_cast<uintptr_t>(dlsym(RTLD_DEFAULT, "PyUnicode_Type"));
  const void* runtime = dlsym(RTLD_DEFAULT, "_PyRuntime");
  Dl_info object{};
  if (this_thread_state_ && dladdr(reinterpret_cast<void*>(this_thread_state_), &object))
    object_ = object.dli_fbase;
  const bool ok = this_thread_state_ && is_initialized_ && addr2line_ && code_type_ && unicode_type_ &&
                  layout_for(major, minor, runtime);
  status_.store(ok ? Status::found : Status::unsupported, std::memory_order_release);
  return status();
}

int Interpreter::capture(Frame* out, int max) const noexcept {
  const auto ts = reinterpret_cast<uintptr_t>(this_thread_state_());
  // No thread state: a thread Python never ran in, unless the interpreter is gone (calls made
  // while the process exits, after Py_Finalize), which says nothing about the thread.
  if (!ts) return is_initialized_() ? -1 : 0;
  uintptr_t frame;
  if (l_.tstate_cframe != npos) {
    const auto cframe = load<uintptr_t>(ts + l_.tstate_cframe);
    frame = cframe ? load<uintptr_t>(cframe + l_.cframe_current) : 0;
  } else {
    frame = load<uintptr_t>(ts + l_.tstate_frame);
  }
  int n = 0;
  // Frames are a linked list on the thread's data stack; the bound guards against a cycle that a
  // layout mistake could make.
  for (int steps = 0; frame && n < max && steps < 1024; ++steps) {
    const auto owner = load<int8_t>(frame + l_.frame_owner);
    const uintptr_t previous = load<uintptr_t>(frame + l_.frame_previous);
    if (owner == l_.owner_cstack) {  // the shim below an evaluation's first frame
      if (n) out[n - 1].entry = true;
      frame = previous;
      continue;
    }
    // 3.14 tags the low bits of f_executable; code objects are at least 8-byte aligned.
    const uintptr_t code = load<uintptr_t>(frame + l_.frame_code) & ~uintptr_t{7};
    if (!code || ob_type(code) != code_type_) break;
    const auto instr = load<uintptr_t>(frame + l_.frame_instr);
    const intptr_t units = (static_cast<intptr_t>(instr) - static_cast<intptr_t>(code + l_.code_adaptive)) / 2;
    out[n].code = code;
    out[n].lasti = units < 0 || units > INT32_MAX ? -1 : static_cast<int32_t>(units);
    out[n].entry = l_.frame_is_entry != npos && load<uint8_t>(frame + l_.frame_is_entry);
    ++n;
    frame = previous;
  }
  return n;
}

// A str object's text as UTF-8: compact strings only (every identifier and file name of code).
std::string Interpreter::text(uintptr_t s) const {
  if (!s || ob_type(s) != unicode_type_) return "?";
  const auto length = load<int64_t>(s + 16);
  const auto state = load<uint32_t>(s + 32);  // interned:2, kind:3, compact:1, ascii:1
  const unsigned kind = state >> 2 & 7, compact = state >> 5 & 1, ascii = state >> 6 & 1;
  if (!compact || length < 0 || length > 4096) return "?";
  if (ascii) return std::string(reinterpret_cast<const char*>(s + l_.ascii_size), static_cast<size_t>(length));
  std::string out;
  const uintptr_t data = s + l_.compact_size;
  for (int64_t i = 0; i < length; ++i) {
    const uint32_t c = kind == 1   ? load<uint8_t>(data + i)
                       : kind == 2 ? load<uint16_t>(data + 2 * i)
                                   : load<uint32_t>(data + 4 * i);
    utf8(out, c);
  }
  return out;
}

bool Interpreter::in_interpreter(uintptr_t ip) const noexcept {
  Dl_info info{};
  return object_ && ip && dladdr(reinterpret_cast<void*>(ip - 1), &info) && info.dli_fbase == object_;
}

std::string Interpreter::describe(const Frame& f) const {
  const int line = addr2line_(reinterpret_cast<void*>(f.code), f.lasti < 0 ? -1 : f.lasti * 2);
  const std::string name = text(load<uintptr_t>(f.code + l_.code_qualname));
  const std::string file = text(load<uintptr_t>(f.code + l_.code_filename));
  return name + " (" + file + ":" + std::to_string(line) + ")";
}

}  // namespace sol::capture::trace::python
