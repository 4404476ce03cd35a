#include "capture/blas/libraries.hpp"

#include <dlfcn.h>
#include <link.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <new>
#include <string_view>
#include <unordered_set>

#include "capture/blas/call.hpp"
#include "common/native.hpp"

namespace sol::capture::blas {
namespace {

// A loaded object and its dynamic symbol table, read from memory. No dlopen or dlsym: a survey
// may run while the loader is inside a dlopen (a library's constructor calling dlopen), where
// dlopen(RTLD_NOLOAD) would run the constructors of the objects still being loaded.
struct Object {
  std::string path;
  uintptr_t base = 0;
  const ElfW(Phdr) * phdr = nullptr;
  ElfW(Half) phnum = 0;
  const ElfW(Dyn) * dyn = nullptr;
  const ElfW(Sym) * syms = nullptr;
  const char* strings = nullptr;
  size_t strsz = 0;
  const uint32_t* gnu_hash = nullptr;
  const uint32_t* sysv_hash = nullptr;
  const char* soname = nullptr;

  // glibc relocates the dynamic section's addresses in place, though not in every object (the
  // vDSO's stay offsets): one below the load address is still an offset.
  uintptr_t at(uintptr_t v) const noexcept { return v < base ? v + base : v; }
};

void read_dynamic(Object& o) noexcept {
  for (ElfW(Half) i = 0; i < o.phnum; ++i)
    if (o.phdr[i].p_type == PT_DYNAMIC)
      o.dyn = reinterpret_cast<const ElfW(Dyn)*>(o.base + o.phdr[i].p_vaddr);
  if (!o.dyn) return;
  uintptr_t soname = 0;
  bool has_soname = false;
  for (const ElfW(Dyn)* d = o.dyn; d->d_tag != DT_NULL; ++d) {
    switch (d->d_tag) {
      case DT_SYMTAB: o.syms = reinterpret_cast<const ElfW(Sym)*>(o.at(d->d_un.d_ptr)); break;
      case DT_STRTAB: o.strings = reinterpret_cast<const char*>(o.at(d->d_un.d_ptr)); break;
      case DT_STRSZ: o.strsz = d->d_un.d_val; break;
      case DT_GNU_HASH: o.gnu_hash = reinterpret_cast<const uint32_t*>(o.at(d->d_un.d_ptr)); break;
      case DT_HASH: o.sysv_hash = reinterpret_cast<const uint32_t*>(o.at(d->d_un.d_ptr)); break;
      case DT_SONAME: soname = d->d_un.d_val, has_soname = true; break;
      default: break;
    }
  }
  if (o.strings && has_soname && soname < o.strsz) o.soname = o.strings + soname;
}

std::vector<Object> objects() {
  std::vector<Object> out;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) -> int {
        if (!info->dlpi_name || !*info->dlpi_name) return 0;  // the main program
        Object o;
        o.path = info->dlpi_name;
        o.base = info->dlpi_addr;
        o.phdr = info->dlpi_phdr;
        o.phnum = info->dlpi_phnum;
        read_dynamic(o);
        if (o.syms && o.strings) static_cast<std::vector<Object>*>(data)->push_back(std::move(o));
        return 0;
      },
      &out);
  return out;
}

bool is_libsol(const Object& o) noexcept {
  for (ElfW(Half) i = 0; i < o.phnum; ++i)
    if (o.phdr[i].p_type == PT_LOAD)
      return in_libsol(reinterpret_cast<const void*>(o.base + o.phdr[i].p_vaddr));
  return false;
}

const ElfW(Sym) * gnu_lookup(const Object& o, const char* name) noexcept {
  uint32_t h = 5381;
  for (const char* c = name; *c; ++c) h = h * 33 + static_cast<unsigned char>(*c);
  const uint32_t nbuckets = o.gnu_hash[0], symoffset = o.gnu_hash[1], bloom_size = o.gnu_hash[2],
                 bloom_shift = o.gnu_hash[3];
  if (!nbuckets || !bloom_size) return nullptr;
  const auto* bloom = reinterpret_cast<const ElfW(Addr)*>(o.gnu_hash + 4);
  const auto* buckets = reinterpret_cast<const uint32_t*>(bloom + bloom_size);
  const uint32_t* chain = buckets + nbuckets;
  constexpr uint32_t bits = sizeof(ElfW(Addr)) * 8;
  const ElfW(Addr) word = bloom[(h / bits) % bloom_size];
  const ElfW(Addr) mask = (ElfW(Addr){1} << (h % bits)) | (ElfW(Addr){1} << ((h >> bloom_shift) % bits));
  if ((word & mask) != mask) return nullptr;
  for (uint32_t i = buckets[h % nbuckets]; i >= symoffset; ++i) {
    const uint32_t h2 = chain[i - symoffset];
    if ((h | 1) == (h2 | 1) && o.syms[i].st_name < o.strsz &&
        std::strcmp(name, o.strings + o.syms[i].st_name) == 0)
      return &o.syms[i];
    if (h2 & 1) break;
  }
  return nullptr;
}

const ElfW(Sym) * sysv_lookup(const Object& o, const char* name) noexcept {
  uint32_t h = 0;
  for (const char* c = name; *c; ++c) {
    h = (h << 4) + static_cast<unsigned char>(*c);
    const uint32_t g = h & 0xf0000000u;
    if (g) h ^= g >> 24;
    h &= ~g;
  }
  const uint32_t nbucket = o.sysv_hash[0];
  if (!nbucket) return nullptr;
  const uint32_t* bucket = o.sysv_hash + 2;
  const uint32_t* chain = bucket + nbucket;
  for (uint32_t i = bucket[h % nbucket]; i != STN_UNDEF; i = chain[i])
    if (o.syms[i].st_name < o.strsz && std::strcmp(name, o.strings + o.syms[i].st_name) == 0)
      return &o.syms[i];
  return nullptr;
}

// The address of `name` where the object itself defines it (not its dependencies), or nullptr.
void* definition(const Object& o, const char* name) noexcept {
  const ElfW(Sym)* s = o.gnu_hash ? gnu_lookup(o, name) : o.sysv_hash ? sysv_lookup(o, name) : nullptr;
  if (!s || s->st_shndx == SHN_UNDEF || !s->st_value) return nullptr;
  const int type = ELF64_ST_TYPE(s->st_info);
  if (type != STT_FUNC && type != STT_OBJECT) return nullptr;
  return reinterpret_cast<void*>(o.base + s->st_value);
}

// Every name libsol intercepts in the BLAS, CBLAS and oneDNN APIs, aliases included (sgemm, SGEMM).
const std::unordered_set<std::string_view>& intercepted() {
  static const auto* names = [] {
    static std::vector<std::string> aliases;
    auto* set = new std::unordered_set<std::string_view>;
    aliases.reserve(2 * kNumSymbols);
    for (size_t i = 0; i < kNumSymbols; ++i) {
      const auto s = static_cast<Sym>(i);
      const Api api = symbol_api(s);
      if (api != Api::blas && api != Api::cblas && api != Api::dnnl) continue;
      const std::string_view n = symbol_name(s);
      set->insert(n);
      if (symbol_family(s) != Family::plain || api != Api::blas || n.ends_with("sub_")) continue;
      std::string upper(n.substr(0, n.size() - 1));
      for (char& c : upper) c = static_cast<char>(c - ('a' <= c && c <= 'z' ? 'a' - 'A' : 0));
      aliases.emplace_back(n.substr(0, n.size() - 1));
      set->insert(aliases.back());
      aliases.push_back(std::move(upper));
      set->insert(aliases.back());
    }
    return set;
  }();
  return *names;
}

// Calls fn(name) for each symbol the object's dynamic relocations name: what it binds through the
// symbol table, where libsol's definitions come first.
template <class F>
void for_each_relocated(const Object& o, F&& fn) {
  uintptr_t jmprel = 0, rela = 0;
  size_t pltrelsz = 0, relasz = 0;
  bool plt_rela = false;
  for (const ElfW(Dyn)* d = o.dyn; d->d_tag != DT_NULL; ++d) {
    switch (d->d_tag) {
      case DT_JMPREL: jmprel = d->d_un.d_ptr; break;
      case DT_PLTRELSZ: pltrelsz = d->d_un.d_val; break;
      case DT_PLTREL: plt_rela = d->d_un.d_val == DT_RELA; break;
      case DT_RELA: rela = d->d_un.d_ptr; break;
      case DT_RELASZ: relasz = d->d_un.d_val; break;
      default: break;
    }
  }
  auto walk = [&](uintptr_t table, size_t bytes) {
    const auto* r = reinterpret_cast<const ElfW(Rela)*>(o.at(table));
    for (size_t i = 0; i < bytes / sizeof(ElfW(Rela)); ++i) {
      const size_t index = ELF64_R_SYM(r[i].r_info);
      if (index && o.syms[index].st_name < o.strsz) fn(std::string_view(o.strings + o.syms[index].st_name));
    }
  };
  if (jmprel && plt_rela) walk(jmprel, pltrelsz);
  if (rela) walk(rela, relasz);
}

// Whose BLAS or DNN code the object holds, by the names it defines itself.
const char* code_of(const Object& o) {
  for (size_t f = 1; f < kNumFamilies; ++f)
    if (definition(o, family_c_name(static_cast<Family>(f), "openblas_get_config").c_str()))
      return "OpenBLAS";
  for (const char* n : {"MKL_Get_Version", "MKL_Get_Version_String", "mkl_get_version"})
    if (definition(o, n)) return "MKL";
  if (definition(o, "bli_info_get_version_str")) return "BLIS";
  for (size_t f = 1; f < kNumFamilies; ++f) {
    const auto family = static_cast<Family>(f);
    for (const char* n : {"sgemm", "dgemm", "daxpy", "idamax"})
      if (definition(o, family_fortran_name(family, n).c_str())) return "BLAS";
    for (const char* n : {"cblas_sgemm", "cblas_dgemm", "cblas_daxpy"})
      if (definition(o, family_c_name(family, n).c_str())) return "BLAS";
  }
  for (const char* n : {"dnnl_primitive_execute", "dnnl_sgemm", "dnnl_version"})
    if (definition(o, n)) return "oneDNN";
  return nullptr;
}

bool defines_plain(const Object& o) {
  for (const char* n :
       {"dgemm_", "sgemm_", "idamax_", "daxpy_", "cblas_dgemm", "cblas_sgemm", "cblas_idamax"})
    if (definition(o, n)) return true;
  return false;
}

int config_bits(const char* (*get)()) noexcept {
  const char* config = get();
  return config && std::strstr(config, "USE64BITINT") ? 64 : 32;
}

// IDAMAX's answer to N, whose eight bytes hold 2 in the low half and -1 in the high one, and INCX,
// which holds 1 either way: 2 from an LP64 library, 0 (a quick return) from an ILP64 one.
int probe_bits(void* fortran_idamax, void* cblas_idamax) noexcept {
  alignas(8) const int32_t n[2] = {2, -1};
  alignas(8) const int32_t inc[2] = {1, 0};
  const double x[2] = {1.0, 5.0};
  if (fortran_idamax) {
    const int r =
        reinterpret_cast<int (*)(const void*, const double*, const void*)>(fortran_idamax)(n, x, inc);
    return r == 0 ? 64 : r == 2 ? 32 : 0;  // 1-based
  }
  if (cblas_idamax) {  // by value: the same eight bytes in a register
    int64_t wide;
    std::memcpy(&wide, n, sizeof wide);
    const size_t r = reinterpret_cast<size_t (*)(int64_t, const double*, int64_t)>(cblas_idamax)(wide, x, 1);
    return r == 0 ? 64 : r == 1 ? 32 : 0;  // 0-based
  }
  return 0;
}

// The width of the plain names the object defines: OpenBLAS's own word, where the object or a
// library it needs (Debian's libblas.so.3 over libopenblas.so.0) is OpenBLAS, else the probe.
int plain_bits(const Object& o, const std::vector<Object>& all) {
  auto config = [](const Object& x) {
    return reinterpret_cast<const char* (*)()>(definition(x, "openblas_get_config"));
  };
  if (auto get = config(o)) return config_bits(get);
  for (const ElfW(Dyn)* d = o.dyn; d->d_tag != DT_NULL; ++d) {
    if (d->d_tag != DT_NEEDED || d->d_un.d_val >= o.strsz) continue;
    const char* needed = o.strings + d->d_un.d_val;
    for (const Object& x : all)
      if (x.soname && std::strcmp(x.soname, needed) == 0)
        if (auto get = config(x)) return config_bits(get);
  }
  return probe_bits(definition(o, "idamax_"), definition(o, "cblas_idamax"));
}

void count_names(const Object& o, Library& lib) {
  for (size_t i = 0; i < kNumSymbols; ++i) {
    const auto s = static_cast<Sym>(i);
    const Api api = symbol_api(s);
    if (api != Api::blas && api != Api::cblas && api != Api::dnnl) continue;
    if (!definition(o, symbol_name(s))) continue;
    if (api == Api::dnnl)
      ++lib.dnnl_names;
    else
      ++lib.names[static_cast<size_t>(symbol_family(s))];
  }
}

// What a survey learns of an object once: whose code it holds and which intercepted names its
// relocations name. A process looks again at every dlopen (interpose/sight.cpp), and walking the
// relocations of every object each time cost PyTorch's import half a second. Entries point into
// their objects' memory, so one whose object is gone is dropped; read and written only while the
// loader's list lock is held (survey()), which also orders them.
struct Known {
  uintptr_t base;
  std::string path;
  const char* code;
  bool walked = false;
  std::vector<std::string_view> relocated;
};
std::vector<Known>& known() {
  static auto* k = new std::vector<Known>;
  return *k;
}

// `objs`' entries in known(), in the same order; entries for objects no longer loaded go.
std::vector<Known*> remember(const std::vector<Object>& objs) {
  std::vector<Known>& k = known();
  std::vector<Known> kept;
  kept.reserve(objs.size());
  for (const Object& o : objs) {
    auto it = std::find_if(k.begin(), k.end(),
                           [&](const Known& e) { return e.base == o.base && e.path == o.path; });
    if (it != k.end())
      kept.push_back(std::move(*it));
    else
      kept.push_back({o.base, o.path, is_libsol(o) ? nullptr : code_of(o), false, {}});
  }
  k = std::move(kept);
  std::vector<Known*> out;
  for (Known& e : k) out.push_back(&e);
  return out;
}

void walk(const Object& o, Known& k) {
  if (k.walked) return;
  const auto& names = intercepted();
  std::unordered_set<std::string_view> seen;
  for_each_relocated(o, [&](std::string_view n) {
    // Most of a C++ library's relocations name C++ symbols (_Z...), which no intercepted name is.
    if (!n.empty() && n[0] != '_' && names.count(n) && seen.insert(n).second) k.relocated.push_back(n);
  });
  k.walked = true;
}

// reaches_sol and called, from every loaded object's relocations. `of[l]`: out[l]'s object.
void find_reach(const std::vector<Object>& objs, const std::vector<Known*>& k, const std::vector<size_t>& of,
                std::vector<Library>& out) {
  for (size_t i = 0; i < objs.size(); ++i) walk(objs[i], *k[i]);
  for (size_t l = 0; l < out.size(); ++l) {
    out[l].reaches_sol = !k[of[l]]->relocated.empty();
    for (size_t i = 0; i < objs.size() && !out[l].called; ++i) {
      if (i == of[l] || own_library(objs[i].base)) continue;  // SOL's calls are not the program's
      for (std::string_view n : k[i]->relocated)
        if (definition(objs[of[l]], std::string(n).c_str())) {
          out[l].called = true;
          break;
        }
    }
  }
}

}  // namespace

int int_bits(void* lib, Family family) noexcept {
  try {
    if (auto get = reinterpret_cast<const char* (*)()>(
            dlsym(lib, family_c_name(family, "openblas_get_config").c_str())))
      return config_bits(get);
    return probe_bits(dlsym(lib, family_fortran_name(family, "idamax").c_str()),
                      dlsym(lib, family_c_name(family, "cblas_idamax").c_str()));
  } catch (...) {  // allocation failure: not known
    return 0;
  }
}

std::vector<Library> survey(unsigned parts) {
  struct Survey {
    unsigned parts;
    std::vector<Object> objs;
    std::vector<Library> out;
    std::vector<size_t> of;  // out's objects
    bool failed = false;
  } s{parts, {}, {}, {}};
  // Read while dl_iterate_phdr holds the loader's lock, so that no object goes from under it (the
  // lock is recursive: objects() takes it again).
  dl_iterate_phdr(
      [](dl_phdr_info*, size_t, void* data) -> int {
        auto& s = *static_cast<Survey*>(data);
        try {
          s.objs = objects();
          const std::vector<Known*> k = remember(s.objs);
          for (size_t i = 0; i < s.objs.size(); ++i) {
            const Object& o = s.objs[i];
            const bool own = own_library(o.base);
            if (!k[i]->code || (own && !(s.parts & kOwn))) continue;
            Library lib;
            lib.path = o.path;
            lib.base = o.base;
            lib.code = k[i]->code;
            lib.own = own;
            if (s.parts & kNames) count_names(o, lib);
            s.out.push_back(std::move(lib));
            s.of.push_back(i);
          }
          if ((s.parts & kReach) && !s.out.empty()) find_reach(s.objs, k, s.of, s.out);
        } catch (...) {
          s.failed = true;
        }
        return 1;  // once
      },
      &s);
  if (s.failed) throw std::bad_alloc();
  // The probes call library code, which must not run under the loader's lock (its lazy binding
  // may want the loader).
  if (parts & kWidths)
    for (size_t l = 0; l < s.out.size(); ++l)
      if (defines_plain(s.objs[s.of[l]])) s.out[l].plain_bits = plain_bits(s.objs[s.of[l]], s.objs);
  return std::move(s.out);
}

void* native_routine(const Node& node, Sym routine) noexcept {
  static std::atomic<void*> cache[kNumSymbols];
  static std::atomic<uint8_t> looked[kNumSymbols];
  const Sym own = in_family(routine, symbol_family(node.sym));
  if (own == kNoRoutine) return nullptr;
  const auto i = static_cast<size_t>(own);
  if (!looked[i].load(std::memory_order_acquire)) {
    cache[i].store(find_native(symbol_name(own)), std::memory_order_relaxed);
    looked[i].store(1, std::memory_order_release);
  }
  return cache[i].load(std::memory_order_relaxed);
}

}  // namespace sol::capture::blas
