// The trace.json file: blocks of whole events appended with one write(2) each.
//
// Threads fill buffers of their own (ThreadState::out) and hand them over here when full and at
// the end of the process, so a call costs a memcpy, not a system call. On this kind of file
// system a write(2) of a block costs less than half of what a shared mapping of the file does
// (ext4 allocates and journals at the first store to every page of a mapping). The price: a
// process killed by a signal loses the events still in its threads' buffers; the file is then a
// loadable prefix. exit(), _exit() and Python's shutdown flush everything.
#pragma once

#include <atomic>
#include <cstddef>
#include <string>

namespace sol::capture::trace {

class TraceFile {
 public:
  TraceFile() = default;
  TraceFile(const TraceFile&) = delete;
  TraceFile& operator=(const TraceFile&) = delete;

  // Creates (replacing a trace file of an earlier process of this user) the file, mode 0600, with
  // `header` as its first bytes. False with `error` set when it cannot be written, or when a
  // symbolic link or someone else's file has its name. The file appears under its name only once
  // the header is in it, so even a process killed at once leaves a loadable file.
  bool open(const std::string& path, const char* header, size_t len, std::string& error) noexcept;

  // Appends whole events. Thread-safe: O_APPEND makes each write land whole at the end.
  void write(const char* data, size_t len) noexcept;

  // Appends `tail`, then, when `head` is given, writes it over the file's first bytes (the
  // header reserved room for it), and closes. Blocks written after it are dropped.
  void close(const char* tail, size_t len, const char* head = nullptr) noexcept;

  // In a forked child: forget the parent's file without writing to it.
  void abandon() noexcept;

 private:
  std::atomic<int> fd_{-1};
};

}  // namespace sol::capture::trace
