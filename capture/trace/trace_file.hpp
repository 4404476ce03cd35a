// The trace.json file: blocks of whole events appended with one write(2) each.
//
// Threads fill blocks of their own (ThreadState::out) and hand them over here when full, so a
// call costs a memcpy, not a system call. A writer thread, started when the first block fills,
// writes the blocks handed over while their threads fill spare ones: on ext4 the page cache
// costs about half a nanosecond per byte written, which for the ~200-byte event of a oneDNN
// set-up call was more than a third of what tracing the call cost its caller. When every spare
// is queued (the writer is behind) or no writer runs, the caller writes its block itself: memory
// stays bounded (kSpares blocks) and no caller ever waits for the writer. A block waits for the
// writer at most 0.1 s; a writer with nothing queued sleeps until a block comes (no timer).
//
// On this kind of file system a write(2) of a block costs less than half of what a shared
// mapping of the file does (ext4 allocates and journals at the first store to every page of a
// mapping). The price of buffering: a process killed by a signal loses the events still in its
// threads' blocks and in the queue; the file is then a loadable prefix. exit(), _exit() and
// Python's shutdown write everything.
#pragma once

#include <pthread.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/macros.hpp"

namespace sol::capture::trace {

class TraceFile {
 public:
  static constexpr size_t kBlock = 65536;
  static constexpr size_t kSpares = 16;
  // The writer is woken when this many blocks wait: a wake-up costs the waking thread more than
  // writing a block does on a virtual machine (an inter-processor interrupt), so they are batched.
  static constexpr size_t kWake = 4;
  // Fewer blocks are written once they have waited this long.
  static constexpr long kLingerNs = 100000000;

  TraceFile() = default;
  TraceFile(const TraceFile&) = delete;
  TraceFile& operator=(const TraceFile&) = delete;

  // Creates (replacing a trace file of an earlier process of this user) the file, mode 0600, with
  // `header` as its first bytes. False with `error` set when it cannot be written, or when a
  // symbolic link or someone else's file has its name. The file appears under its name only once
  // the header is in it, so even a process killed at once leaves a loadable file.
  bool open(const std::string& path, const char* header, size_t len, std::string& error) noexcept;

  // Appends whole events now. Thread-safe: O_APPEND makes each write land whole at the end.
  void write(const char* data, size_t len) noexcept;

  // A thread's full block of `len` bytes of whole events: queued for the writer and a spare block
  // of kBlock bytes returned for the caller to fill next, or, when no spare is free or no writer
  // runs, written here and the same block returned. A block handed over must stay allocated for
  // the life of the process (it goes round as a spare). Thread-safe.
  char* hand_over(char* block, size_t len) noexcept;

  // Starts the writer thread when a block has found none. The caller holds no lock of the
  // recorder's: creating a thread allocates, and frees are observed under those locks.
  void start_writer() noexcept {
    if (SOL_UNLIKELY(writer_.load(std::memory_order_relaxed) == Writer::wanted)) start();
  }

  // Waits until the writer has written every block handed over, appends `tail`, then, when `head`
  // is given, writes it over the file's first bytes (the header reserved room for it), and
  // closes. Blocks written after it are dropped.
  void close(const char* tail, size_t len, const char* head = nullptr) noexcept;

  // In a forked child: forget the parent's file without writing to it.
  void abandon() noexcept;

  // fork(): the queue is locked across it; the child has no writer thread, and the blocks the
  // parent's writer had still to write are spares again (the parent writes them).
  void lock_for_fork() noexcept;
  void unlock_in_parent() noexcept;
  void reset_in_child() noexcept;

 private:
  enum class Writer : uint8_t { none, wanted, running, failed };
  struct Full {
    char* block;
    size_t len;
  };

  void start() noexcept;
  static void* writer_main(void* self) noexcept;

  std::atomic<int> fd_{-1};
  std::atomic<Writer> writer_{Writer::none};
  // The rest under mu_. Every spare is either in spares_, queued, or being written.
  pthread_mutex_t mu_ = PTHREAD_MUTEX_INITIALIZER;
  pthread_cond_t work_ = PTHREAD_COND_INITIALIZER;  // to the writer: a block is queued, or stop_
  pthread_cond_t idle_ = PTHREAD_COND_INITIALIZER;  // from it: nothing queued or being written
  Full queue_[kSpares] = {};
  size_t head_ = 0, queued_ = 0;
  char* spares_[kSpares] = {};
  size_t free_spares_ = 0;
  char* writing_ = nullptr;
  bool stop_ = false;
  bool sleeping_ = false;  // the writer waits for a block with no deadline
};

}  // namespace sol::capture::trace
