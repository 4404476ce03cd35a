#include "backends/opencl/clblast_programs.hpp"

#include <dlfcn.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "backends/opencl/import_hook.hpp"
#include "backends/opencl/program_cache.hpp"
#include "common/log.hpp"

namespace sol::backends::opencl::clblast_programs {
namespace {

struct Route {
  cl_context context;
  ProgramCache* cache;
  std::string key;  // what CLBlast's programs depend on besides the device and their source
  std::string tag;  // the device and that key, in short, for file names
};

// A program preload() loaded, until CLBlast asks for it.
struct Preloaded {
  cl_context context;
  ProgramCache::Entry entry;
  std::string options;
  cl_program program;
};

// A program between CLBlast's create and build calls.
struct Pending {
  ProgramCache* cache = nullptr;
  ProgramCache::Entry entry;
  std::string options;     // from_disk: the options it was built with
  bool from_disk = false;  // created from the cache file and already built
};

// The real entry points (libOpenCL's, resolved by the backend), set before the redirection.
decltype(&::clCreateProgramWithSource) g_create = nullptr;
decltype(&::clBuildProgram) g_build = nullptr;
decltype(&::clReleaseProgram) g_release = nullptr;
std::atomic<bool> g_active{false};       // both imports redirected
std::atomic<bool> g_preexisting{false};  // the program's own libclblast: never patched

std::mutex g_mu;  // guards the tables; CLBlast builds at most a few programs per process
std::vector<Route> g_routes;
std::unordered_map<cl_program, Pending> g_pending;
std::vector<Preloaded> g_preloaded;

thread_local char t_routine[32] = "";

bool route_for(cl_context context, Route& out) {
  std::lock_guard<std::mutex> lock(g_mu);
  for (const Route& r : g_routes)
    if (r.context == context) {
      out = r;
      return true;
    }
  return false;
}

std::string file_name(const char* routine, const Route& r) {
  return std::string("clblast_") + (*routine ? routine : "other") + "_" + r.tag;
}

// The preloaded program for `entry`, taken out of the table; nullptr when there is none.
cl_program take_preloaded(cl_context context, const ProgramCache::Entry& entry, std::string& options) {
  std::lock_guard<std::mutex> lock(g_mu);
  for (size_t i = 0; i < g_preloaded.size(); ++i) {
    Preloaded& p = g_preloaded[i];
    if (p.context != context || p.entry.path != entry.path || p.entry.check != entry.check) continue;
    cl_program program = p.program;
    options = std::move(p.options);
    g_preloaded.erase(g_preloaded.begin() + static_cast<std::ptrdiff_t>(i));
    return program;
  }
  return nullptr;
}

cl_program CL_API_CALL create_with_source(cl_context context, cl_uint count, const char** strings,
                                          const size_t* lengths, cl_int* errcode_ret) {
  cl_program program = nullptr;
  try {
    Route route;
    if (!g_active.load(std::memory_order_acquire) || !strings || !route_for(context, route))
      return g_create(context, count, strings, lengths, errcode_ret);
    std::string key = route.key;
    key += '\0';
    for (cl_uint i = 0; i < count; ++i)
      key.append(strings[i], lengths && lengths[i] ? lengths[i] : std::strlen(strings[i]));
    Pending p;
    p.cache = route.cache;
    p.entry = route.cache->entry(file_name(t_routine, route).c_str(), key);
    program = take_preloaded(context, p.entry, p.options);
    if (!program) program = route.cache->load(p.entry, p.options);
    p.from_disk = program != nullptr;
    if (program && errcode_ret) *errcode_ret = CL_SUCCESS;
    if (!program) program = g_create(context, count, strings, lengths, errcode_ret);
    if (!program) return nullptr;
    std::lock_guard<std::mutex> lock(g_mu);
    g_pending[program] = std::move(p);
    return program;
  } catch (...) {
    // Out of memory. A program already created goes back without bookkeeping: CLBlast's build
    // call then builds it as the driver would (again, for one from disk).
  }
  return program ? program : g_create(context, count, strings, lengths, errcode_ret);
}

cl_int CL_API_CALL build(cl_program program, cl_uint num_devices, const cl_device_id* devices, const char* options,
                         void(CL_CALLBACK* notify)(cl_program, void*), void* user_data) {
  Pending p;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = g_pending.find(program);
    if (it == g_pending.end()) return g_build(program, num_devices, devices, options, notify, user_data);
    p = std::move(it->second);
    g_pending.erase(it);
  }
  const char* wanted = options ? options : "";
  if (p.from_disk) {
    if (p.options == wanted && !notify) return CL_SUCCESS;
    SOL_LOG(debug, "opencl: CLBlast builds %s with other options than it was stored with", p.entry.path.c_str());
    return g_build(program, num_devices, devices, options, notify, user_data);
  }
  const auto t0 = std::chrono::steady_clock::now();
  const cl_int status = g_build(program, num_devices, devices, options, notify, user_data);
  if (status != CL_SUCCESS) return status;
  ProgramCache::count_compiled();
  SOL_LOG(debug, "opencl: compiled program %s (%.1f ms)", p.entry.name.c_str(),
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  try {
    p.cache->store(p.entry, wanted, program);
  } catch (...) {  // out of memory: the next process compiles it again
  }
  return status;
}

}  // namespace

void note_preexisting(const char* library) noexcept {
  static std::once_flag once;
  std::call_once(once, [library] {
    if (void* handle = dlopen(library, RTLD_NOW | RTLD_NOLOAD)) {
      g_preexisting.store(true, std::memory_order_relaxed);
      dlclose(handle);  // drops the reference RTLD_NOLOAD just added, nothing more
    }
  });
}

bool install(const char* library, const ClApi& cl, std::string& why) noexcept {
  static std::once_flag once;
  static std::string reason;
  std::call_once(once, [&] {
    try {
      if (g_preexisting.load(std::memory_order_relaxed)) {
        reason = "the program loaded its own libclblast, which SOL leaves as it is";
        return;
      }
      g_create = cl.clCreateProgramWithSource;
      g_build = cl.clBuildProgram;
      g_release = cl.clReleaseProgram;
      void* handle = dlopen(library, RTLD_NOW | RTLD_NOLOAD);
      std::string error;
      if (redirect_import(handle, "clCreateProgramWithSource", reinterpret_cast<void*>(&create_with_source),
                          error) &&
          redirect_import(handle, "clBuildProgram", reinterpret_cast<void*>(&build), error))
        g_active.store(true, std::memory_order_release);
      else
        reason = std::string(library) + ": " + error;
    } catch (...) {
      reason = "out of memory";
    }
  });
  if (!g_active.load(std::memory_order_acquire)) why = reason;
  return g_active.load(std::memory_order_acquire);
}

void add(cl_context context, ProgramCache* cache, std::string key) {
  if (!cache->enabled()) return;
  char tag[16];
  std::snprintf(tag, sizeof tag, "%08x", cache->tag(key));
  std::lock_guard<std::mutex> lock(g_mu);
  g_routes.push_back(Route{context, cache, std::move(key), tag});
}

void remove(cl_context context) noexcept {
  std::lock_guard<std::mutex> lock(g_mu);
  for (size_t i = 0; i < g_routes.size(); ++i)
    if (g_routes[i].context == context) {
      g_routes.erase(g_routes.begin() + static_cast<std::ptrdiff_t>(i));
      break;
    }
  for (size_t i = g_preloaded.size(); i-- > 0;)
    if (g_preloaded[i].context == context) {
      if (g_release) g_release(g_preloaded[i].program);
      g_preloaded.erase(g_preloaded.begin() + static_cast<std::ptrdiff_t>(i));
    }
}

bool preload(cl_context context, const char* routine) {
  Route route;
  if (!g_active.load(std::memory_order_acquire) || !route_for(context, route)) return false;
  Preloaded p{context, {}, {}, nullptr};
  if (!route.cache->find(file_name(routine, route).c_str(), p.entry)) return false;
  p.program = route.cache->load(p.entry, p.options);
  if (!p.program) return false;
  std::lock_guard<std::mutex> lock(g_mu);
  g_preloaded.push_back(std::move(p));
  return true;
}

Routine::Routine(char precision, const char* op) noexcept {
  t_routine[0] = precision;
  std::strncpy(t_routine + 1, op, sizeof t_routine - 2);
  t_routine[sizeof t_routine - 1] = '\0';
}
Routine::~Routine() {
  t_routine[0] = '\0';
}

}  // namespace sol::backends::opencl::clblast_programs
