#include "backends/opencl/import_hook.hpp"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>

namespace sol::backends::opencl {
namespace {

#if defined(__x86_64__)
constexpr uint32_t kJumpSlot = R_X86_64_JUMP_SLOT, kGlobDat = R_X86_64_GLOB_DAT;
#elif defined(__aarch64__)
constexpr uint32_t kJumpSlot = R_AARCH64_JUMP_SLOT, kGlobDat = R_AARCH64_GLOB_DAT;
#else
constexpr uint32_t kJumpSlot = 0, kGlobDat = 0;  // unknown: redirect_import declines
#endif

// The library's read-only-after-relocation range (PT_GNU_RELRO): with BIND_NOW (libclblast is
// linked -z now) its GOT lies there and must be made writable for the change.
struct Relro {
  uintptr_t bias;
  const char* name;
  uintptr_t begin = 0, end = 0;
};

int find_relro(dl_phdr_info* info, size_t, void* data) {
  auto* r = static_cast<Relro*>(data);
  if (info->dlpi_addr != r->bias || std::strcmp(info->dlpi_name, r->name) != 0) return 0;
  for (int i = 0; i < info->dlpi_phnum; ++i)
    if (info->dlpi_phdr[i].p_type == PT_GNU_RELRO) {
      r->begin = r->bias + info->dlpi_phdr[i].p_vaddr;
      r->end = r->begin + info->dlpi_phdr[i].p_memsz;
    }
  return 1;
}

// Writes `value` into a GOT slot, lifting the RELRO protection for the moment of the write.
bool write_slot(void** slot, void* value, const Relro& relro) noexcept {
  const auto at = reinterpret_cast<uintptr_t>(slot);
  const bool protected_slot = at >= relro.begin && at < relro.end;
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  void* first = reinterpret_cast<void*>(at & ~(page - 1));
  const size_t len = ((at + sizeof(void*) + page - 1) & ~(page - 1)) - (at & ~(page - 1));
  if (protected_slot && ::mprotect(first, len, PROT_READ | PROT_WRITE) != 0) return false;
  __atomic_store_n(slot, value, __ATOMIC_RELEASE);
  if (protected_slot) ::mprotect(first, len, PROT_READ);
  return true;
}

}  // namespace

bool redirect_import(void* handle, const char* symbol, void* replacement, std::string& why) noexcept {
  if (kJumpSlot == 0) {
    why = "not supported on this architecture";
    return false;
  }
  link_map* map = nullptr;
  if (!handle || ::dlinfo(handle, RTLD_DI_LINKMAP, &map) != 0 || !map) {
    why = "no link map for the library";
    return false;
  }
  const auto bias = static_cast<uintptr_t>(map->l_addr);
  // glibc relocates these addresses in the dynamic section in place; where it does not (a
  // read-only dynamic section), they are still offsets from the load address.
  auto address = [bias](ElfW(Addr) a) { return a < bias ? a + bias : a; };

  const ElfW(Sym)* symtab = nullptr;
  const char* strtab = nullptr;
  const ElfW(Rela)* tables[2] = {nullptr, nullptr};  // the PLT's relocations, then the others
  size_t sizes[2] = {0, 0};
  bool rela = true;
  for (const ElfW(Dyn)* d = map->l_ld; d->d_tag != DT_NULL; ++d) {
    switch (d->d_tag) {
      case DT_SYMTAB: symtab = reinterpret_cast<const ElfW(Sym)*>(address(d->d_un.d_ptr)); break;
      case DT_STRTAB: strtab = reinterpret_cast<const char*>(address(d->d_un.d_ptr)); break;
      case DT_JMPREL: tables[0] = reinterpret_cast<const ElfW(Rela)*>(address(d->d_un.d_ptr)); break;
      case DT_PLTRELSZ: sizes[0] = d->d_un.d_val; break;
      case DT_RELA: tables[1] = reinterpret_cast<const ElfW(Rela)*>(address(d->d_un.d_ptr)); break;
      case DT_RELASZ: sizes[1] = d->d_un.d_val; break;
      case DT_PLTREL: rela = d->d_un.d_val == DT_RELA; break;
      default: break;
    }
  }
  if (!symtab || !strtab || !rela) {
    why = "its dynamic section has no symbol table or uses REL relocations";
    return false;
  }

  Relro relro{bias, map->l_name};
  dl_iterate_phdr(find_relro, &relro);
  int found = 0;
  for (int t = 0; t < 2; ++t) {
    if (!tables[t]) continue;
    const size_t count = sizes[t] / sizeof(ElfW(Rela));
    for (size_t i = 0; i < count; ++i) {
      const ElfW(Rela)& r = tables[t][i];
      const uint32_t type = ELF64_R_TYPE(r.r_info);
      if (type != kJumpSlot && type != kGlobDat) continue;
      const ElfW(Sym)& s = symtab[ELF64_R_SYM(r.r_info)];
      if (std::strcmp(strtab + s.st_name, symbol) != 0) continue;
      if (!write_slot(reinterpret_cast<void**>(bias + r.r_offset), replacement, relro)) {
        why = std::string("cannot make the import table writable for ") + symbol;
        return false;
      }
      ++found;
    }
  }
  if (found == 0) why = std::string("it does not import ") + symbol;
  return found > 0;
}

}  // namespace sol::backends::opencl
