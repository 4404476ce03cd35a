// Page protection and SOL's SIGSEGV handler (capture/lazy/guard.hpp), with real faults: guarded
// pages fault once into the callback and the access then proceeds, unrelated data on a guarded
// page stays usable, the program's own handler still gets the faults that are not SOL's, and a
// process with none dies of SIGSEGV as it would have.
#include "capture/lazy/guard.hpp"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

namespace sol::capture::lazy {
namespace {

const size_t kPage = static_cast<size_t>(sysconf(_SC_PAGESIZE));

// What the lazy executor's callback does: make host memory valid (here: write the "results"
// that were pending on the device), with the protection lifted first.
std::atomic<int> g_calls{0};
std::atomic<void*> g_last{nullptr};
unsigned char* g_results = nullptr;
size_t g_results_bytes = 0;
std::mutex* g_wait = nullptr;  // when set, the callback takes it first (another thread may hold it)
std::atomic<bool> g_waiting{false};   // the callback is about to take g_wait
std::atomic<bool> g_released{false};  // set by g_wait's holder just before it lets go
bool g_saw_released = false;          // what the callback saw once it held g_wait

void flush(void* addr, bool) noexcept {
  if (g_wait) {
    g_waiting = true;
    std::lock_guard<std::mutex> lock(*g_wait);
    g_saw_released = g_released;
  }
  unguard_all();
  if (g_results) std::memset(g_results, 42, g_results_bytes);
  g_last = addr;
  ++g_calls;
}

struct Pages {
  explicit Pages(size_t n) : n(n), p(static_cast<unsigned char*>(std::aligned_alloc(kPage, n * kPage))) {
    std::memset(p, 7, n * kPage);
  }
  ~Pages() {
    unguard_all();
    std::free(p);
  }
  size_t n;
  unsigned char* p;
};

class Guard : public ::testing::Test {
 protected:
  void SetUp() override {
    g_calls = 0;
    g_results = nullptr;
    g_wait = nullptr;
  }
  void TearDown() override { unguard_all(); }
};

TEST_F(Guard, PendingOutputFaultsOnceAndUnrelatedDataOnItsPageStaysUsable) {
  Pages mem(2);
  g_results = mem.p + 64, g_results_bytes = 100;  // the operand: 100 bytes inside page 0
  const char* why = nullptr;
  ASSERT_TRUE(guard(g_results, g_results_bytes, Protection::none, flush, why)) << why;
  EXPECT_TRUE(guarded(mem.p + 3000));
  EXPECT_FALSE(guarded(mem.p + kPage + 1));
  const uint64_t before = faults_handled();
  // Another variable on the same page: its read faults, the results arrive, the value is intact.
  EXPECT_EQ(static_cast<volatile unsigned char*>(mem.p)[3000], 7);
  EXPECT_EQ(g_calls, 1);
  EXPECT_EQ(g_last.load(), mem.p + 3000);
  EXPECT_EQ(mem.p[64], 42);
  EXPECT_EQ(mem.p[163], 42);
  EXPECT_EQ(mem.p[164], 7);
  // From then on, no more faults.
  mem.p[10] = 1;
  EXPECT_EQ(g_calls, 1);
  EXPECT_EQ(faults_handled(), before + 1);
  EXPECT_FALSE(guarded(mem.p));
}

TEST_F(Guard, ResidentInputIsReadFreelyAndAWriteFaults) {
  Pages mem(3);
  const char* why = nullptr;
  ASSERT_TRUE(guard(mem.p + kPage, kPage, Protection::read_only, flush, why)) << why;
  unsigned sum = 0;
  for (size_t i = 0; i < kPage; ++i) sum += static_cast<volatile unsigned char*>(mem.p + kPage)[i];
  EXPECT_EQ(sum, 7u * kPage);
  EXPECT_EQ(g_calls, 0);
  mem.p[kPage + 5] = 9;  // the host writes: the device copy is stale, the callback hears of it
  EXPECT_EQ(g_calls, 1);
  EXPECT_EQ(mem.p[kPage + 5], 9);
}

TEST_F(Guard, WhatCannotBeGuardedIsRefusedWithAReason) {
  const char* why = nullptr;
  unsigned char on_stack[256];
  std::memset(on_stack, 1, sizeof on_stack);
  EXPECT_FALSE(guard(on_stack, sizeof on_stack, Protection::none, flush, why));
  EXPECT_STREQ(why, "stack");
  void* shared = mmap(nullptr, kPage, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(shared, MAP_FAILED);
  EXPECT_FALSE(guard(shared, 16, Protection::none, flush, why));
  EXPECT_STREQ(why, "not a private writable mapping");
  munmap(shared, kPage);
  static const char kText[] = "read-only data";
  EXPECT_FALSE(guard(kText, sizeof kText, Protection::none, flush, why));
  EXPECT_NE(why, nullptr);
}

// The program's own handler, installed after SOL's: it gets the faults that are not SOL's.
std::atomic<int> g_program_faults{0};
void* g_program_page = nullptr;
void program_handler(int, siginfo_t* info, void*) {
  ++g_program_faults;
  if (info->si_addr >= g_program_page && info->si_addr < static_cast<char*>(g_program_page) + kPage)
    mprotect(g_program_page, kPage, PROT_READ | PROT_WRITE);
}

TEST_F(Guard, TheProgramsHandlerGetsTheFaultsThatAreNotSols) {
  Pages mem(1);
  const char* why = nullptr;
  ASSERT_TRUE(guard(mem.p, 8, Protection::none, flush, why)) << why;  // installs SOL's handler
  struct sigaction mine{}, old{}, seen{};
  mine.sa_sigaction = program_handler;
  mine.sa_flags = SA_SIGINFO;
  sigemptyset(&mine.sa_mask);
  ASSERT_EQ(program_sigaction(SIGSEGV, &mine, &old), 0);
  ASSERT_EQ(program_sigaction(SIGSEGV, nullptr, &seen), 0);
  EXPECT_EQ(seen.sa_sigaction, program_handler);  // what the program set is what it reads back
  g_program_page = mmap(nullptr, kPage, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(g_program_page, MAP_FAILED);
  static_cast<volatile char*>(g_program_page)[10] = 1;  // the program's own protected page
  EXPECT_EQ(g_program_faults, 1);
  EXPECT_EQ(g_calls, 0);
  EXPECT_EQ(static_cast<volatile unsigned char*>(mem.p)[0], 7);  // SOL's page: SOL's callback
  EXPECT_EQ(g_calls, 1);
  EXPECT_EQ(g_program_faults, 1);
  munmap(g_program_page, kPage);
  ASSERT_EQ(program_sigaction(SIGSEGV, &old, nullptr), 0);
}

TEST_F(Guard, WithoutAHandlerOfItsOwnTheProgramDiesOfSigsegvAsItWouldHave) {
  Pages mem(1);
  const char* why = nullptr;
  ASSERT_TRUE(guard(mem.p, 8, Protection::none, flush, why)) << why;
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    struct sigaction dfl{};
    dfl.sa_handler = SIG_DFL;
    program_sigaction(SIGSEGV, &dfl, nullptr);
    void* page = mmap(nullptr, kPage, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    static_cast<volatile char*>(page)[0] = 1;
    _exit(0);  // not reached
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGSEGV);
}

TEST_F(Guard, AFaultWhileAnotherThreadHoldsWhatTheFlushNeedsWaitsForIt) {
  // The holder lets go only once the fault's callback is about to take what it holds, so the
  // callback waits for it however the threads are scheduled; it then sees the release.
  Pages mem(1);
  std::mutex device;
  g_wait = &device;
  g_waiting = false;
  g_released = false;
  g_saw_released = false;
  const char* why = nullptr;
  ASSERT_TRUE(guard(mem.p, 8, Protection::none, flush, why)) << why;
  std::atomic<bool> held{false};
  std::thread submitter([&] {  // another thread busy with the device
    std::lock_guard<std::mutex> lock(device);
    held = true;
    while (!g_waiting) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    g_released = true;
  });
  while (!held) std::this_thread::yield();
  std::thread reader([&] { EXPECT_EQ(static_cast<volatile unsigned char*>(mem.p)[100], 7); });
  reader.join();
  submitter.join();
  EXPECT_EQ(g_calls, 1);
  EXPECT_TRUE(g_saw_released);
}

}  // namespace
}  // namespace sol::capture::lazy
