"""Process images: the exec family, fork, vfork and posix_spawn.

CONTRACT.md, files: the root process's final image writes NAME.*; every other
profiled image (a forked child, an exec'd descendant, the image a process had
before it called execve) writes NAME.PROG.PID.*, so that no two images ever
overwrite each other, and every file written is named in its image's
summary line. CONTRACT.md, stop paths: execve and its family write the old image's
profiles before it is replaced; a forked child profiles itself from the fork
on, the parent's profiles unaffected. DESIGN "Fork and exec: process images":
a vfork or posix_spawn child writes nothing of its own; an exec with an
environment lacking LD_PRELOAD profiles nothing in the new image; a failed
exec resumes profiling and the final stop writes again; a wrapper that does
`exec ./real-binary` leaves NAME.* to the real binary. The status is always
the new image's / the program's own, checked from the raw wait status.
"""

import os
import re
import stat

from common import KINDS, check, image_files
from st_helpers import check_summaries_name_files, prof_env, pprofs, run

MiB = 1 << 20
# Every held block is >= 8 MiB: jemalloc samples a block of B bytes with
# probability 1-exp(-B/512KiB), so a 2 MiB block is missed 1 run in 55.


def _wl_dir(ctx):
    return os.path.dirname(ctx.workload("st_exec"))


def _pid(r, label):
    m = re.search(r"^%s pid=(\d+)" % label, r.stdout_text, re.M)
    check(m, "the workload did not print '%s pid='\n%s" % (label, r.describe()))
    return int(m.group(1))


def _read_pair(ctx, d, stem, r):
    return (ctx.read(os.path.join(d, stem + ".cpu.pprof"), r),
            ctx.read(os.path.join(d, stem + ".heap.pprof"), r))


def _has(prof, func, what, t="samples"):
    check(prof.cum(func, t) > 0, "%s: %s should be in %s\n%s" % (what, func, os.path.basename(prof.path),
                                                                  prof.cum_table(t)))


def _lacks(prof, func, what, t="samples"):
    check(prof.cum(func, t) == 0, "%s: %s must not be in %s (another image's work)\n%s" % (
        what, func, os.path.basename(prof.path), prof.cum_table(t)))


def _holds(prof, func, want, what):
    got = prof.cum(func, "inuse_space")
    check(0.9 * want <= got <= 1.1 * want, "%s: %s holds %d bytes; %s shows %d\n%s" % (
        what, func, want, os.path.basename(prof.path), got, prof.cum_table("inuse_space")))


# --------------------------------------------------------------------------
# The exec family


def _exec(ctx, fn):
    d = ctx.mkdtemp("prof")
    # The p-variants search PATH: a missing dir and one without st_exec come
    # first (neither may cost a stop: DESIGN, a path that is not an
    # executable file fails without a stop).
    env = prof_env(ctx, d, extra_path="/nonexistent-profshim-dir:/usr/local/bin:" + _wl_dir(ctx))
    r = run(ctx, ["st_exec", fn], env=env)
    check(r.status.is_exit(5), "st_exec %s: the status must be the new image's (exit 5); got %s\n%s" % (
        fn, r.status, r.describe()))
    pid = _pid(r, "before")
    check(_pid(r, "after") == pid and "preload=yes shim=yes" in r.stdout_text,
          "the new image did not run with the shim\n%s" % r.describe())
    old = "run.st_exec.%d" % pid
    want = sorted(image_files(old) + image_files("run"))
    check(pprofs(d) == want, "%s: want the old image's %s.* and the new image's run.*; PROFILE_DIR holds %s\n%s"
          % (fn, old, pprofs(d), r.describe()))
    check_summaries_name_files(r, d, 2)
    ocpu, oheap = _read_pair(ctx, d, old, r)
    ncpu, nheap = _read_pair(ctx, d, "run", r)
    what = "%s, old image" % fn
    _has(ocpu, "before_exec_burn", what)
    _lacks(ocpu, "after_exec_burn", what)
    _holds(oheap, "before_exec_hold", 8 * MiB, what)
    what = "%s, new image" % fn
    _has(ncpu, "after_exec_burn", what)
    _lacks(ncpu, "before_exec_burn", what)
    _holds(nheap, "after_exec_hold", 12 * MiB, what)
    _lacks(nheap, "before_exec_hold", what, "inuse_space")


def test_exec_execve(ctx):
    """CONTRACT.md, stop paths, execve: old image NAME.PROG.PID.*, new image NAME.*, status the new image's."""
    _exec(ctx, "execve")


def test_exec_execv(ctx):
    """CONTRACT.md, stop paths, execv."""
    _exec(ctx, "execv")


def test_exec_execvp(ctx):
    """CONTRACT.md, stop paths, execvp (PATH search)."""
    _exec(ctx, "execvp")


def test_exec_execvpe(ctx):
    """CONTRACT.md, stop paths, execvpe (PATH search, explicit environment)."""
    _exec(ctx, "execvpe")


def test_exec_execl(ctx):
    """CONTRACT.md, stop paths, execl."""
    _exec(ctx, "execl")


def test_exec_execlp(ctx):
    """CONTRACT.md, stop paths, execlp (PATH search)."""
    _exec(ctx, "execlp")


def test_exec_execle(ctx):
    """CONTRACT.md, stop paths, execle."""
    _exec(ctx, "execle")


def test_exec_fexecve(ctx):
    """CONTRACT.md, stop paths, fexecve (an fd of /proc/self/exe)."""
    _exec(ctx, "fexecve")


def test_exec_without_preload_in_env(ctx):
    """DESIGN "Fork and exec": an exec with an environment lacking LD_PRELOAD
    profiles nothing in the new image (documented choice); the old image,
    then the root's last profiled image, still writes its files (NAME.*),
    and the status is the new image's."""
    d = ctx.mkdtemp("prof")
    r = run(ctx, ["st_exec", "noenv"], env=prof_env(ctx, d))
    check(r.status.is_exit(5), "status must be the new image's (exit 5); got %s\n%s" % (r.status, r.describe()))
    check("preload=no shim=no" in r.stdout_text, "the new image should run without the shim\n%s" % r.describe())
    check(pprofs(d) == image_files("run"), "want the old image's run.* only; PROFILE_DIR "
          "holds %s\n%s" % (pprofs(d), r.describe()))
    check_summaries_name_files(r, d, 1)
    cpu, heap = _read_pair(ctx, d, "run", r)
    _has(cpu, "before_exec_burn", "noenv, old image")
    _holds(heap, "before_exec_hold", 8 * MiB, "noenv, old image")


def _failed_exec(ctx, mode, args, errname):
    d = ctx.mkdtemp("prof")
    r = run(ctx, ["st_exec", mode] + args, env=prof_env(ctx, d))
    check(r.status.is_exit(0), "st_exec %s: %s\n%s" % (mode, r.status, r.describe()))
    check("exec failed: %s" % errname in r.stdout_text, "the exec should fail with %s\n%s" % (
        errname, r.describe()))
    # The final stop writes NAME.* with the work done after the failure
    # (DESIGN: "If the exec fails, profiling resumes and the image's final
    # stop writes again"). Whatever the attempt wrote is named too.
    check(all("run.%s.pprof" % k in pprofs(d) for k in KINDS),
          "after a failed exec the process goes on and its final stop writes run.*; PROFILE_DIR holds %s\n%s" % (
              pprofs(d), r.describe()))
    lines = r.summary_lines()
    check(1 <= len(lines) <= 2, "want one summary line per stop (at most 2)\n%s" % r.describe())
    named = set(os.path.basename(p) for l in lines for p in re.findall(r"(\S+\.pprof)", l))
    check(named == set(pprofs(d)), "summary lines name %s; PROFILE_DIR holds %s" % (sorted(named), pprofs(d)))
    check(re.search(r"run\.cpu\.pprof", lines[-1]), "the last summary line should name run.cpu.pprof\n%s" %
          r.describe())
    cpu, heap = _read_pair(ctx, d, "run", r)
    got = cpu.cum("after_failed_burn", "cpu") / 1e9
    check(got >= 0.1, "after_failed_burn (~0.3 s of CPU after the failed exec) shows %.3f s: profiling did not "
          "resume\n%s" % (got, cpu.cum_table("cpu")))
    _holds(heap, "after_failed_hold", 10 * MiB, "after the failed exec")


def _not_a_program(ctx):
    """An executable file that is not a program (mode 0755, garbage bytes):
    its exec fails with ENOEXEC."""
    garbage = os.path.join(ctx.mkdtemp("cwd"), "garbage")
    with open(garbage, "wb") as f:
        f.write(bytes(range(1, 256)) * 16)
    os.chmod(garbage, 0o755)
    return garbage


def test_exec_fails_enoexec_profiling_goes_on(ctx):
    """DESIGN "Fork and exec": an exec of an executable file that is not a
    program (mode 0755, garbage bytes: ENOEXEC) fails; the process goes on
    and is still profiled: final files with CPU and heap from after the
    failure."""
    _failed_exec(ctx, "enoexec", [_not_a_program(ctx)], "ENOEXEC")


def test_exec_failing_after_the_final_stop_leaves_its_files(ctx):
    """main returns; an atexit handler's exec then fails (ENOEXEC). The
    final stop has given its tables back, so the image does not resume:
    its files stand, with the CPU before the return, and no second stop
    writes over them (one that did wrote empty CPU and wait profiles)."""
    d = ctx.mkdtemp("prof")
    r = run(ctx, ["st_exec", "atexit_enoexec", _not_a_program(ctx)], env=prof_env(ctx, d))
    check(r.status.is_exit(0) and "exec failed: ENOEXEC" in r.stdout_text, "st_exec atexit_enoexec: %s\n%s" % (
        r.status, r.describe()))
    check(len(r.summary_lines()) == 1, "want the final stop's line alone\n%s" % r.describe())
    cpu, heap = _read_pair(ctx, d, "run", r)
    got = cpu.cum("before_exec_burn", "cpu") / 1e9
    check(got >= 0.1, "before_exec_burn (~0.2 s of CPU before the return) shows %.3f s\n%s" % (
        got, cpu.cum_table("cpu")))
    _holds(heap, "before_exec_hold", 8 * MiB, "at the return")


def test_exec_fails_e2big_profiling_goes_on(ctx):
    """As above, with an exec that fails with E2BIG (a 200 KiB argument)."""
    _failed_exec(ctx, "e2big", [], "E2BIG")


def _wrapper(ctx, argv, what):
    d = ctx.mkdtemp("prof")
    env = prof_env(ctx, d, extra_path="/nonexistent-profshim-dir:/usr/local/bin:" + _wl_dir(ctx))
    r = run(ctx, argv, env=env)
    check(r.status.is_exit(5), "%s: status must be st_exec's (exit 5); got %s\n%s" % (what, r.status, r.describe()))
    check("preload=yes shim=yes" in r.stdout_text, "%s: st_exec did not run with the shim\n%s" % (
        what, r.describe()))
    files = pprofs(d)
    check(all("run.%s.pprof" % k in files for k in KINDS), "%s: the real binary should write run.*; "
          "PROFILE_DIR holds %s\n%s" % (what, files, r.describe()))
    shell = sorted(set(n.rsplit(".", 2)[0] for n in files) - {"run"})
    check(len(shell) == 1 and re.match(r"^run\.[A-Za-z0-9._-]+\.\d+$", shell[0]) and "st_exec" not in shell[0],
          "%s: want exactly one other image (the shell, once: its PATH search must not stop once per "
          "directory), named run.PROG.PID; PROFILE_DIR holds %s\n%s" % (what, files, r.describe()))
    check_summaries_name_files(r, d, 2)
    cpu, heap = _read_pair(ctx, d, "run", r)
    _has(cpu, "after_exec_burn", what)
    _holds(heap, "after_exec_hold", 12 * MiB, what)
    _read_pair(ctx, d, shell[0], r)


def test_shell_exec_leaves_name_to_real_binary(ctx):
    """DESIGN "Fork and exec" / CONFIG "Files": `sh -c 'exec st_exec after'`
    (PATH searched) leaves NAME.* to the real binary; the shell's image
    writes NAME.PROG.PID.* once."""
    _wrapper(ctx, ["/bin/sh", "-c", "exec st_exec after"], "sh -c 'exec st_exec after'")


def test_script_wrapper_leaves_name_to_real_binary(ctx):
    """As above, with a `#!/bin/sh` wrapper script that execs the binary."""
    cwd = ctx.mkdtemp("cwd")
    script = os.path.join(cwd, "wrapper.sh")
    with open(script, "w") as f:
        f.write("#!/bin/sh\n# a wrapper, as packages ship them\nexec %s after \"$@\"\n" % ctx.workload("st_exec"))
    os.chmod(script, os.stat(script).st_mode | stat.S_IXUSR)
    _wrapper(ctx, [script], "#!/bin/sh wrapper")


def test_exec_chain_each_image_its_own_files(ctx):
    """CONTRACT.md, files: no image overwrites another. The root
    execs itself three times (st_exec chain 2 -> chain 1 -> chain 0 ->
    after): four images, same program, same pid. Want four summary lines
    naming four distinct pairs of files, and every pre-exec image's CPU
    profile with its chain_burn."""
    d = ctx.mkdtemp("prof")
    r = run(ctx, ["st_exec", "chain", "2"], env=prof_env(ctx, d))
    check(r.status.is_exit(5), "status must be the last image's (exit 5); got %s\n%s" % (r.status, r.describe()))
    check_summaries_name_files(r, d, 4)


# --------------------------------------------------------------------------
# fork, vfork, posix_spawn


def _fork(ctx, mode, images, child_status, forks="own"):
    """forks: PROFILE_FORKS; under merge a forked child's work is in the
    parent's files (its own pid label), which the caller checks."""
    plain = run(ctx, ["st_fork", mode], env=ctx.env(preload=False))
    check(plain.status.is_exit(0), "baseline st_fork %s: %s\n%s" % (mode, plain.status, plain.describe()))
    d = ctx.mkdtemp("prof")
    r = run(ctx, ["st_fork", mode], env=prof_env(ctx, d, PROFILE_FORKS=forks))
    check(r.status.is_exit(0), "st_fork %s: %s\n%s" % (mode, r.status, r.describe()))
    m = re.search(r"^child pid=(\d+) status=(\S+)$", r.stdout_text, re.M)
    check(m, "no child status line\n%s" % r.describe())
    check(m.group(2) == child_status and ("status=" + child_status) in plain.stdout_text,
          "st_fork %s: the parent saw its child end with %s under the shim, want %s (as without it)\n%s" % (
              mode, m.group(2), child_status, r.describe()))
    stems = check_summaries_name_files(r, d, images)
    check("run" in stems, "the root's final image should write run.*; PROFILE_DIR holds %s" % pprofs(d))
    pcpu, pheap = _read_pair(ctx, d, "run", r)
    _has(pcpu, "parent_burn", "the parent")
    _holds(pheap, "parent_hold", 14 * MiB, "the parent")
    if forks == "merge":
        return r, d, int(m.group(1))
    for f in ("child_burn", "grandchild_burn", "spawned_burn"):
        _lacks(pcpu, f, "the parent")
    for f in ("child_hold", "grandchild_hold", "spawned_hold"):
        _lacks(pheap, f, "the parent", "inuse_space")
    return r, d, int(m.group(1))


def _child_files(ctx, d, r, pid, prog="st_fork"):
    stem = "run.%s.%d" % (prog, pid)
    check(stem + ".cpu.pprof" in pprofs(d), "the child (pid %d) should write %s.*; PROFILE_DIR holds %s\n%s" % (
        pid, stem, pprofs(d), r.describe()))
    return _read_pair(ctx, d, stem, r)


def _forked(ctx, mode, status):
    """PROFILE_FORKS=own; merged, the same stop paths: test_forks_merge.py."""
    r, d, pid = _fork(ctx, mode, 2, status)
    ccpu, cheap = _child_files(ctx, d, r, pid)
    what = "the forked child (%s)" % mode
    _has(ccpu, "child_burn", what)
    _lacks(ccpu, "parent_burn", what)
    _holds(cheap, "child_hold", 8 * MiB, what)


def test_fork_child_exit(ctx):
    """CONTRACT.md, stop paths, fork: the child profiles itself (NAME.PROG.PID.*,
    child_burn and not the parent's parent_burn) and exits with exit(3); the
    parent's profiles are intact and the parent sees status 3."""
    _forked(ctx, "exit", "exit:3")


def test_fork_child__exit(ctx):
    """As above, the child ends with _exit(4)."""
    _forked(ctx, "_exit", "exit:4")


def test_fork_child_sigterm(ctx):
    """As above, the child dies of SIGTERM (raised): its files are written,
    the parent sees signal 15."""
    _forked(ctx, "term", "signal:15")


def test_fork_child_forks_again(ctx):
    """CONTRACT.md, files: a child that forks again, PROFILE_FORKS=own: three
    images, three pairs of files, each summary line naming its own; each CPU
    profile holds its own image's work only (merged: test_forks_merge.py)."""
    r, d, pid = _fork(ctx, "forkfork", 3, "exit:3")
    _forkfork_own(ctx, r, d, pid)


def _forkfork_own(ctx, r, d, pid):
    m = re.search(r"^grandchild pid=(\d+) status=(\S+)$", r.stdout_text, re.M)
    check(m and m.group(2) == "exit:4", "the child should see its child exit 4\n%s" % r.describe())
    gpid = int(m.group(1))
    ccpu, _ = _child_files(ctx, d, r, pid)
    gcpu, gheap = _child_files(ctx, d, r, gpid)
    _has(ccpu, "child_burn", "the child")
    _lacks(ccpu, "grandchild_burn", "the child")
    _lacks(ccpu, "parent_burn", "the child")
    _has(gcpu, "grandchild_burn", "the grandchild")
    _lacks(gcpu, "child_burn", "the grandchild")
    _lacks(gcpu, "parent_burn", "the grandchild")
    _holds(gheap, "grandchild_hold", 12 * MiB, "the grandchild")


def test_fork_child_execs_itself(ctx):
    """CONTRACT.md, files: a forked child that execs (the same program): its
    pre-exec image and its exec'd image are two images of one pid and one
    program name, and no image overwrites another: three
    images, three distinct pairs of files. The exec'd image's status (6)
    is what the parent sees."""
    _fork(ctx, "fork_exec", 3, "exit:6")


def _spawned(ctx, mode, status, profiled):
    r, d, pid = _fork(ctx, mode, 2 if profiled else 1, status)
    if not profiled:
        check(pprofs(d) == image_files("run"), "%s: only the parent profiles; PROFILE_DIR "
              "holds %s\n%s" % (mode, pprofs(d), r.describe()))
        return
    check("shim=yes" in r.stdout_text, "the spawned program should run with the shim\n%s" % r.describe())
    scpu, sheap = _child_files(ctx, d, r, pid)
    _has(scpu, "spawned_burn", "the spawned program")
    _lacks(scpu, "parent_burn", "the spawned program")
    _holds(sheap, "spawned_hold", 10 * MiB, "the spawned program")


def test_vfork_exec_child_is_an_exec_descendant(ctx):
    """DESIGN "Fork and exec": a vfork child writes nothing of its own; the
    program it execs (profiled: LD_PRELOAD in environ) is an exec'd
    descendant and writes NAME.PROG.PID.* (CONTRACT.md, files), never the root's
    NAME.*; the parent's run.* are its own."""
    _spawned(ctx, "vfork_exec", "exit:6", True)


def test_vfork_exec_without_preload_writes_nothing(ctx):
    """DESIGN "Fork and exec": vfork + execve with an environment lacking
    LD_PRELOAD: nothing but the parent's files."""
    _spawned(ctx, "vfork_noenv", "exit:6", False)


def test_vfork_failed_exec_child_writes_nothing(ctx):
    """DESIGN "Fork and exec": a vfork child whose exec fails and that calls
    _exit(7) writes nothing (it shares the parent's memory)."""
    _spawned(ctx, "vfork_fail", "exit:7", False)


def test_posix_spawn_child_is_an_exec_descendant(ctx):
    """DESIGN "Fork and exec" + CONTRACT.md, files: a posix_spawn child writes
    nothing of its own before its exec; the program spawned (profiled) is an
    exec'd descendant: NAME.PROG.PID.*, not NAME.*."""
    _spawned(ctx, "spawn", "exit:6", True)


def test_posix_spawn_without_preload_writes_nothing(ctx):
    """posix_spawn with an environment lacking LD_PRELOAD: nothing but the
    parent's files."""
    _spawned(ctx, "spawn_noenv", "exit:6", False)


def test_nested_session_with_its_own_name_is_a_root(ctx):
    """CONTRACT.md, files: the root process's last image writes NAME.*. A
    profiled shell runs a program with a PROFILE_DIR and PROFILE_NAME of its
    own (a profiled CI script whose step profiles itself, as
    `scripts/profshim -d D2 -n inner -- prog` does): that program starts a
    profiling session of its own, and its final image is that session's
    root: D2/inner.cpu.pprof, not D2/inner.PROG.PID.*. (Its name cannot
    collide with the outer session's files: another dir, another name.)"""
    d1 = ctx.mkdtemp("outer")
    d2 = ctx.mkdtemp("inner")
    cmd = "PROFILE_DIR=%s PROFILE_NAME=inner %s after; true" % (d2, ctx.workload("st_exec"))
    r = run(ctx, ["/bin/sh", "-c", cmd], env=prof_env(ctx, d1, name="outer"))
    check(r.status.is_exit(0), "%s\n%s" % (r.status, r.describe()))
    check(pprofs(d2) == image_files("inner"), "the inner session's program should write "
          "%s in its own PROFILE_DIR; it holds %s\n%s" % (image_files("inner"), pprofs(d2), r.describe()))
    check("outer.cpu.pprof" in pprofs(d1), "the outer shell should write outer.*; %s holds %s" % (d1, pprofs(d1)))
