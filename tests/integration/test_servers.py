"""Real forking servers under the shim, as an operator runs them: nginx (a
master and two workers it forks) and PostgreSQL (a postmaster that forks a
backend per connection). Each serves what it serves without the shim, ends
with the same status, and leaves one program's files: the master's (the
postmaster's), holding its workers' (backends') CPU under their pid labels
(docs/CONFIG.md "Forked children").

Both are Debian's packages (scripts/install-deps), started by hand on a
port or socket of their own in a temp dir, never as the system's service.
"""

import gzip
import hashlib
import http.client
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time

from common import KINDS, Skip, base_env, check, clip, communicate_bounded, indent, profile_dir_names
from test_forks_merge import _by_pid

HANG_GUARD = 60  # seconds; only a guard against a hang
CLK_TCK = os.sysconf("SC_CLK_TCK")


def _free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def _stat(pid):
    """/proc/PID/stat's fields after the command (state first), or None
    once the process is reaped (a zombie still has its entry)."""
    try:
        with open("/proc/%s/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()
    except OSError:  # gone before the open (ENOENT) or the read (ESRCH)
        return None


def _proc_cpu_s(pid):
    """utime + stime of a process, in seconds (its own clock); None once it is reaped."""
    fields = _stat(pid)
    return None if fields is None else (int(fields[11]) + int(fields[12])) / CLK_TCK


def _children_of(pid):
    out = []
    for d in os.listdir("/proc"):
        fields = _stat(d) if d.isdigit() else None
        if fields and int(fields[1]) == pid:
            out.append(int(d))
    return out


# --- nginx -------------------------------------------------------------------

NGINX_CONF = """daemon off;
master_process on;
worker_processes 2;
pid {d}/nginx.pid;
error_log {d}/error.log;
{user}
events {{ worker_connections 64; }}
http {{
  access_log off;
  client_body_temp_path {d}/body;
  gzip on;
  gzip_types text/plain;
  gzip_min_length 0;
  gzip_comp_level 9;
  server {{
    listen 127.0.0.1:{port};
    root {d}/www;
  }}
}}
"""
REQUESTS = 40  # each compresses 256 KiB at level 9 in a worker: ~1-4 s of the workers' CPU


def _nginx_page(d):
    """256 KiB of text that compresses, the same in every run."""
    words = [b"alpha", b"bravo", b"charlie", b"delta", b"echo", b"foxtrot", b"golf", b"hotel"]
    out, x = [], 12345
    while sum(len(w) + 1 for w in out) < 256 << 10:
        x = (x * 1103515245 + 12345) & 0x7FFFFFFF
        out.append(words[x % len(words)] + (b"%d" % (x % 1000)))
    os.makedirs(os.path.join(d, "www"))
    with open(os.path.join(d, "www", "page.txt"), "wb") as f:
        f.write(b" ".join(out))


def _get(port, path):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=HANG_GUARD)
    c.request("GET", path, headers={"Accept-Encoding": "gzip"})
    r = c.getresponse()
    body = r.read()
    c.close()
    return r.status, r.getheader("Content-Encoding"), body


def _run_nginx(ctx, env, label):
    """Starts nginx, serves REQUESTS gzip'd pages from two client threads,
    reads its workers' CPU, stops it with SIGQUIT (graceful); returns
    (status, the responses' digest, the workers' {pid: cpu s}, master pid,
    stderr and the error log)."""
    d = ctx.mkdtemp("nginx-" + label)
    _nginx_page(d)
    port = _free_port()
    conf = os.path.join(d, "nginx.conf")
    with open(conf, "w") as f:
        # As root, the workers would be nobody's, who cannot read the
        # harness's private temp dirs.
        f.write(NGINX_CONF.format(d=d, port=port, user="user root;" if os.geteuid() == 0 else ""))
    # stderr a file: nginx points its stderr at its error log and serves on,
    # and the shim keeps the stderr it started with (for its line at the
    # end) only where that holds no reader waiting, not a pipe
    # (docs/DESIGN.md "Standard error").
    errfile = open(os.path.join(d, "stderr"), "w+b")
    p = subprocess.Popen(["/usr/sbin/nginx", "-p", d, "-c", conf], env=env, cwd=d, stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=errfile, start_new_session=True)
    errfile.close()
    try:
        deadline = time.monotonic() + HANG_GUARD
        while True:
            check(p.poll() is None, "%s: nginx exited with %s before serving:\n%s" % (
                label, p.returncode, indent(clip(open(os.path.join(d, "stderr"), "rb").read()))))
            try:
                _get(port, "/page.txt")
                break
            except OSError:
                check(time.monotonic() < deadline, "%s: nginx did not serve within %d s" % (label, HANG_GUARD))
                time.sleep(0.05)
        results, errors = [], []

        def client(n):
            try:
                for _ in range(n):
                    results.append(_get(port, "/page.txt"))
            except Exception as e:  # noqa: BLE001 -- reported below
                errors.append(e)

        threads = [threading.Thread(target=client, args=(REQUESTS // 2,)) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(HANG_GUARD)
        check(not errors and len(results) == REQUESTS, "%s: %d of %d requests served: %s" % (
            label, len(results), REQUESTS, errors[:1]))
        workers = {pid: _proc_cpu_s(pid) for pid in _children_of(p.pid)}
        check(None not in workers.values(), "%s: a worker ended while it was being read: %s" % (label, workers))
        os.kill(p.pid, signal.SIGQUIT)
    except BaseException:
        os.killpg(p.pid, signal.SIGKILL)
        raise
    out, err, hung = communicate_bounded(p, HANG_GUARD)
    check(not hung, "%s: nginx did not exit after SIGQUIT within %d s" % (label, HANG_GUARD))
    digest = hashlib.sha256()
    for status, encoding, body in sorted(results):
        check(status == 200 and encoding == "gzip", "%s: a response was %s %s" % (label, status, encoding))
        digest.update(gzip.decompress(body))
    with open(os.path.join(d, "stderr"), "rb") as f:
        err = f.read()
    with open(os.path.join(d, "error.log"), "rb") as f:
        err += f.read()
    return p.returncode, digest.hexdigest(), workers, p.pid, err.decode("utf-8", "replace")


def test_nginx_master_and_workers_are_one_program(ctx):
    if not os.access("/usr/sbin/nginx", os.X_OK):
        raise Skip("nginx is not installed (Debian's nginx package: scripts/install-deps)")
    rc, digest, _, _, _ = _run_nginx(ctx, base_env(), "plain")
    check(rc == 0, "without the shim, nginx exited %s after SIGQUIT" % rc)
    prof = ctx.mkdtemp("prof")
    got_rc, got_digest, workers, master, err = _run_nginx(
        ctx, ctx.env(PROFILE_DIR=prof, PROFILE_NAME="nginx", PROFILE_HEAP_SAMPLE="0"), "profiled")
    check(got_rc == rc, "under the shim nginx exited %s, without it %s\nstderr:\n%s" % (got_rc, rc, indent(err)))
    check(got_digest == digest, "under the shim nginx served other pages than without it")
    check(len(workers) == 2, "nginx should have forked 2 workers, has %s" % sorted(workers))
    want = sorted("nginx.%s.pprof" % k for k in KINDS if k != "heap")
    check(profile_dir_names(prof) == want, "one program's files, the master's: want %s, PROFILE_DIR has %s\n"
          "stderr:\n%s" % (want, profile_dir_names(prof), indent(err)))
    cpu = ctx.read(os.path.join(prof, "nginx.cpu.pprof"))
    by_pid = _by_pid(cpu, cpu.index("cpu"))
    truth = sum(workers.values())
    check(truth >= 0.5, "the workers used %.2f s of CPU: too little to compare" % truth)
    got = sum(by_pid.get(pid, 0) for pid in workers) / 1e9
    # The workers' clocks were read before their graceful end; the profile
    # holds their CPU to their stops, a little more.
    check(got >= 0.9 * truth, "the master's CPU profile holds %.2f s under its workers' pids %s, they used %.2f s "
          "(by their own clocks): %s" % (got, sorted(workers), truth, {p: v / 1e9 for p, v in by_pid.items()}))
    m = re.search(r" \| forks (\d+) merged", err)
    check(m and int(m.group(1)) >= 2, "the master's line should count its 2 workers merged:\n%s" % indent(err))
    check(cpu.cum("deflate", "cpu") > 0.5 * got * 1e9, "the workers' gzip (zlib's deflate) is not where their "
          "CPU went:\n%s" % cpu.cum_table("cpu"))


# --- PostgreSQL ----------------------------------------------------------------

def _pg_bin():
    """The newest PostgreSQL server Debian installed (postgresql-13 on Debian
    11, 15 on 12, 17 on 13), or None."""
    found = []
    for v in os.listdir("/usr/lib/postgresql") if os.path.isdir("/usr/lib/postgresql") else []:
        b = os.path.join("/usr/lib/postgresql", v, "bin")
        if v.isdigit() and os.access(os.path.join(b, "postgres"), os.X_OK):
            found.append((int(v), b))
    return max(found)[1] if found else None


class Cluster:
    """A throwaway cluster on a unix socket only, run by the postgres user
    when the tests run as root (the server refuses root): its directory,
    and a copy of the shim, are where that user can reach them."""

    def __init__(self, ctx, pg_bin):
        import pwd
        self.bin = pg_bin
        try:
            self.user = pwd.getpwnam("postgres") if os.geteuid() == 0 else pwd.getpwuid(os.geteuid())
        except KeyError:
            raise Skip("running as root and there is no postgres user to run the server as")
        self.dir = tempfile.mkdtemp(prefix="pg-", dir="/tmp")  # short: a socket's path
        os.chmod(self.dir, 0o755)
        os.chown(self.dir, self.user.pw_uid, self.user.pw_gid)
        self.data, self.log = os.path.join(self.dir, "data"), os.path.join(self.dir, "log")
        self.lib = os.path.join(self.dir, "libprofshim.so")
        shutil.copy(ctx.lib, self.lib)
        os.chmod(self.lib, 0o755)
        self.as_user([os.path.join(self.bin, "initdb"), "-A", "trust", "-U", "postgres", "-D", self.data],
                     base_env())

    def as_user(self, argv, env, check_rc=True):
        extra = dict(user=self.user.pw_uid, group=self.user.pw_gid, extra_groups=[]) if os.geteuid() == 0 else {}
        p = subprocess.run(argv, env=env, cwd=self.dir, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=HANG_GUARD * 2, **extra)
        if check_rc:
            check(p.returncode == 0, "%s failed (%d):\n%s" % (" ".join(argv[:2]), p.returncode,
                                                             indent(clip(p.stdout + p.stderr))))
        return p

    def start(self, env):
        if os.path.exists(self.log):
            os.unlink(self.log)
        return self.as_user([os.path.join(self.bin, "pg_ctl"), "-D", self.data, "-l", self.log, "-w", "-o",
                             "-c listen_addresses='' -c unix_socket_directories=%s -c max_connections=20 "
                             "-c fsync=off" % self.dir, "start"], env)

    def stop(self):
        return self.as_user([os.path.join(self.bin, "pg_ctl"), "-D", self.data, "-m", "fast", "-w", "stop"],
                            base_env())

    def postmaster(self):
        with open(os.path.join(self.data, "postmaster.pid")) as f:
            return int(f.readline())

    def pgbench(self, *args):
        return subprocess.run(["pgbench", "-h", self.dir, "-U", "postgres"] + list(args) + ["postgres"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=HANG_GUARD * 2,
                              env=base_env())


def _tree_cpu_s(pid):
    """A process's CPU, its reaped children's and its live children's, in
    seconds, by their own clocks (/proc: utime, stime, cutime, cstime). The
    children first: one reaped before its own read is in the parent's
    cutime read after (one reaped between the two reads counts twice: a
    backend's few ms, on the side of a stricter share)."""
    children = sum(c for c in (_proc_cpu_s(c) for c in _children_of(pid)) if c is not None)
    fields = _stat(pid)
    check(fields is not None, "process %d is gone before its tree's CPU was read" % pid)
    return sum(int(x) for x in fields[11:15]) / CLK_TCK + children


def _alive(pid):
    fields = _stat(pid)
    return fields is not None and fields[0] != "Z"


def _pgbench_round(cl, env, label):
    """Starts the server with env, runs pgbench -C for 3 s, reads the tree's
    CPU, stops it; returns (pgbench's result, the tree's cpu s, the
    postmaster's pid, the server's log)."""
    started = cl.start(env)
    try:
        pm = cl.postmaster()
        r = cl.pgbench("-n", "-C", "-c", "4", "-T", "3")
        cpu = _tree_cpu_s(pm)
    finally:
        cl.stop()
    # pg_ctl stop returns when the postmaster has removed its pid file; its
    # stop (the shim's, at its exit) comes after.
    deadline = time.monotonic() + HANG_GUARD
    while _alive(pm):
        check(time.monotonic() < deadline, "%s: the postmaster %d did not exit within %d s" % (label, pm, HANG_GUARD))
        time.sleep(0.05)
    with open(cl.log, errors="replace") as f:
        log = (started.stdout + started.stderr).decode("utf-8", "replace") + f.read()
    check(r.returncode == 0, "%s: pgbench -C failed (%d):\n%s" % (label, r.returncode, indent(clip(r.stdout + r.stderr))))
    return r, cpu, pm, log


def test_postgresql_backends_are_the_postmasters(ctx):
    pg_bin = _pg_bin()
    if not pg_bin or not shutil.which("pgbench"):
        raise Skip("PostgreSQL is not installed (Debian's postgresql package: scripts/install-deps)")
    cl = Cluster(ctx, pg_bin)
    try:
        cl.start(base_env())
        init = cl.pgbench("-i", "-s", "1")
        check(init.returncode == 0, "pgbench -i failed:\n%s" % indent(clip(init.stdout + init.stderr)))
        cl.stop()
        plain, _, _, _ = _pgbench_round(cl, base_env(), "plain")
        prof = os.path.join(cl.dir, "prof")
        os.mkdir(prof)
        os.chown(prof, cl.user.pw_uid, cl.user.pw_gid)
        # Only the server's images (not pg_ctl's, nor the shell it starts
        # the server through): the operator's PROFILE_ONLY.
        env = dict(base_env(), LD_PRELOAD=cl.lib, PROFILE_DIR=prof, PROFILE_NAME="pg", PROFILE_ONLY="postgres",
                   PROFILE_HEAP_SAMPLE="0")
        r, truth, pm, log = _pgbench_round(cl, env, "profiled")
        for text in (plain.stdout, r.stdout):
            m = re.search(rb"number of failed transactions: (\d+)", text)
            check(not m or m.group(1) == b"0", "pgbench counted failed transactions:\n%s" % indent(clip(text)))
        done = int(re.search(rb"number of transactions actually processed: (\d+)", r.stdout).group(1))
        check(done >= 20, "under the shim, pgbench -C processed %d transactions in 3 s" % done)
        # pg_ctl's `postgres -V` is an image of the server too: its set, and
        # the postmaster's, a handful of files for hundreds of backends.
        names = profile_dir_names(prof)
        check(len(names) <= 4 and all(n.endswith((".cpu.pprof", ".wait.pprof")) for n in names),
              "the postmaster's files and pg_ctl's version check's, nothing of the backends': PROFILE_DIR has "
              "%d: %s\nthe server's log:\n%s" % (len(names), names[:8], indent(clip(log.encode()))))
        mine = [l for l in log.splitlines() if l.startswith("# profshim: wrote ") and " | pid %d " % pm in l]
        check(len(mine) == 1, "the postmaster's line is missing:\n%s" % indent(clip(log.encode())))
        path = mine[0].split(" | ", 1)[0].split()[3]
        check(path.endswith(".cpu.pprof"), "the postmaster's line names no CPU profile first: %s" % mine[0])
        cpu = ctx.read(path)
        by_pid = _by_pid(cpu, cpu.index("cpu"))
        got = sum(by_pid.values()) / 1e9
        check(by_pid.get(pm, 0) < sum(by_pid.values()), "the backends' samples are missing: all under the postmaster")
        # Every backend is in the profile: each is credited its CPU to its
        # stop (a backend per transaction, and the server's helpers).
        check(len(by_pid) > done, "the postmaster's CPU profile has %d pid labels for %d transactions, a backend "
              "each" % (len(by_pid), done))
        # What a backend uses after its stop is in no profile: its own
        # teardown (libc's atexit handlers, OpenSSL's cleanup among them,
        # destructors, the kernel's exit), ~40% of a 43 ms backend here
        # (perf: EVP_CIPHER_free and _dl_fini under exit). The tree's
        # clocks are the bound's truth all the same: half of it is lost
        # only if backends are.
        check(got >= 0.5 * truth, "the postmaster's CPU profile holds %.2f s, its tree used %.2f s (by their own "
              "clocks)" % (got, truth))
        m = re.search(r" \| forks (\d+) merged", mine[0])
        check(m and int(m.group(1)) >= done, "the postmaster's line should count its %d+ backends merged:\n%s" % (
            done, indent(clip(log.encode()))))
    finally:
        subprocess.run([os.path.join(pg_bin, "pg_ctl"), "-D", cl.data, "-m", "immediate", "stop"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       **(dict(user=cl.user.pw_uid, group=cl.user.pw_gid, extra_groups=[]) if os.geteuid() == 0 else {}))
        shutil.rmtree(cl.dir, ignore_errors=True)
