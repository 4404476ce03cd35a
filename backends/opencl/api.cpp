#include "backends/opencl/api.hpp"

#include <dlfcn.h>
#include <sys/stat.h>

namespace sol::backends::opencl {
namespace {

// dlopen once per library; the handle stays open for the life of the process (see api.hpp).
void* open_library(const char* library, std::string& why) noexcept {
  void* handle = dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* err = dlerror();
    why = err ? err : std::string(library) + ": cannot be opened";
  }
  return handle;
}

template <class F>
bool resolve(void* handle, const char* library, const char* symbol, F& slot, std::string& why) noexcept {
  slot = reinterpret_cast<F>(dlsym(handle, symbol));
  if (!slot) why = std::string(library) + ": no symbol " + symbol;
  return slot != nullptr;
}

}  // namespace

bool load(ClApi& api, const char* library, std::string& why) noexcept {
  void* handle = open_library(library, why);
  if (!handle) return false;
#define SOL_CL_FN(name) \
  if (!resolve(handle, library, #name, api.name, why)) return false;
#include "backends/opencl/cl_functions.def"
#undef SOL_CL_FN
  return true;
}

bool load(ClblastApi& api, const char* library, std::string& why) noexcept {
  void* handle = open_library(library, why);
  if (!handle) return false;
#define SOL_CLBLAST_FN(name) \
  if (!resolve(handle, library, "CLBlast" #name, api.name, why)) return false;
#include "backends/opencl/clblast_functions.def"
#undef SOL_CLBLAST_FN
  return true;
}

const char* status_name(int code) noexcept {
  switch (code) {
#define SOL_STATUS(name) \
  case name: return #name;
    SOL_STATUS(CL_SUCCESS)
    SOL_STATUS(CL_DEVICE_NOT_FOUND)
    SOL_STATUS(CL_DEVICE_NOT_AVAILABLE)
    SOL_STATUS(CL_COMPILER_NOT_AVAILABLE)
    SOL_STATUS(CL_MEM_OBJECT_ALLOCATION_FAILURE)
    SOL_STATUS(CL_OUT_OF_RESOURCES)
    SOL_STATUS(CL_OUT_OF_HOST_MEMORY)
    SOL_STATUS(CL_PROFILING_INFO_NOT_AVAILABLE)
    SOL_STATUS(CL_MEM_COPY_OVERLAP)
    SOL_STATUS(CL_IMAGE_FORMAT_MISMATCH)
    SOL_STATUS(CL_IMAGE_FORMAT_NOT_SUPPORTED)
    SOL_STATUS(CL_BUILD_PROGRAM_FAILURE)
    SOL_STATUS(CL_MAP_FAILURE)
    SOL_STATUS(CL_MISALIGNED_SUB_BUFFER_OFFSET)
    SOL_STATUS(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
    SOL_STATUS(CL_COMPILE_PROGRAM_FAILURE)
    SOL_STATUS(CL_LINKER_NOT_AVAILABLE)
    SOL_STATUS(CL_LINK_PROGRAM_FAILURE)
    SOL_STATUS(CL_INVALID_VALUE)
    SOL_STATUS(CL_INVALID_DEVICE_TYPE)
    SOL_STATUS(CL_INVALID_PLATFORM)
    SOL_STATUS(CL_INVALID_DEVICE)
    SOL_STATUS(CL_INVALID_CONTEXT)
    SOL_STATUS(CL_INVALID_QUEUE_PROPERTIES)
    SOL_STATUS(CL_INVALID_COMMAND_QUEUE)
    SOL_STATUS(CL_INVALID_HOST_PTR)
    SOL_STATUS(CL_INVALID_MEM_OBJECT)
    SOL_STATUS(CL_INVALID_BINARY)
    SOL_STATUS(CL_INVALID_BUILD_OPTIONS)
    SOL_STATUS(CL_INVALID_PROGRAM)
    SOL_STATUS(CL_INVALID_PROGRAM_EXECUTABLE)
    SOL_STATUS(CL_INVALID_KERNEL_NAME)
    SOL_STATUS(CL_INVALID_KERNEL_DEFINITION)
    SOL_STATUS(CL_INVALID_KERNEL)
    SOL_STATUS(CL_INVALID_ARG_INDEX)
    SOL_STATUS(CL_INVALID_ARG_VALUE)
    SOL_STATUS(CL_INVALID_ARG_SIZE)
    SOL_STATUS(CL_INVALID_KERNEL_ARGS)
    SOL_STATUS(CL_INVALID_WORK_DIMENSION)
    SOL_STATUS(CL_INVALID_WORK_GROUP_SIZE)
    SOL_STATUS(CL_INVALID_WORK_ITEM_SIZE)
    SOL_STATUS(CL_INVALID_GLOBAL_OFFSET)
    SOL_STATUS(CL_INVALID_EVENT_WAIT_LIST)
    SOL_STATUS(CL_INVALID_EVENT)
    SOL_STATUS(CL_INVALID_OPERATION)
    SOL_STATUS(CL_INVALID_BUFFER_SIZE)
    SOL_STATUS(CL_INVALID_GLOBAL_WORK_SIZE)
    SOL_STATUS(CLBlastNotImplemented)
    SOL_STATUS(CLBlastInvalidMatrixA)
    SOL_STATUS(CLBlastInvalidMatrixB)
    SOL_STATUS(CLBlastInvalidMatrixC)
    SOL_STATUS(CLBlastInvalidVectorX)
    SOL_STATUS(CLBlastInvalidVectorY)
    SOL_STATUS(CLBlastInvalidDimension)
    SOL_STATUS(CLBlastInvalidLeadDimA)
    SOL_STATUS(CLBlastInvalidLeadDimB)
    SOL_STATUS(CLBlastInvalidLeadDimC)
    SOL_STATUS(CLBlastInvalidIncrementX)
    SOL_STATUS(CLBlastInvalidIncrementY)
    SOL_STATUS(CLBlastInsufficientMemoryA)
    SOL_STATUS(CLBlastInsufficientMemoryB)
    SOL_STATUS(CLBlastInsufficientMemoryC)
    SOL_STATUS(CLBlastInsufficientMemoryX)
    SOL_STATUS(CLBlastInsufficientMemoryY)
    SOL_STATUS(CLBlastInsufficientMemoryTemp)
    SOL_STATUS(CLBlastInvalidLocalMemUsage)
    SOL_STATUS(CLBlastNoDoublePrecision)
    SOL_STATUS(CLBlastInvalidVectorScalar)
    SOL_STATUS(CLBlastInsufficientMemoryScalar)
    SOL_STATUS(CLBlastDatabaseError)
    SOL_STATUS(CLBlastUnknownError)
    SOL_STATUS(CLBlastUnexpectedError)
#undef SOL_STATUS
    default: return "unknown status";
  }
}

}  // namespace sol::backends::opencl
