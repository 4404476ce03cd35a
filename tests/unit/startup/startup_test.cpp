// Startup (common/startup.hpp): a start-up armed for a request waits for it and then runs on its
// own thread; meanwhile it is pending, so that a caller that must not wait routes around it; a
// take() before the request runs the work in the caller. This binary loads no library SOL
// intercepts, so a library-triggered start-up stays waiting (pending) until a take().
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "common/startup.hpp"

namespace sol {
namespace {

using namespace std::chrono_literals;

struct Ran {
  std::atomic<int> times{0};
  std::atomic<bool> background{false};
  std::thread::id on;
};

Startup* begin(Ran& ran, Startup::Trigger trigger) {
  return Startup::begin(
      [&ran](bool background, const std::atomic<bool>&) {
        ran.on = std::this_thread::get_id();
        ran.background = background;
        ran.times.fetch_add(1);
      },
      0ms, trigger);
}

// Polls for `done` up to five seconds (the thread is scheduled, not timed). The tests' sleeps are
// the other way round: they give a thread time to do what it must not, so that load can only hide
// a fault from them, never fail a correct start-up.
template <class F>
bool eventually(F done) {
  for (auto until = std::chrono::steady_clock::now() + 5s; std::chrono::steady_clock::now() < until;) {
    if (done()) return true;
    std::this_thread::sleep_for(1ms);
  }
  return done();
}

TEST(Startup, ARequestedStartUpWaitsForItsRequestThenRunsOnItsThread) {
  static Ran ran;  // the thread may refer to it until exit
  Startup* s = begin(ran, Startup::Trigger::request);
  ASSERT_NE(s, nullptr);
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(ran.times.load(), 0);
  EXPECT_EQ(s->state(), Startup::State::waiting);
  EXPECT_TRUE(s->pending()) << "armed for a request: a caller routes around it";
  s->request();
  ASSERT_TRUE(eventually([&] { return s->state() == Startup::State::done; }));
  EXPECT_EQ(ran.times.load(), 1);
  EXPECT_TRUE(ran.background.load());
  EXPECT_NE(ran.on, std::this_thread::get_id());
  EXPECT_FALSE(s->pending());
  s->request();  // again: nothing
  EXPECT_EQ(s->take(1s), Startup::Outcome::done);
  EXPECT_EQ(ran.times.load(), 1);
}

TEST(Startup, ATakeBeforeTheRequestRunsTheWorkInTheCaller) {
  static Ran ran;
  Startup* s = begin(ran, Startup::Trigger::request);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->take(1s), Startup::Outcome::done);
  EXPECT_EQ(ran.times.load(), 1);
  EXPECT_FALSE(ran.background.load());
  EXPECT_EQ(ran.on, std::this_thread::get_id());
  EXPECT_FALSE(s->pending());
  s->request();  // the thread, woken, finds the work done
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(ran.times.load(), 1);
}

TEST(Startup, ALibraryStartUpIsPendingWhileItsThreadLooksThenATakeRunsIt) {
  static Ran ran;
  Startup* s = begin(ran, Startup::Trigger::library);
  ASSERT_NE(s, nullptr);
  std::this_thread::sleep_for(30ms);  // a few looks: no BLAS, CBLAS or oneDNN here
  EXPECT_EQ(ran.times.load(), 0);
  EXPECT_TRUE(s->pending());
  EXPECT_EQ(s->take(1s), Startup::Outcome::done);
  EXPECT_EQ(ran.times.load(), 1);
  EXPECT_FALSE(s->pending());
}

TEST(Startup, OnlyTheMainThreadBeginsOne) {
  static Ran ran;
  Startup* s = reinterpret_cast<Startup*>(1);
  std::thread([&] { s = begin(ran, Startup::Trigger::request); }).join();
  EXPECT_EQ(s, nullptr);
}

}  // namespace
}  // namespace sol
