// Builds OpenCL programs, keeping their binaries on disk so that the next process loads them
// instead of compiling (pocl spends seconds in clang/LLVM per program; GPU drivers less, but
// still far more than a call).
//
// One file per program: <dir>/<name>-<hash>.clbin, where the hash covers everything the binary
// depends on (platform and device name and version, driver version, build options, source).
// A file is written to a temporary name and renamed into place, so concurrent processes never
// see a partial file. A file that does not load is replaced by a fresh compile: one that is
// truncated or corrupt (its header holds a digest of the rest) with one line saying so, one the
// driver rejects (a driver rebuilt under the same version) quietly below warn.
//
// The binaries are native code that this process runs: a directory another user can write
// (fs_safety::untrusted_reason) is not used, a file that is not the user's own is not read, and
// SOL creates its directories 0700 and its files 0600.
#pragma once

#include <cstdint>
#include <string>

#include "backends/opencl/api.hpp"
#include "common/hash.hpp"

namespace sol::backends::opencl {

// `dir` when SOL may keep compiled programs (or what it learnt about devices) there, else "" after
// one line saying why not. A directory that does not exist yet is judged by its existing part.
std::string trusted_cache_dir(const std::string& dir);


class ProgramCache {
 public:
  // `dir` empty or not trusted: no disk cache, every program is compiled. `device_key`
  // identifies the device and driver (see Device::open).
  ProgramCache(const ClApi& cl, cl_context context, cl_device_id device, std::string dir,
               std::string device_key)
      : cl_(cl),
        context_(context),
        device_(device),
        dir_(trusted_cache_dir(dir)),
        device_key_(std::move(device_key)) {}

  // A built program, or nullptr with `why` (the build log for a compile error).
  cl_program build(const char* name, const std::string& source, const std::string& options, std::string& why);

  // What the last build() did, for tests and `sol backends`.
  enum class Origin { none, compiled, loaded };
  Origin last_origin() const noexcept { return last_origin_; }

  // The pieces of build(), for programs whose source and build options arrive in separate calls
  // (CLBlast's, clblast_programs.hpp). An Entry names the file of a program called `name` whose
  // binary depends on `key` besides the device: its source, and what decides its options.
  struct Entry {
    std::string name;
    std::string path;
    uint64_t check = 0;
  };
  bool enabled() const noexcept { return !dir_.empty(); }
  Entry entry(const char* name, const std::string& key) const;
  // A short hash of the device and `key`, for names that several programs share.
  uint32_t tag(const std::string& key) const;
  // The entry of a file whose name begins with `name`, whatever its hash, for a program to be
  // loaded before its source is known; its check is read from the file. false when there is none.
  bool find(const char* name, Entry& out) const;
  // The program stored for `entry`, built with the options it was stored with (set in
  // `options`); nullptr when there is none or it does not load (see the top of this file).
  cl_program load(const Entry& entry, std::string& options);
  // Stores a program built with `options`; a failure only costs the next process a compile.
  void store(const Entry& entry, const std::string& options, cl_program program);
  // Counts a compile done outside build() (CLBlast's), for the totals below.
  static void count_compiled() noexcept;

  // Programs loaded from disk and compiled by this process, all caches together.
  struct Totals {
    int loaded, compiled;
  };
  static Totals totals() noexcept;

 private:
  const ClApi& cl_;
  cl_context context_;
  cl_device_id device_;
  std::string dir_;
  std::string device_key_;
  Origin last_origin_ = Origin::none;
};

}  // namespace sol::backends::opencl
