"""Real programs from Debian's packages under the shim.

CONTRACT.md, activation: the shim is preloaded into any unmodified, dynamically
linked Linux process; stop paths (return/exit, a fatal signal with the default
action, exec), with the process's exit status, or the signal it died of,
exactly what it would have been without the shim (transparency). CONTRACT.md,
files / DESIGN "Fork and exec": a wrapper that does `exec real-binary` leaves
NAME.* to the real binary. Programs used: dash (/bin/sh), xz (which
installs its own SIGTERM handler, and on SIGTERM cleans up, puts SIG_DFL
back and raises SIGTERM again), sha256sum and yes (coreutils, default
actions).
"""

import lzma
import os
import random
import re
import resource
import shutil
import signal
import subprocess
import time

from common import KINDS, check, image_files, indent
from st_helpers import Status, check_summaries_name_files, prof_env, pprofs, reap_bounded, run, start


def _need(*progs):
    for p in progs:
        check(shutil.which(p), "%s not found (Debian package xz-utils / coreutils / dash)" % p)


def _text(path, size):
    """size bytes of random words: compressible, but xz -9 has work to do."""
    rng = random.Random(7)
    words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9)))
             for _ in range(5000)]
    out = []
    n = 0
    while n < size:
        w = " ".join(rng.choices(words, k=64)) + "\n"
        out.append(w)
        n += len(w)
    data = "".join(out).encode()[:size]
    with open(path, "wb") as f:
        f.write(data)
    return data


def _lib_cpu(prof, prefix):
    """cpu/nanoseconds of samples with any frame in a mapping whose file's
    basename starts with prefix."""
    ids = {m.id for m in prof.mappings if os.path.basename(m.file).startswith(prefix)}
    i = prof.index("cpu")
    return sum(s.values[i] for s in prof.samples if any(fm in ids for fm in s.frame_mappings))


def test_sh_exec_xz(ctx):
    """`sh -c 'exec xz -9 -c FILE > FILE.xz'`: dash execs xz; xz writes
    NAME.* (its CPU in liblzma), the shell's image NAME.dash.PID.*, each
    named in its own summary line; exit 0; xz's output is right."""
    _need("xz", "sh")
    cwd = ctx.mkdtemp("cwd")
    data = _text(os.path.join(cwd, "data.txt"), 3 << 20)
    d = ctx.mkdtemp("prof")
    r = run(ctx, ["/bin/sh", "-c", "exec xz -9 -c data.txt > data.txt.xz"], env=prof_env(ctx, d), cwd=cwd)
    check(r.status.is_exit(0), "sh -c 'exec xz ...': %s\n%s" % (r.status, r.describe()))
    with open(os.path.join(cwd, "data.txt.xz"), "rb") as f:
        check(lzma.decompress(f.read()) == data, "xz's output does not decompress to its input")
    files = pprofs(d)
    sandboxed = _landlocked(r)
    if sandboxed:
        _check_given_up(r, d, sandboxed)
        check(any(re.match(r"^run\.dash\.\d+\.cpu\.pprof$", n) for n in files), "the shell's image wrote no "
              "files; PROFILE_DIR holds %s\n%s" % (files, r.describe()))
        return
    check(all("run.%s.pprof" % k in files for k in KINDS), "xz, the real binary, should write run.*; "
          "PROFILE_DIR holds %s\n%s" % (files, r.describe()))
    others = sorted(set(n.rsplit(".", 2)[0] for n in files) - {"run"})
    check(len(others) == 1 and re.match(r"^run\.dash\.\d+$", others[0]), "want the shell's image as "
          "run.dash.PID.*; PROFILE_DIR holds %s" % files)
    check_summaries_name_files(r, d, 2)
    cpu = ctx.read(os.path.join(d, "run.cpu.pprof"), r)
    ctx.read(os.path.join(d, "run.heap.pprof"), r)
    ctx.read(os.path.join(d, others[0] + ".cpu.pprof"), r)
    total = cpu.total("cpu")
    lz = _lib_cpu(cpu, "liblzma")
    check(total >= 0.8 * r.cpu * 1e9 - 0.2e9 and lz >= 0.8 * total,
          "xz used %.2f s of CPU (rusage, shell included); its profile has %.2f s, %.2f s of it in liblzma\n%s" % (
              r.cpu, total / 1e9, lz / 1e9, cpu.cum_table("cpu")))


TO_STOP_RE = re.compile(r"\| process cpu (\d+\.\d+) s to the stop")
LANDLOCK_LINE = "Landlock sandbox (landlock_restrict_self) forbids"


def _landlocked(r):
    """xz 5.8 and later (Debian 13) puts itself in a Landlock sandbox that
    denies every new file when it writes to standard output: the stop is
    then given up, with one line that says so, and no file."""
    lines = [ln for ln in r.stderr_lines if LANDLOCK_LINE in ln]
    return lines


def _check_given_up(r, d, lines):
    check(len(lines) == 1 and lines[0].startswith("# profshim: "), "want one line for the sandbox: %s\n%s" % (
        lines, r.describe()))
    xz_files = [n for n in pprofs(d) if n.startswith("run.") and not re.match(r"^run\.dash\.", n)]
    check(not xz_files, "a sandboxed stop wrote %s\n%s" % (xz_files, r.describe()))


def _killed_while_busy(ctx, argv, cwd, stdout_path, lib_prefix, after=1.5):
    outs = {}
    for label in ("plain", "shim"):
        d = ctx.mkdtemp("prof")
        env = ctx.env(preload=False) if label == "plain" else prof_env(ctx, d)
        r = start(ctx, argv, env=env, cwd=cwd, stdout_path=stdout_path)
        time.sleep(after)
        check(not r.poll(), "%s ended before it was sent SIGTERM: %s\n%s" % (argv[0], r.status, r.describe()))
        r.kill(signal.SIGTERM)
        r.wait(30)
        outs[label] = (r, d)
    plain, _ = outs["plain"]
    r, d = outs["shim"]
    check(plain.status.is_signal(signal.SIGTERM), "baseline: %s\n%s" % (plain.status, plain.describe()))
    check(r.status.key() == plain.status.key(), "%s killed by SIGTERM while busy: under the shim %s, without "
          "it %s\n%s" % (argv[0], r.status, plain.status, r.describe()))
    sandboxed = _landlocked(r)
    if sandboxed:
        _check_given_up(r, d, sandboxed)
        return r, None
    check(pprofs(d) == image_files("run"), "PROFILE_DIR holds %s\n%s" % (pprofs(d), r.describe()))
    check_summaries_name_files(r, d, 1)
    cpu = ctx.read(os.path.join(d, "run.cpu.pprof"), r)
    ctx.read(os.path.join(d, "run.heap.pprof"), r)
    total = cpu.total("cpu")
    # rusage also holds the stop's own CPU (the symbols: ~0.2 s, not in
    # the profile), a large share of the little CPU a loaded machine gives
    # the program in its 1.5 s; the kernel's process clock when the stop
    # began, from the summary line, is the CPU the profile stands for.
    m = TO_STOP_RE.search("\n".join(r.stderr_lines))
    check(m, "the summary line lacks 'process cpu C s to the stop'\n%s" % r.describe())
    to_stop = float(m.group(1))
    check(to_stop <= r.cpu + 0.01, "process cpu %.2f s to the stop, more than the %.2f s rusage has" % (to_stop, r.cpu))
    check(abs(total - to_stop * 1e9) <= 0.1 * to_stop * 1e9 + 0.1e9, "%s used %.2f s of CPU to the stop (%.2f s in "
          "all, rusage); the profile has %.2f s\n%s" % (argv[0], to_stop, r.cpu, total / 1e9, cpu.cum_table("cpu")))
    if lib_prefix:
        got = _lib_cpu(cpu, lib_prefix)
        check(got >= 0.7 * total, "%s: only %.2f s of %.2f s in %s*\n%s" % (
            argv[0], got / 1e9, total / 1e9, lib_prefix, cpu.cum_table("cpu")))
    return r, cpu


def test_xz_killed_by_sigterm_while_busy(ctx):
    """xz -9 compressing, sent SIGTERM after 1.5 s: xz's own handler runs,
    xz cleans up and raises SIGTERM again with SIG_DFL back (the shim's
    handler returns for SIG_DFL): it dies of SIGTERM, exactly as without
    the shim, with both files written and its CPU in liblzma."""
    _need("xz")
    cwd = ctx.mkdtemp("cwd")
    _text(os.path.join(cwd, "data.txt"), 24 << 20)
    _killed_while_busy(ctx, ["/usr/bin/xz", "-9", "-T1", "-c", "data.txt"], cwd, os.path.join(cwd, "out.xz"),
                       "liblzma")


def test_sha256sum_killed_by_sigterm_while_busy(ctx):
    """sha256sum of /dev/zero (never ends), sent SIGTERM after 1.5 s: the
    default action; dies of SIGTERM, both files written, its CPU in them."""
    _need("sha256sum")
    cwd = ctx.mkdtemp("cwd")
    _killed_while_busy(ctx, [shutil.which("sha256sum"), "/dev/zero"], cwd, None, None)


def test_yes_dies_of_sigpipe(ctx):
    """`yes | head -n 1`, by hand: the reader closes the pipe, yes dies of
    SIGPIPE (default action) with both files written."""
    _need("yes")
    statuses = {}
    for label in ("plain", "shim"):
        d = ctx.mkdtemp("prof")
        env = ctx.env(preload=False) if label == "plain" else prof_env(ctx, d)
        errp = os.path.join(ctx.mkdtemp("io"), "stderr")
        with open(errp, "wb") as err:
            p = subprocess.Popen([shutil.which("yes")], env=env, cwd=ctx.mkdtemp("cwd"), stdin=subprocess.DEVNULL,
                                 stdout=subprocess.PIPE, stderr=err, start_new_session=True,
                                 preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_CORE, (0, 0)))
        first = p.stdout.readline()
        time.sleep(0.3)
        p.stdout.close()
        st = Status(reap_bounded(p, 30, "yes did not end after its reader went away (hang?)"))
        with open(errp, "rb") as f:
            err_text = f.read().decode("utf-8", "replace")
        statuses[label] = (st, d, err_text, first)
    plain, _, _, _ = statuses["plain"]
    st, d, err_text, first = statuses["shim"]
    check(plain.is_signal(signal.SIGPIPE), "baseline: yes %s" % plain)
    check(first == b"y\n", "yes printed %r" % first)
    check(st.key() == plain.key(), "yes under the shim %s; without it %s\nstderr:\n%s" % (st, plain, indent(err_text)))
    check(pprofs(d) == image_files("run"), "PROFILE_DIR holds %s\nstderr:\n%s" % (
        pprofs(d), indent(err_text)))
    lines = [l for l in err_text.splitlines() if l.startswith("# profshim: wrote")]
    check(len(lines) == 1, "want one summary line\n%s" % indent(err_text))
    for n in pprofs(d):
        ctx.read(os.path.join(d, n))


_OWN_ZLIB = r"""
#include <stdio.h>
#include <stdlib.h>
/* An executable that links a zlib of its own in and exports it, as node
   does (Chromium's zlib, whose state differs from Debian's): libz's own
   call to deflateReset by name would land here. (node exports all of it,
   so libelf's inflate calls stay within node's copy; this one exports the
   one function.) */
int deflateReset(void* strm) { (void)strm; fprintf(stderr, "own deflateReset called\n"); abort(); }
static volatile unsigned long sink;
int main(void) {
  for (unsigned long i = 0; i < 200000000UL; i++) sink = sink * 31 + i;
  printf("ok\n");
  return 0;
}
"""


def test_program_exporting_its_own_zlib(ctx):
    """node exports the zlib it links in (deflateReset & co.): the shim's
    gzip went through libz's deflateInit2_, whose own call to deflateReset
    bound to node's, on libz's state, and the stop crashed (no profile).
    A program exporting a deflateReset that aborts: every profile is
    written, no error, output and status as plain."""
    tmp = ctx.mkdtemp("ownz")
    src, exe = os.path.join(tmp, "own_zlib.c"), os.path.join(tmp, "own_zlib")
    with open(src, "w") as f:
        f.write(_OWN_ZLIB)
    c = subprocess.run(["gcc", "-O1", "-rdynamic", "-o", exe, src], capture_output=True)
    check(c.returncode == 0, "cannot build: %s" % c.stderr.decode())
    plain = run(ctx, [exe])
    d = ctx.mkdtemp("prof")
    r = run(ctx, [exe], env=prof_env(ctx, d))
    check(str(r.status) == str(plain.status) and r.out == plain.out, "plain %s, shim %s\n%s" % (
        plain.status, r.status, r.describe()))
    check(pprofs(d) == image_files("run") and
          not any("error" in l for l in r.stderr_lines), "PROFILE_DIR holds %s\n%s" % (pprofs(d), r.describe()))
    ctx.read(os.path.join(d, "run.cpu.pprof"))
