// An append-only file written through shared memory mappings.
//
// Everything appended is in the kernel's page cache the moment the copy finishes, so it survives
// the process however it ends (_exit, a signal, SIGKILL), without a system call per append. The
// file grows in chunks; the unused tail of the last chunk is spaces, which JSON readers skip,
// until close() truncates it. Appends from many threads reserve their bytes with one atomic add.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>

namespace sol::capture::trace {

class MappedFile {
 public:
  MappedFile() = default;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  // Creates (truncating) the file. False with `error` set when it cannot be written.
  bool open(const std::string& path, std::string& error) noexcept;
  bool is_open() const noexcept { return fd_ >= 0; }

  // Thread-safe. Dropped silently after close() or when the file could not grow.
  void append(const char* data, size_t len) noexcept;

  // Appends `tail`, waits for appends in flight, cuts the file to its content, unmaps, closes.
  void close(const char* tail) noexcept;

  // In a forked child: forget the parent's file without writing to it.
  void abandon() noexcept;

 private:
  static constexpr size_t kChunk = size_t{8} << 20;
  static constexpr size_t kMaxChunks = 1 << 14;  // 128 GiB

  bool grow(uint64_t end) noexcept;
  void release() noexcept;

  int fd_ = -1;
  std::atomic<char*>* chunks_ = nullptr;  // kMaxChunks mappings of kChunk bytes each
  std::atomic<uint64_t> reserved_{0};     // bytes handed out to appends
  std::atomic<uint64_t> mapped_{0};       // bytes backed by mappings
  std::atomic<int> writers_{0};
  std::atomic<bool> closed_{false};
  std::atomic<bool> broken_{false};  // growing failed (disk full...): appends are dropped
  std::mutex grow_mu_;
};

}  // namespace sol::capture::trace
