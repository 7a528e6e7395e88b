// waits: threads that wait, each measuring its own waits (the truth the wait
// profile is compared with), and the behaviours a wrapper must keep.
//
// usage: waits sites SECONDS
//   locker-a, locker-b  contend on one mutex: lock, hold it 2 ms (a
//                       nanosleep in hold()), unlock, rest 1 ms; the time in
//                       pthread_mutex_lock is measured in lock_site()
//   reader              read() of one byte from a pipe that feeder fills
//                       every 20 ms (read_site())
//   poller              poll() of an empty pipe, 30 ms timeout (poll_site())
//   sleeper             nanosleep(50 ms) (sleep_site())
// Each prints "truth wait thread=T call=C fn=F tid=N ns=NS n=COUNT eintr=E"
// (E: EINTR returns it saw; nothing here sends a signal).
//
//        waits cancel      threads blocked in read(), pthread_cond_wait() and
//                          nanosleep() are cancelled: cleanup handlers run,
//                          joins return PTHREAD_CANCELED
//        waits errno       each call's return value and errno, set to 4242
//                          before it (failures, successes, timeouts)
//        waits eintr       a thread blocked in read(), poll() and nanosleep()
//                          gets a signal whose handler calls write(): with
//                          and without SA_RESTART; what each call returned
//        waits sigterm     main blocked in read() of an empty pipe, another
//                          thread in nanosleep(); a third, blocking every
//                          signal, sends the process SIGTERM (so one of the
//                          two blocked threads takes it): the process dies
//                          of it, or prints "read returned" if read() came
//                          back instead
// stdout: what happened (the same as without the shim).
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double seconds = 2.0;
static double deadline;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int feed[2], empty[2];

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void sleep_ms(double ms) {
  struct timespec ts = {(time_t)(ms / 1000), (long)((ms - 1000 * (time_t)(ms / 1000)) * 1e6)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

struct truth {
  const char* thread;
  const char* call;
  const char* fn;
  int tid;
  double ns;
  long n, eintr;
};

static void report(const struct truth* t) {
  printf("truth wait thread=%s call=%s fn=%s tid=%d ns=%.0f n=%ld eintr=%ld\n", t->thread, t->call, t->fn, t->tid,
         t->ns, t->n, t->eintr);
}

static void begin(struct truth* t, const char* name, const char* call, const char* fn) {
  pthread_setname_np(pthread_self(), name);
  t->thread = name, t->call = call, t->fn = fn, t->tid = gettid();
}

__attribute__((noinline)) static void lock_site(struct truth* t) {
  double t0 = now();
  pthread_mutex_lock(&lock);
  t->ns += (now() - t0) * 1e9;
  t->n++;
}

__attribute__((noinline)) static void hold(void) { sleep_ms(2); }

static void* locker(void* arg) {
  struct truth* t = arg;
  begin(t, t->thread, "pthread_mutex_lock", "lock_site");
  while (now() < deadline) {
    lock_site(t);
    hold();
    pthread_mutex_unlock(&lock);
    sleep_ms(1);
  }
  return NULL;
}

__attribute__((noinline)) static ssize_t read_site(struct truth* t, char* c) {
  double t0 = now();
  ssize_t r = read(feed[0], c, 1);
  t->ns += (now() - t0) * 1e9;
  t->n++;
  if (r < 0 && errno == EINTR) t->eintr++;
  return r;
}

static void* reader(void* arg) {
  struct truth* t = arg;
  begin(t, "reader", "read", "read_site");
  char c;
  while (read_site(t, &c) == 1 && c == 'x') {
  }
  return NULL;
}

static void* feeder(void* arg) {
  pthread_setname_np(pthread_self(), "feeder");
  while (now() < deadline) {
    sleep_ms(20);
    if (write(feed[1], "x", 1) != 1) break;
  }
  if (write(feed[1], "q", 1) != 1) perror("write");
  return arg;
}

__attribute__((noinline)) static void poll_site(struct truth* t) {
  struct pollfd p = {empty[0], POLLIN, 0};
  double t0 = now();
  int r = poll(&p, 1, 30);
  t->ns += (now() - t0) * 1e9;
  t->n++;
  if (r < 0 && errno == EINTR) t->eintr++;
}

static void* poller(void* arg) {
  struct truth* t = arg;
  begin(t, "poller", "poll", "poll_site");
  while (now() < deadline) poll_site(t);
  return NULL;
}

__attribute__((noinline)) static void sleep_site(struct truth* t) {
  struct timespec ts = {0, 50000000};
  double t0 = now();
  int r = nanosleep(&ts, NULL);
  t->ns += (now() - t0) * 1e9;
  t->n++;
  if (r < 0 && errno == EINTR) t->eintr++;
}

static void* sleeper(void* arg) {
  struct truth* t = arg;
  begin(t, "sleeper", "nanosleep", "sleep_site");
  while (now() < deadline) sleep_site(t);
  return NULL;
}

static int sites(void) {
  if (pipe(feed) || pipe(empty)) return perror("pipe"), 1;
  struct truth t[5] = {{.thread = "locker-a"}, {.thread = "locker-b"}};
  void* (*fn[5])(void*) = {locker, locker, reader, poller, sleeper};
  pthread_t th[6];
  deadline = now() + seconds;
  for (int i = 0; i < 5; i++) pthread_create(&th[i], NULL, fn[i], &t[i]);
  pthread_create(&th[5], NULL, feeder, NULL);
  for (int i = 0; i < 6; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < 5; i++) report(&t[i]);
  return 0;
}

// --- cancel ---------------------------------------------------------------

static pthread_cond_t never = PTHREAD_COND_INITIALIZER;
static pthread_mutex_t never_lock = PTHREAD_MUTEX_INITIALIZER;

static void cleanup(void* what) { printf("cleanup ran: %s\n", (const char*)what); }

static void* blocked_read(void* arg) {
  char c;
  pthread_cleanup_push(cleanup, "read");
  ssize_t r = read(empty[0], &c, 1);
  printf("read returned %zd\n", r);
  pthread_cleanup_pop(0);
  return arg;
}

static void unlock_never(void* arg) {
  pthread_mutex_unlock(&never_lock);
  cleanup(arg);
}

static void* blocked_cond(void* arg) {
  pthread_mutex_lock(&never_lock);
  pthread_cleanup_push(unlock_never, "pthread_cond_wait");
  for (;;) pthread_cond_wait(&never, &never_lock);
  pthread_cleanup_pop(0);
  return arg;
}

static void* blocked_sleep(void* arg) {
  pthread_cleanup_push(cleanup, "nanosleep");
  struct timespec ts = {30, 0};
  nanosleep(&ts, NULL);
  printf("nanosleep returned\n");
  pthread_cleanup_pop(0);
  return arg;
}

static int cancel(void) {
  if (pipe(empty)) return perror("pipe"), 1;
  void* (*fn[3])(void*) = {blocked_read, blocked_cond, blocked_sleep};
  for (int i = 0; i < 3; i++) {
    pthread_t t;
    pthread_create(&t, NULL, fn[i], NULL);
    sleep_ms(100);
    pthread_cancel(t);
    void* rv = NULL;
    int rc = pthread_join(t, &rv);
    printf("join %d: rc=%d cancelled=%s\n", i, rc, rv == PTHREAD_CANCELED ? "yes" : "no");
    fflush(stdout);
  }
  // The mutex the cond waiter held is free again (its cleanup unlocked it).
  printf("trylock after: %d\n", pthread_mutex_trylock(&never_lock));
  return 0;
}

// --- errno ----------------------------------------------------------------

#define SHOW(what, call)                                            \
  do {                                                              \
    errno = 4242;                                                   \
    long rc_ = (long)(call);                                        \
    printf("%-32s rc=%ld errno=%d\n", what, rc_, errno);            \
  } while (0)

static int errnos(void) {
  int p[2];
  if (pipe(p)) return perror("pipe"), 1;
  signal(SIGPIPE, SIG_IGN);
  char buf[8];
  SHOW("read bad fd", read(-1, buf, 1));
  SHOW("write bad fd", write(-1, buf, 1));
  SHOW("pread on a pipe", pread(p[0], buf, 1, 0));
  SHOW("write to a pipe", write(p[1], "ab", 2));
  SHOW("read from a pipe", read(p[0], buf, 2));
  SHOW("poll timeout", poll(NULL, 0, 5));
  struct timespec bad = {0, -1}, short_ts = {0, 1000000};
  SHOW("nanosleep invalid", nanosleep(&bad, NULL));
  SHOW("nanosleep 1 ms", nanosleep(&short_ts, NULL));
  SHOW("clock_nanosleep invalid", clock_nanosleep(CLOCK_MONOTONIC, 0, &bad, NULL));
  SHOW("usleep 1", usleep(1));
  SHOW("fsync bad fd", fsync(-1));
  SHOW("fdatasync on a pipe", fdatasync(p[0]));
  SHOW("waitpid no child", waitpid(-1, NULL, 0));
  SHOW("wait no child", wait(NULL));
  SHOW("flock bad fd", flock(-1, LOCK_EX));
  SHOW("fcntl F_SETLKW bad fd", fcntl(-1, F_SETLKW, &(struct flock){.l_type = F_WRLCK}));
  SHOW("fcntl F_GETFL", fcntl(p[0], F_GETFL) & O_ACCMODE);
  SHOW("recv not a socket", recv(p[0], buf, 1, 0));
  SHOW("accept not a socket", accept(p[0], NULL, NULL));
  int s = socket(AF_UNIX, SOCK_STREAM, 0);
  struct sockaddr_un un = {.sun_family = AF_UNIX, .sun_path = "/nonexistent/profshim-waits"};
  SHOW("connect nowhere", connect(s, (struct sockaddr*)&un, sizeof un));
  close(s);
  close(p[0]);
  SHOW("write to a closed pipe", write(p[1], "x", 1));
  pthread_mutexattr_t a;
  pthread_mutexattr_init(&a);
  pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ERRORCHECK);
  pthread_mutex_t m;
  pthread_mutex_init(&m, &a);
  SHOW("mutex lock", pthread_mutex_lock(&m));
  SHOW("mutex lock again (errorcheck)", pthread_mutex_lock(&m));
  sem_t sem;
  sem_init(&sem, 0, 0);
  struct timespec soon;
  clock_gettime(CLOCK_REALTIME, &soon);
  soon.tv_nsec += 2000000;
  if (soon.tv_nsec >= 1000000000) soon.tv_sec++, soon.tv_nsec -= 1000000000;
  SHOW("sem_timedwait timeout", sem_timedwait(&sem, &soon));
  SHOW("pthread_join self", pthread_join(pthread_self(), NULL));
  return 0;
}

// --- eintr ----------------------------------------------------------------

static volatile sig_atomic_t handled;

static void on_usr1(int sig) {
  int saved = errno;
  // A handler that itself makes a timed call.
  int fd = open("/dev/null", O_WRONLY);
  if (fd >= 0) {
    if (write(fd, "h", 1) != 1) handled = -100;
    close(fd);
  }
  handled++;
  errno = saved;
}

struct target {
  int kind;  // 0 read, 1 poll, 2 nanosleep
  long rc;
  int err;
};

static void* interrupted(void* arg) {
  struct target* t = arg;
  char c;
  struct pollfd p = {empty[0], POLLIN, 0};
  struct timespec ts = {0, 400000000};
  errno = 0;
  if (t->kind == 0) t->rc = read(feed[0], &c, 1);
  if (t->kind == 1) t->rc = poll(&p, 1, 400);
  if (t->kind == 2) t->rc = nanosleep(&ts, NULL);
  t->err = errno;
  return NULL;
}

static int eintr(void) {
  if (pipe(feed) || pipe(empty)) return perror("pipe"), 1;
  const char* kinds[3] = {"read", "poll", "nanosleep"};
  for (int restart = 0; restart < 2; restart++) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sa.sa_flags = restart ? SA_RESTART : 0;
    sigaction(SIGUSR1, &sa, NULL);
    for (int k = 0; k < 3; k++) {
      struct target t = {k, 0, 0};
      pthread_t th;
      pthread_create(&th, NULL, interrupted, &t);
      sleep_ms(100);
      pthread_kill(th, SIGUSR1);
      sleep_ms(100);
      if (k == 0 && write(feed[1], "x", 1) != 1) perror("write");  // a restarted read gets its byte
      pthread_join(th, NULL);
      printf("%s %s: rc=%ld errno=%s\n", restart ? "SA_RESTART" : "no SA_RESTART", kinds[k], t.rc,
             t.err == EINTR ? "EINTR" : t.err ? strerror(t.err) : "0");
    }
  }
  printf("handler ran %d times\n", (int)handled);
  return 0;
}

// --- sigterm --------------------------------------------------------------

static void* dozer(void* arg) {
  struct timespec ts = {30, 0};
  nanosleep(&ts, NULL);
  return arg;
}

static void* terminator(void* arg) {
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, NULL);  // so that a blocked thread takes it
  sleep_ms(300);
  kill(getpid(), SIGTERM);
  return arg;
}

static int sigterm(void) {
  if (pipe(empty)) return perror("pipe"), 1;
  pthread_t a, b;
  pthread_create(&a, NULL, dozer, NULL);
  pthread_create(&b, NULL, terminator, NULL);
  char c;
  ssize_t r = read(empty[0], &c, 1);
  printf("read returned %zd errno %s\n", r, r < 0 ? strerror(errno) : "0");
  return 0;
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "sites";
  if (argc > 2) seconds = atof(argv[2]);
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (strcmp(mode, "sites") == 0) return sites();
  if (strcmp(mode, "cancel") == 0) return cancel();
  if (strcmp(mode, "errno") == 0) return errnos();
  if (strcmp(mode, "eintr") == 0) return eintr();
  if (strcmp(mode, "sigterm") == 0) return sigterm();
  fprintf(stderr, "usage: waits sites|cancel|errno|eintr|sigterm [SECONDS]\n");
  return 2;
}
