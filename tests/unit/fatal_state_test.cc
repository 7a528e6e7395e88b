// fatal_state: every verdict of a fatal signal's handler from made-up facts,
// and which facts it asks for (each may walk a stack or use up a retry).
#include "check.h"
#include "fatal_state.h"

#include <signal.h>

namespace {

using fatal_state::Facts;
using fatal_state::Verdict;

// The answers to the questions asked lazily, and how often each was asked.
struct Answers {
  bool another_takes = false, in_unsafe = false, retry_left = true;
  int asked_another = 0, asked_unsafe = 0, retries_used = 0;
};

Facts facts(Answers* a) {
  Facts f;
  f.profiling = true;
  f.retry_can_come = true;
  f.another_takes = [](void* p) {
    auto* a = static_cast<Answers*>(p);
    ++a->asked_another;
    return a->another_takes;
  };
  f.in_unsafe_code = [](void* p) {
    auto* a = static_cast<Answers*>(p);
    ++a->asked_unsafe;
    return a->in_unsafe;
  };
  f.take_retry = [](void* p) {
    auto* a = static_cast<Answers*>(p);
    ++a->retries_used;
    return a->retry_left;
  };
  f.arg = a;
  return f;
}

}  // namespace

TEST(not_profiling_stops_without_asking) {
  Answers a;
  a.in_unsafe = true;
  Facts f = facts(&a);
  f.profiling = false;
  f.thread_ending = true;
  CHECK(fatal_state::decide(f) == Verdict::kStop);
  CHECK_EQ(a.asked_another + a.asked_unsafe + a.retries_used, 0);
}

TEST(safe_code_stops_here) {
  Answers a;
  CHECK(fatal_state::decide(facts(&a)) == Verdict::kStop);
  CHECK_EQ(a.asked_unsafe, 1);
  CHECK_EQ(a.retries_used, 0);
}

TEST(unsafe_code_defers_and_uses_one_retry) {
  Answers a;
  a.in_unsafe = true;
  CHECK(fatal_state::decide(facts(&a)) == Verdict::kDefer);
  CHECK_EQ(a.retries_used, 1);
  CHECK_EQ(a.asked_another, 0);  // not in its teardown: nobody else is asked
}

TEST(unsafe_code_refuses_what_cannot_wait) {
  // A fault would come back at once, the retry's signal may be blocked where
  // the signal came, the retries may be used up: only the last uses one.
  const struct { bool fault, retry_can_come, retry_left; int retries_used; } cases[] = {
      {true, true, true, 0}, {false, false, true, 0}, {false, true, false, 1}};
  for (const auto& k : cases) {
    Answers a;
    a.in_unsafe = true;
    a.retry_left = k.retry_left;
    Facts f = facts(&a);
    f.fault = k.fault;
    f.retry_can_come = k.retry_can_come;
    CHECK(fatal_state::decide(f) == Verdict::kRefuse);
    CHECK_EQ(a.retries_used, k.retries_used);
  }
}

TEST(thread_in_teardown_sends_it_elsewhere) {
  Answers a;
  a.another_takes = true;
  a.in_unsafe = true;
  Facts f = facts(&a);
  f.thread_ending = true;
  CHECK(fatal_state::decide(f) == Verdict::kElsewhere);
  CHECK_EQ(a.asked_unsafe, 0);
  CHECK_EQ(a.retries_used, 0);
  // Nobody else takes it: decided here as on any thread.
  Answers b;
  b.in_unsafe = true;
  Facts g = facts(&b);
  g.thread_ending = true;
  CHECK(fatal_state::decide(g) == Verdict::kDefer);
  CHECK_EQ(b.asked_another, 1);
  // A fault stays on its thread: the other threads are not asked.
  Answers c;
  Facts h = facts(&c);
  h.thread_ending = true;
  h.fault = true;
  CHECK(fatal_state::decide(h) == Verdict::kStop);
  CHECK_EQ(c.asked_another, 0);
}

TEST(signals_named_as_kill_names_them) {
  CHECK_EQ(std::string(fatal_state::signal_name(SIGTERM)), std::string("signal SIGTERM"));
  CHECK_EQ(std::string(fatal_state::signal_name(SIGRTMIN + 3)), std::string("signal SIGRTMIN+3"));
  CHECK_EQ(std::string(fatal_state::signal_name(SIGRTMAX - 4)), std::string("signal SIGRTMAX-4"));
  CHECK_EQ(std::string(fatal_state::signal_name(200)), std::string("a signal"));
}
