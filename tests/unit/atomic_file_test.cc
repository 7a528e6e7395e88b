// atomic_file: tmp+rename, symlink safety, stale temporaries, failures.
#include "atomic_file.h"
#include "check.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>

namespace {
std::string tmpdir() {
  char t[] = "/tmp/profshim-af-XXXXXX";
  return mkdtemp(t);
}
std::string slurp(const std::string& p) {
  std::string out;
  int fd = open(p.c_str(), O_RDONLY);
  char b[4096];
  for (ssize_t r; fd >= 0 && (r = read(fd, b, sizeof b)) > 0;) out.append(b, size_t(r));
  if (fd >= 0) close(fd);
  return out;
}
int entries(const std::string& dir) {
  int n = 0;
  DIR* d = opendir(dir.c_str());
  while (struct dirent* e = readdir(d)) n += e->d_name[0] != '.' || (e->d_name[1] && e->d_name[1] != '.');
  closedir(d);
  return n;
}
int g_calls, g_fail_at;
ssize_t failing_write(int fd, const void* b, size_t n) {
  if (++g_calls == g_fail_at) {
    errno = ENOSPC;
    return -1;
  }
  return ::write(fd, b, n > 1000 ? 1000 : n);  // short writes too
}
}  // namespace

TEST(ensure_dir_is_mkdir_p) {
  std::string d = tmpdir() + "/a/b/c";
  CHECK_EQ(atomic_file::ensure_dir(d), std::string());
  struct stat st;
  CHECK(stat(d.c_str(), &st) == 0 && S_ISDIR(st.st_mode));
  CHECK_EQ(entries(d), 0);  // the probe is gone
}

TEST(ensure_dir_refuses_a_file_parent) {
  std::string d = tmpdir();
  std::string f = d + "/file";
  close(open(f.c_str(), O_CREAT | O_WRONLY, 0644));
  CHECK(!atomic_file::ensure_dir(f + "/sub").empty());
  CHECK(!atomic_file::ensure_dir(f).empty());
}

TEST(passwd_name_matches_the_uid_field_only) {
  std::string text = "root:x:0:0:root:/root:/bin/bash\n"
                     "daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n"
                     "odd:x:10:1000::/home/odd:/bin/sh\n"
                     "broken line\n"
                     "web:x:1000:10:,,,:/home/web:/bin/bash";  // no newline at the end
  CHECK_EQ(atomic_file::passwd_name(text, 0), std::string("root"));
  CHECK_EQ(atomic_file::passwd_name(text, 10), std::string("odd"));  // not web, whose gid is 10
  CHECK_EQ(atomic_file::passwd_name(text, 1000), std::string("web"));  // not odd, whose gid is 1000
  CHECK_EQ(atomic_file::passwd_name(text, 100), std::string());
  CHECK_EQ(atomic_file::passwd_name("", 0), std::string());
}

TEST(write_replaces_and_leaves_no_temporary) {
  std::string d = tmpdir();
  CHECK_EQ(atomic_file::write(d, "x.pprof", "first"), std::string());
  CHECK_EQ(atomic_file::write(d, "x.pprof", "second"), std::string());
  CHECK_EQ(slurp(d + "/x.pprof"), std::string("second"));
  CHECK_EQ(entries(d), 1);
}

TEST(symlink_at_target_is_replaced_not_followed) {
  std::string d = tmpdir();
  std::string victim = d + "/victim";
  close(open(victim.c_str(), O_CREAT | O_WRONLY, 0644));
  CHECK(symlink(victim.c_str(), (d + "/x.pprof").c_str()) == 0);
  CHECK_EQ(atomic_file::write(d, "x.pprof", "data"), std::string());
  CHECK_EQ(slurp(victim), std::string());
  struct stat st;
  CHECK(lstat((d + "/x.pprof").c_str(), &st) == 0 && S_ISREG(st.st_mode));
}

TEST(stale_temporary_does_not_block) {
  std::string d = tmpdir();
  // What a killed run with our pid would have left, and one planted as a link.
  for (int i = 0; i < 3; ++i) {
    std::string stale = d + "/.x.pprof.tmp." + std::to_string(getpid()) + "." + std::to_string(i);
    CHECK(symlink("/nonexistent", stale.c_str()) == 0);
  }
  CHECK_EQ(atomic_file::write(d, "x.pprof", "data"), std::string());
  CHECK_EQ(slurp(d + "/x.pprof"), std::string("data"));
}

TEST(failed_write_keeps_old_file_and_cleans_up) {
  std::string d = tmpdir();
  CHECK_EQ(atomic_file::write(d, "x.pprof", "old"), std::string());
  std::string big(100000, 'z');
  for (int n = 1; n <= 3; ++n) {
    g_calls = 0, g_fail_at = n;
    atomic_file::write_fn = failing_write;
    std::string err = atomic_file::write(d, "x.pprof", big);
    atomic_file::write_fn = ::write;
    CHECK(err.find("No space left") != std::string::npos);
    CHECK_EQ(slurp(d + "/x.pprof"), std::string("old"));
    CHECK_EQ(entries(d), 1);
  }
  g_calls = 0, g_fail_at = -1;
  atomic_file::write_fn = failing_write;
  CHECK_EQ(atomic_file::write(d, "x.pprof", big), std::string());
  atomic_file::write_fn = ::write;
  CHECK_EQ(slurp(d + "/x.pprof"), big);
}

namespace {
int g_abandon_at;
ssize_t abandoning_write(int fd, const void* b, size_t n) {
  if (++g_calls == g_abandon_at) atomic_file::abandon();  // the waiter gives up mid-write
  return ::write(fd, b, n > 1000 ? 1000 : n);
}
}  // namespace

// A stop that gave up removes the temporary being written,
// nothing is renamed into place after it, the old file stays, and a later
// write of the same stop writes nothing; reset() (a new image) writes again.
TEST(abandon_mid_write_removes_the_temporary) {
  std::string d = tmpdir();
  CHECK_EQ(atomic_file::write(d, "x.pprof", "old"), std::string());
  std::string big(100000, 'z');
  for (int at = 1; at <= 3; ++at) {
    g_calls = 0, g_abandon_at = at;
    atomic_file::write_fn = abandoning_write;
    std::string err = atomic_file::write(d, "x.pprof", big);
    atomic_file::write_fn = ::write;
    CHECK(err.find("gave up") != std::string::npos);
    CHECK_EQ(slurp(d + "/x.pprof"), std::string("old"));
    CHECK_EQ(entries(d), 1);
    // The rest of the stop: nothing more is written.
    CHECK(atomic_file::write(d, "y.pprof", "late").find("gave up") != std::string::npos);
    CHECK_EQ(entries(d), 1);
    atomic_file::reset();
  }
  CHECK_EQ(atomic_file::write(d, "x.pprof", "new"), std::string());
  CHECK_EQ(slurp(d + "/x.pprof"), std::string("new"));
  CHECK_EQ(entries(d), 1);
}

namespace {
std::string g_race_dir;
int temporaries(const std::string& dir) {
  int n = 0;
  DIR* d = opendir(dir.c_str());
  while (struct dirent* e = readdir(d)) n += strstr(e->d_name, ".tmp.") != nullptr;
  closedir(d);
  return n;
}
int g_left_after_abandon = -1;
pthread_t g_abandoner;
std::atomic<int> g_abandoning;
void* abandon_elsewhere(void*) {
  g_abandoning.store(1);
  atomic_file::abandon();  // a waiter on another thread gives up ...
  g_left_after_abandon = temporaries(g_race_dir);  // ... and the process could _exit now
  return nullptr;
}
int open_then_get_abandoned(const char* p, int f, mode_t m) {
  int fd = ::open(p, f, m);
  // The temporary exists but is not yet noted: a waiter giving up now must
  // wait for the note, or an _exit right after its abandon() leaves the file.
  pthread_create(&g_abandoner, nullptr, abandon_elsewhere, nullptr);
  while (!g_abandoning.load()) usleep(1000);
  usleep(20000);  // the waiter is in abandon() now
  atomic_file::open_fn = [](const char* q, int g, mode_t n) { return ::open(q, g, n); };
  return fd;
}
}  // namespace

// A stop that gives up while the writer has just created its temporary:
// once abandon() returns, no temporary of the writer's is left (the process
// may end at that moment). The writer then either gives up too or, if it
// reached the rename first, has written the whole file and recorded it.
TEST(abandon_while_the_temporary_is_created_leaves_no_temporary) {
  g_race_dir = tmpdir();
  atomic_file::reset();
  g_left_after_abandon = -1;
  g_abandoning.store(0);
  atomic_file::open_fn = open_then_get_abandoned;
  std::string err = atomic_file::write(g_race_dir, "x.pprof", "data");
  pthread_join(g_abandoner, nullptr);
  CHECK_EQ(g_left_after_abandon, 0);
  if (err.empty()) {
    CHECK_EQ(slurp(g_race_dir + "/x.pprof"), std::string("data"));
    CHECK_EQ(atomic_file::renamed_count(), 1);
  } else {
    CHECK(err.find("gave up") != std::string::npos);
    CHECK_EQ(entries(g_race_dir), 0);
  }
  atomic_file::reset();
}

// What a line printed by a waiter that gave up names: every file renamed
// into place since reset(), and nothing the abandoned writer did not finish.
TEST(renamed_files_are_recorded_before_the_writer_lets_go) {
  std::string d = tmpdir();
  atomic_file::reset();
  CHECK_EQ(atomic_file::renamed_count(), 0);
  CHECK_EQ(atomic_file::write(d, "a.pprof", "a"), std::string());
  CHECK_EQ(atomic_file::write(d, "b.pprof", "b"), std::string());
  CHECK_EQ(atomic_file::renamed_count(), 2);
  CHECK_EQ(std::string(atomic_file::renamed_path(0)), d + "/a.pprof");
  CHECK_EQ(std::string(atomic_file::renamed_path(1)), d + "/b.pprof");
  g_calls = 0, g_abandon_at = 1;
  atomic_file::write_fn = abandoning_write;
  CHECK(atomic_file::write(d, "c.pprof", "c").find("gave up") != std::string::npos);
  atomic_file::write_fn = ::write;
  CHECK_EQ(atomic_file::renamed_count(), 2);
  atomic_file::reset();
  CHECK_EQ(atomic_file::renamed_count(), 0);
}
