// The OpenCL ICD loader and CLBlast, opened with dlopen at init() and called through our own
// function tables. libsol is preloaded into every process (shells, compilers...), so neither
// library is linked: the backend costs nothing until a node is routed to it. The headers are
// included for their types only.
#pragma once

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include <CL/cl.h>
#include <clblast_c.h>

#include <string>

namespace sol::backends::opencl {

struct ClApi {
#define SOL_CL_FN(name) decltype(&::name) name = nullptr;
#include "backends/opencl/cl_functions.def"
#undef SOL_CL_FN
};

struct ClblastApi {
#define SOL_CLBLAST_FN(name) decltype(&::CLBlast##name) name = nullptr;
#include "backends/opencl/clblast_functions.def"
#undef SOL_CLBLAST_FN
};

// Opens `library` (RTLD_LOCAL: its symbols must not interpose on the host program's) and fills
// the table. false with `why` ("libclblast.so.1: cannot open shared object file", "libOpenCL.so.1:
// no symbol clCreateBuffer") when the library or one of its symbols is missing. The handles are
// never closed: a library such as an ICD may not survive being unloaded while its threads run.
bool load(ClApi& api, const char* library, std::string& why) noexcept;
bool load(ClblastApi& api, const char* library, std::string& why) noexcept;

// "CL_OUT_OF_RESOURCES" for -5, for log lines; CLBlast's own codes by their CLBlast names.
const char* status_name(int code) noexcept;

}  // namespace sol::backends::opencl
