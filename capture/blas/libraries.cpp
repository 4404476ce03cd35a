#include "capture/blas/libraries.hpp"

#include <dlfcn.h>
#include <link.h>

#include <cstring>
#include <string_view>
#include <unordered_set>

#include "common/native.hpp"

namespace sol::capture::blas {
namespace {

// A loaded object as dl_iterate_phdr reports it, read after the loader's lock is released (the
// program headers stay mapped while the object is loaded, which a dlopen reference ensures).
struct Object {
  std::string path;
  uintptr_t base;
  const ElfW(Phdr) * phdr;
  ElfW(Half) phnum;
};

std::vector<Object> objects() {
  std::vector<Object> out;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) -> int {
        if (info->dlpi_name && *info->dlpi_name)
          static_cast<std::vector<Object>*>(data)->push_back(
              {info->dlpi_name, info->dlpi_addr, info->dlpi_phdr, info->dlpi_phnum});
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

// Whether the object at `base` defines `name` itself (dlsym on its handle also finds what its
// dependencies define).
bool defines(void* handle, uintptr_t base, const char* name) noexcept {
  void* p = dlsym(handle, name);
  if (!p) return false;
  Dl_info info{};
  link_map* map = nullptr;
  return dladdr1(p, &info, reinterpret_cast<void**>(&map), RTLD_DL_LINKMAP) && map && map->l_addr == base;
}

// Every name libsol intercepts in the BLAS, CBLAS and oneDNN APIs, aliases included (sgemm, SGEMM).
const std::unordered_set<std::string_view>& intercepted() {
  static const auto* names = [] {
    static std::vector<std::string> aliases;
    auto* set = new std::unordered_set<std::string_view>;
    for (size_t i = 0; i < kNumSymbols; ++i) {
      const auto s = static_cast<Sym>(i);
      if (symbol_api(s) != Api::blas && symbol_api(s) != Api::cblas && symbol_api(s) != Api::dnnl) continue;
      set->insert(symbol_name(s));
    }
    aliases.reserve(2 * kNumSymbols);
    for (size_t i = 0; i < kNumSymbols; ++i) {
      const auto s = static_cast<Sym>(i);
      const std::string n = symbol_name(s);
      if (symbol_family(s) != Family::plain || symbol_api(s) != Api::blas || n.ends_with("sub_")) continue;
      std::string upper = n.substr(0, n.size() - 1);
      for (char& c : upper) c = static_cast<char>(c - ('a' <= c && c <= 'z' ? 'a' - 'A' : 0));
      aliases.push_back(n.substr(0, n.size() - 1));
      aliases.push_back(upper);
      set->insert(aliases[aliases.size() - 2]);
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
  const ElfW(Dyn)* dyn = nullptr;
  for (ElfW(Half) i = 0; i < o.phnum; ++i)
    if (o.phdr[i].p_type == PT_DYNAMIC) dyn = reinterpret_cast<const ElfW(Dyn)*>(o.base + o.phdr[i].p_vaddr);
  if (!dyn) return;
  uintptr_t symtab = 0, strtab = 0, jmprel = 0, rela = 0;
  size_t strsz = 0, pltrelsz = 0, relasz = 0;
  bool plt_rela = false;
  for (const ElfW(Dyn)* d = dyn; d->d_tag != DT_NULL; ++d) {
    switch (d->d_tag) {
      case DT_SYMTAB: symtab = d->d_un.d_ptr; break;
      case DT_STRTAB: strtab = d->d_un.d_ptr; break;
      case DT_STRSZ: strsz = d->d_un.d_val; break;
      case DT_JMPREL: jmprel = d->d_un.d_ptr; break;
      case DT_PLTRELSZ: pltrelsz = d->d_un.d_val; break;
      case DT_PLTREL: plt_rela = d->d_un.d_val == DT_RELA; break;
      case DT_RELA: rela = d->d_un.d_ptr; break;
      case DT_RELASZ: relasz = d->d_un.d_val; break;
      default: break;
    }
  }
  if (!symtab || !strtab) return;
  // glibc relocates these addresses in place, though not in every object (the vDSO's stay
  // offsets): one below the load address is still an offset.
  auto at = [&](uintptr_t v) { return v < o.base ? v + o.base : v; };
  const auto* syms = reinterpret_cast<const ElfW(Sym)*>(at(symtab));
  const char* strings = reinterpret_cast<const char*>(at(strtab));
  auto walk = [&](uintptr_t table, size_t bytes) {
    const auto* r = reinterpret_cast<const ElfW(Rela)*>(at(table));
    for (size_t i = 0; i < bytes / sizeof(ElfW(Rela)); ++i) {
      const size_t index = ELF64_R_SYM(r[i].r_info);
      if (index && syms[index].st_name < strsz) fn(std::string_view(strings + syms[index].st_name));
    }
  };
  if (jmprel && plt_rela) walk(jmprel, pltrelsz);
  if (rela) walk(rela, relasz);
}

// Whose BLAS or DNN code the object holds, by the names it defines itself.
const char* code_of(void* h, uintptr_t base) {
  for (size_t f = 1; f < kNumFamilies; ++f)
    if (defines(h, base, family_c_name(static_cast<Family>(f), "openblas_get_config").c_str()))
      return "OpenBLAS";
  for (const char* n : {"MKL_Get_Version", "MKL_Get_Version_String", "mkl_get_version"})
    if (defines(h, base, n)) return "MKL";
  if (defines(h, base, "bli_info_get_version_str")) return "BLIS";
  for (size_t f = 1; f < kNumFamilies; ++f) {
    const auto family = static_cast<Family>(f);
    for (const char* n : {"sgemm", "dgemm", "daxpy", "idamax"})
      if (defines(h, base, family_fortran_name(family, n).c_str())) return "BLAS";
    for (const char* n : {"cblas_sgemm", "cblas_dgemm", "cblas_daxpy"})
      if (defines(h, base, family_c_name(family, n).c_str())) return "BLAS";
  }
  for (const char* n : {"dnnl_primitive_execute", "dnnl_sgemm", "dnnl_version"})
    if (defines(h, base, n)) return "oneDNN";
  return nullptr;
}

bool defines_plain(void* h, uintptr_t base) {
  for (const char* n :
       {"dgemm_", "sgemm_", "idamax_", "daxpy_", "cblas_dgemm", "cblas_sgemm", "cblas_idamax"})
    if (defines(h, base, n)) return true;
  return false;
}

void count_names(void* h, Library& lib) {
  for (size_t i = 0; i < kNumSymbols; ++i) {
    const auto s = static_cast<Sym>(i);
    const Api api = symbol_api(s);
    if (api != Api::blas && api != Api::cblas && api != Api::dnnl) continue;
    if (!defines(h, lib.base, symbol_name(s))) continue;
    if (api == Api::dnnl)
      ++lib.dnnl_names;
    else
      ++lib.names[static_cast<size_t>(symbol_family(s))];
  }
}

// reaches_sol and called, from every loaded object's relocations.
void find_reach(const std::vector<Object>& objs, std::vector<Library>& out, std::vector<void*>& handles) {
  const auto& names = intercepted();
  std::vector<std::vector<std::string_view>> named(objs.size());  // intercepted names each relocates
  for (size_t i = 0; i < objs.size(); ++i) {
    void* pin = dlopen(objs[i].path.c_str(), RTLD_LAZY | RTLD_NOLOAD);
    if (!pin) continue;
    std::unordered_set<std::string_view> seen;
    for_each_relocated(objs[i], [&](std::string_view n) {
      if (names.count(n) && seen.insert(n).second) named[i].push_back(n);
    });
    dlclose(pin);
  }
  for (size_t l = 0; l < out.size(); ++l) {
    Library& lib = out[l];
    for (size_t i = 0; i < objs.size(); ++i) {
      if (objs[i].base != lib.base) {
        for (std::string_view n : named[i])
          if (!lib.called && defines(handles[l], lib.base, std::string(n).c_str())) lib.called = true;
      } else {
        lib.reaches_sol = !named[i].empty();
      }
    }
  }
}

}  // namespace

int int_bits(void* lib, Family family) noexcept {
  try {
    if (auto get = reinterpret_cast<const char* (*)()>(
            dlsym(lib, family_c_name(family, "openblas_get_config").c_str()))) {
      const char* config = get();
      return config && std::strstr(config, "USE64BITINT") ? 64 : 32;
    }
    // N's eight bytes hold 2 in the low half and -1 in the high one; INCX's hold 1 either way.
    alignas(8) const int32_t n[2] = {2, -1};
    alignas(8) const int32_t inc[2] = {1, 0};
    const double x[2] = {1.0, 5.0};
    using Fortran = int (*)(const void*, const double*, const void*);
    if (auto f = reinterpret_cast<Fortran>(dlsym(lib, family_fortran_name(family, "idamax").c_str()))) {
      const int r = f(n, x, inc);  // 1-based
      return r == 0 ? 64 : r == 2 ? 32 : 0;
    }
    // CBLAS takes them by value: the same eight bytes in a register.
    using Cblas = size_t (*)(int64_t, const double*, int64_t);
    if (auto f = reinterpret_cast<Cblas>(dlsym(lib, family_c_name(family, "cblas_idamax").c_str()))) {
      int64_t wide;
      std::memcpy(&wide, n, sizeof wide);
      const size_t r = f(wide, x, 1);  // 0-based
      return r == 0 ? 64 : r == 1 ? 32 : 0;
    }
  } catch (...) {  // allocation failure: not known
  }
  return 0;
}

std::vector<Library> survey(unsigned parts) {
  const std::vector<Object> objs = objects();
  std::vector<Library> out;
  std::vector<void*> handles;  // out's, held until the survey ends
  for (const Object& o : objs) {
    if (own_library(o.base)) continue;
    void* h = dlopen(o.path.c_str(), RTLD_LAZY | RTLD_NOLOAD);
    if (!h) continue;
    const char* code = is_libsol(o) ? nullptr : code_of(h, o.base);
    if (!code) {
      dlclose(h);
      continue;
    }
    Library lib;
    lib.path = o.path;
    lib.base = o.base;
    lib.code = code;
    if ((parts & kWidths) && defines_plain(h, o.base)) lib.plain_bits = int_bits(h, Family::plain);
    if (parts & kNames) count_names(h, lib);
    out.push_back(std::move(lib));
    handles.push_back(h);
  }
  if ((parts & kReach) && !out.empty()) find_reach(objs, out, handles);
  for (void* h : handles) dlclose(h);
  return out;
}

}  // namespace sol::capture::blas
