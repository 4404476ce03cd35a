#include "capture/trace/symbolize.hpp"

#include <cxxabi.h>
#include <dlfcn.h>
#include <link.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "common/log.hpp"

#if SOL_HAVE_LIBDW
#include <elfutils/libdwfl.h>
#endif

namespace sol::capture::trace {
namespace {

// A symbol table's name may carry its version ("dlopen@GLIBC_2.2.5", from .symtab): the function
// is the same one, and dladdr's names never have it.
std::string demangled(const char* name) {
  const char* at = std::strchr(name, '@');
  const std::string plain = at && at != name ? std::string(name, at) : std::string(name);
  int status = 0;
  char* d = abi::__cxa_demangle(plain.c_str(), nullptr, nullptr, &status);
  std::string out = status == 0 && d ? d : plain;
  std::free(d);
  return out;
}

std::string basename_of(const char* path) {
  const char* slash = std::strrchr(path, '/');
  return slash ? slash + 1 : path;
}

std::string location(const std::string& object, uintptr_t offset) {
  char where[32];
  std::snprintf(where, sizeof where, "+0x%lx", static_cast<unsigned long>(offset));
  return object + where;
}

#if SOL_HAVE_LIBDW

// The functions used, resolved from the library opened at exit (their types from its headers).
struct Libdw {
  decltype(&dwfl_begin) begin = nullptr;
  decltype(&dwfl_end) end = nullptr;
  decltype(&dwfl_linux_proc_report) proc_report = nullptr;
  decltype(&dwfl_report_end) report_end = nullptr;
  decltype(&dwfl_addrmodule) addrmodule = nullptr;
  decltype(&dwfl_module_info) module_info = nullptr;
  decltype(&dwfl_module_getsymtab) getsymtab = nullptr;
  decltype(&dwfl_module_getsym_info) getsym_info = nullptr;
  decltype(&dwfl_module_getsrc) getsrc = nullptr;
  decltype(&dwfl_lineinfo) lineinfo = nullptr;
  decltype(&dwfl_errmsg) errmsg = nullptr;
  decltype(&dwfl_linux_proc_find_elf) find_elf = nullptr;
  decltype(&dwfl_build_id_find_debuginfo) build_id_find = nullptr;
  decltype(&dwfl_standard_find_debuginfo) standard_find = nullptr;
};

// One per process: the library stays loaded (unloading it while the process ends gains nothing).
Libdw g_dw;
std::atomic<bool> g_dw_loaded{false};

template <class Fn>
bool resolve(void* lib, const char* name, Fn& fn) {
  fn = reinterpret_cast<Fn>(dlsym(lib, name));
  return fn != nullptr;
}

bool load_libdw(const char* name, std::string& why) {
  if (g_dw_loaded.load(std::memory_order_acquire)) return true;
  // RTLD_LOCAL: libdw, libelf and their compression libraries must not interpose the program's.
  void* lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* e = dlerror();
    why = e ? e : std::string(name) + ": cannot be opened";
    return false;
  }
  Libdw dw;
  const bool ok =
      resolve(lib, "dwfl_begin", dw.begin) && resolve(lib, "dwfl_end", dw.end) &&
      resolve(lib, "dwfl_linux_proc_report", dw.proc_report) &&
      resolve(lib, "dwfl_report_end", dw.report_end) && resolve(lib, "dwfl_addrmodule", dw.addrmodule) &&
      resolve(lib, "dwfl_module_info", dw.module_info) &&
      resolve(lib, "dwfl_module_getsymtab", dw.getsymtab) &&
      resolve(lib, "dwfl_module_getsym_info", dw.getsym_info) &&
      resolve(lib, "dwfl_module_getsrc", dw.getsrc) && resolve(lib, "dwfl_lineinfo", dw.lineinfo) &&
      resolve(lib, "dwfl_errmsg", dw.errmsg) && resolve(lib, "dwfl_linux_proc_find_elf", dw.find_elf) &&
      resolve(lib, "dwfl_build_id_find_debuginfo", dw.build_id_find) &&
      resolve(lib, "dwfl_standard_find_debuginfo", dw.standard_find);
  if (!ok) {
    why = std::string(name) + " lacks dwfl functions SOL needs";
    return false;
  }
  g_dw = dw;  // a process names its stacks once, from one thread, at exit
  g_dw_loaded.store(true, std::memory_order_release);
  return true;
}

// Whether libdw would ask a debuginfod server: dwfl_standard_find_debuginfo does, when
// DEBUGINFOD_URLS is set and no local file has a module's debug information. A traced process
// would then download debug files (hundreds of megabytes for libtorch) while it exits.
std::atomic<bool> g_debuginfod_set{false};

// Separate debug files: by build-id under /usr/lib/debug/.build-id (Debian's -dbgsym packages),
// then by .gnu_debuglink beside the file, in .debug/ and under /usr/lib/debug. The second search
// is libdw's standard one, which ends with debuginfod: with DEBUGINFOD_URLS set, build-id only.
int find_debuginfo(Dwfl_Module* mod, void** userdata, const char* modname, Dwarf_Addr base,
                   const char* file_name, const char* debuglink_file, GElf_Word debuglink_crc,
                   char** debuginfo_file_name) {
  if (g_debuginfod_set.load(std::memory_order_relaxed))
    return g_dw.build_id_find(mod, userdata, modname, base, file_name, debuglink_file, debuglink_crc,
                              debuginfo_file_name);
  return g_dw.standard_find(mod, userdata, modname, base, file_name, debuglink_file, debuglink_crc,
                            debuginfo_file_name);
}

Dwfl* open_session(const char* libdw) {
  std::string why;
  if (!load_libdw(libdw, why)) {
    log::once(
        log::Level::warn, "symbolize-libdw",
        "trace: %s; stack frames get exported names only (libdw1 adds static functions and debug files)",
        why.c_str());
    return nullptr;
  }
  const char* urls = std::getenv("DEBUGINFOD_URLS");
  g_debuginfod_set.store(urls && *urls, std::memory_order_relaxed);

  // libdw keeps a pointer to the callbacks: they must outlive the session.
  static Dwfl_Callbacks callbacks{};
  static char* debuginfo_path = nullptr;  // libdw's default: beside the file, .debug/, /usr/lib/debug
  callbacks.find_elf = g_dw.find_elf;
  callbacks.find_debuginfo = find_debuginfo;
  callbacks.debuginfo_path = &debuginfo_path;
  Dwfl* dwfl = g_dw.begin(&callbacks);
  if (!dwfl) return nullptr;
  // The process's mappings, read once from /proc/self/maps: every module, its range and file.
  if (g_dw.proc_report(dwfl, ::getpid()) != 0 || g_dw.report_end(dwfl, nullptr, nullptr) != 0) {
    log::write(log::Level::warn, "trace: libdw cannot read this process's mappings (%s); names from dladdr",
               g_dw.errmsg(-1));
    g_dw.end(dwfl);
    return nullptr;
  }
  return dwfl;
}

Dwfl_Module* module_of(void* dwfl, uintptr_t at) {
  return dwfl ? g_dw.addrmodule(static_cast<Dwfl*>(dwfl), at) : nullptr;
}

// The file of libdw's module holding `at` and where it starts, for code the loader does not know.
const char* module_file(void* dwfl, uintptr_t at, uintptr_t& start) {
  Dwfl_Module* mod = module_of(dwfl, at);
  if (!mod) return nullptr;
  Dwarf_Addr lo = 0;
  const char* name = g_dw.module_info(mod, nullptr, &lo, nullptr, nullptr, nullptr, nullptr, nullptr);
  start = lo;
  return name;
}

#else

const char* module_file(void*, uintptr_t, uintptr_t&) {
  return nullptr;
}

#endif

}  // namespace

#if SOL_HAVE_LIBDW

Symbolizer::Symbolizer(const char* libdw) noexcept : dwfl_(open_session(libdw)) {}

Symbolizer::~Symbolizer() {
  if (dwfl_) g_dw.end(static_cast<Dwfl*>(dwfl_));
}

const char* Symbolizer::function_at(uintptr_t at, bool& known) {
  known = false;
  Dwfl_Module* mod = module_of(dwfl_, at);
  if (!mod) return nullptr;
  auto [it, added] = functions_.try_emplace(mod);
  std::vector<Function>& fns = it->second;
  if (added) {
    // The module's best tables, as libdw chose them: .symtab of the file or of its debug file,
    // else .dynsym, plus MiniDebugInfo's. Functions with a size only: a sizeless symbol (_init,
    // an assembler label) would claim every unnamed function up to the next one.
    const int n = g_dw.getsymtab(mod);
    for (int i = 1; i < n; ++i) {
      GElf_Sym sym;
      GElf_Addr addr = 0;
      GElf_Word shndx = 0;
      const char* name = g_dw.getsym_info(mod, i, &sym, &addr, &shndx, nullptr, nullptr);
      const int type = GELF_ST_TYPE(sym.st_info);
      if (!name || !*name || sym.st_size == 0 || shndx == SHN_UNDEF ||
          (type != STT_FUNC && type != STT_GNU_IFUNC && type != STT_NOTYPE))
        continue;
      fns.push_back({static_cast<uintptr_t>(addr), static_cast<uintptr_t>(addr + sym.st_size), name});
    }
    // Aliases share an address; the global name (first_global) comes later in a table and wins
    // by being last among equals, as libdw prefers it.
    std::stable_sort(fns.begin(), fns.end(),
                     [](const Function& a, const Function& b) { return a.lo < b.lo; });
  }
  known = !fns.empty();
  // The last function starting at or before `at` that still covers it; a few steps back for a
  // function nested in a larger one.
  auto next =
      std::upper_bound(fns.begin(), fns.end(), at, [](uintptr_t a, const Function& f) { return a < f.lo; });
  for (int steps = 0; next != fns.begin() && steps < 8; ++steps) {
    --next;
    if (at < next->hi) return next->name;
  }
  return nullptr;
}

std::string Symbolizer::source(uintptr_t ip) {
  Dwfl_Module* mod = module_of(dwfl_, ip - 1);
  Dwfl_Line* line = mod ? g_dw.getsrc(mod, ip - 1) : nullptr;
  if (!line) return "";
  int lineno = 0;
  const char* file = g_dw.lineinfo(line, nullptr, &lineno, nullptr, nullptr, nullptr);
  if (!file || lineno <= 0) return "";
  return std::string(file) + ":" + std::to_string(lineno);
}

#else  // built without elfutils' headers: dladdr's names only

Symbolizer::Symbolizer(const char*) noexcept {}
Symbolizer::~Symbolizer() = default;
const char* Symbolizer::function_at(uintptr_t, bool& known) {
  known = false;
  return nullptr;
}
std::string Symbolizer::source(uintptr_t) {
  return "";
}
#endif

std::string Symbolizer::describe(uintptr_t ip) {
  const uintptr_t at = ip - 1;
  bool known = false;
  const char* name = function_at(at, known);

  // The object as the loader sees it, so that frames read the same with and without libdw:
  // dladdr's file and start (for the main program, the name it was started by). dladdr also scans
  // every dynamic symbol of the object, most of the time spent here for libtorch's frames, so
  // where libdw already read the object's tables the loader is asked for the object alone.
  Dl_info info{};
  bool loaded = false;
#if defined(__GLIBC__) && __GLIBC_PREREQ(2, 35)
  dl_find_object object{};
  if (known && _dl_find_object(reinterpret_cast<void*>(at), &object) == 0 && object.dlfo_link_map &&
      object.dlfo_link_map->l_name && *object.dlfo_link_map->l_name) {
    info.dli_fname = object.dlfo_link_map->l_name;
    info.dli_fbase = object.dlfo_map_start;
    loaded = true;
  }
#endif
  if (!loaded) loaded = dladdr(reinterpret_cast<const void*>(at), &info) && info.dli_fname;

  // libdw's module list where the loader has nothing (a file mapped by hand).
  uintptr_t start = loaded ? reinterpret_cast<uintptr_t>(info.dli_fbase) : 0;
  const char* file = loaded ? info.dli_fname : module_file(dwfl_, at, start);
  std::string where = "?";
  if (file) {
    const std::string object_name = basename_of(file);
    where = location(object_name.empty() ? "main" : object_name, at - start);
  }
  if (!name && loaded) name = info.dli_sname;
  if (!name || !*name) return where;
  return demangled(name) + " (" + where + ")";
}

}  // namespace sol::capture::trace
