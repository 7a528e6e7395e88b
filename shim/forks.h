// forks: a forked child that does not exec hands its raw samples to the
// image it was forked from (PROFILE_FORKS=merge, docs/DESIGN.md "Forked
// children hand over"): no files of its own, no symbols, no /proc. The
// image that forks first creates the hand-over area, a file in PROFILE_DIR
// (.STEM.PID.spool) mapped MAP_SHARED, before its first fork child exists,
// so every fork descendant inherits the mapping. A child at its stop copies
// its stack tables (the CPU's and the waits': raw addresses, values, thread
// names) and its heap's alloc_* records into a place it reserves with one
// atomic add; the owner adds what was handed over to each set it writes
// (its stop, snapshots, heap peaks), each sample labelled with the child's
// pid. The owner's stop closes the area; a child that finds it closed, its
// owner gone or no room writes its own files as before. Not signal-safe
// (the stop's code: finish.h).
#pragma once
#include <stdint.h>

#include <string>

#include "config.h"
#include "engine.h"
#include "summary.h"

namespace forks {

// At setup: the mode and the area's size (PROFILE_FORKS,
// PROFILE_FORKS_SPOOL). An exec'd image starts with no area.
void setup(const config::Config* cfg);
// On the forking thread, before a fork (pthread_atfork's prepare): the
// image's area is created before its first fork child, once.
void before_fork();
// In a fork child: whether it hands over at its stop (an area is there).
// In merge mode the child's heap counts start at the fork (prof.reset): what
// it hands over is its own allocations, not its parent's inherited ones.
void after_fork_in_child();
// A fork child's stop that is not an exec's: hands everything over. True
// if it did (the stop writes nothing); false: the area is closed, its owner
// gone, or full (counted in the owner's line), and the child writes its
// own files. cpu_ns: the child's CPU to its stop.
bool hand_over(uint64_t cpu_ns);

// The owner's stop, first: no child hands over after this; children mid
// hand-over are waited for, at most until deadline_mono_ns (and 1 s).
void close(uint64_t deadline_mono_ns);
// The owner's part of a set: adds the children's samples of this engine's
// kind (the CPU's and the waits' once each, in the first set after they
// were handed over; the heap's alloc_* in every heap and heap-peak set).
void merge(const engine::Engine& e, engine::Why why, const engine::Self& self, engine::Part* part);
// The owner's summary segment: processes merged and their CPU, and those
// that wrote their own files because the area was full.
void figures(summary::Figures* f);
// The owner's stop wrote its files: the area's file is removed (what a
// SIGKILLed owner leaves there is what `profshim ls` shows).
void release();
// The owner's stop wrote none of its files (a directory it may no longer
// write, a full disk): the area's file is removed unless children handed
// something over, then " | N forked processes' samples stay in FILE
// (profshim ls)" for the line; else "".
std::string nothing_written();
// The owner's stop is given up (a seccomp filter about to go in forbids
// it; called while every call is still allowed): the area is closed as at
// a stop, and its file removed unless children handed something over;
// then "; N forked processes' samples stay in FILE (profshim ls)".
std::string give_up();
// An exec failed after the owner's stop: the area opens again.
void reopen();
// " forks=N:CPU_NS" for the files' gzip marker (image.h), "" when no
// child handed over.
std::string marker_field();

}  // namespace forks
