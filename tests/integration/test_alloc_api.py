"""Every allocation entry point works under the shim (inert and active),
frees with its matching function, and a big block made through each one is
in the heap profile at its own site."""

import os

from common import check, indent, pct, truths


def _plain_and_inert(ctx, prog, ok_line):
    plain = ctx.run_plain([prog])
    check(plain.rc == 0 and ok_line in plain.stdout_text, "%s fails even without the shim:\n%s" % (
        prog, plain.describe()))
    inert = ctx.run([prog])
    check(inert.rc == 0 and inert.out == plain.out and inert.err == plain.err,
          "%s with the shim inert: want exit 0 and the same output as without the shim\n"
          "without:\n%s\nwith:\n%s" % (prog, indent(plain.describe()), indent(inert.describe())))
    return plain


def _active(ctx, prog, ok_line, plain, **vars):
    r, d = ctx.profile([prog], **vars)
    check(ok_line in r.stdout_text and r.out == plain.out,
          "%s with profiling on: output differs from the run without the shim\n%s" % (prog, r.describe()))
    t = truths(r)
    path = os.path.join(d, "run.heap.pprof")
    prof = ctx.read(path, r)
    bad = []
    for site, v in t.items():
        want = v["inuse_space"]
        got = prof.cum(site, "inuse_space")
        if not (0.9 * want <= got <= 1.1 * want):
            bad.append("%-32s inuse_space %10d, held %10d (%s)" % (site, got, want, pct(got, want)))
    check(not bad, "%s: blocks held through these entry points are not in the heap profile as held "
          "(+-10%%):\n%s\n%s" % (prog, indent("\n".join(bad)), indent(prof.cum_table("inuse_space", 30))))


def test_c_allocation_api(ctx):
    plain = _plain_and_inert(ctx, "alloc_api", "alloc_api: all ok")
    _active(ctx, "alloc_api", "alloc_api: all ok", plain)


def test_c_allocation_api_dense_sampling(ctx):
    """The same at a 4 KiB sampling rate: every small allocation and free
    path is exercised with sampling on."""
    plain = ctx.run_plain(["alloc_api"])
    _active(ctx, "alloc_api", "alloc_api: all ok", plain, PROFILE_HEAP_SAMPLE=4096)


def test_cxx_allocation_api(ctx):
    plain = _plain_and_inert(ctx, "alloc_api_cc", "alloc_api_cc: all ok")
    _active(ctx, "alloc_api_cc", "alloc_api_cc: all ok", plain)


def test_cxx_allocation_api_dense_sampling(ctx):
    plain = ctx.run_plain(["alloc_api_cc"])
    _active(ctx, "alloc_api_cc", "alloc_api_cc: all ok", plain, PROFILE_HEAP_SAMPLE=4096)


def test_a_lone_thread_shares_the_main_arena_threads_together_do_not(ctx):
    """A thread started while no other of the program's is alive allocates
    from arena 0, the main thread's (alone on an arena of its own, jemalloc
    empties that arena at its exit and the next thread faults it back in:
    thread create+join 2.1x plain); two threads alive at once still get
    jemalloc's arenas of their own (one shared arena made concurrent
    allocation 2x slower). With the heap profiled: only then does the
    shim's jemalloc serve (test_allocator_choice.py)."""
    for vars in ({"PROFILE_DIR": ctx.mkdtemp("prof")},):
        r = ctx.run(["thread_arenas"], **vars)
        check(r.rc == 0, "thread_arenas: %s\n%s" % (r.status_text(), r.describe()))
        out = dict(l.split("=", 1) for l in r.stdout_text.split())
        b, c = out["together"].split(",")
        check(out["alone"] == "0", "a lone thread should share arena 0: %s\n%s" % (out, r.describe()))
        check(b != c, "two threads at once should get arenas of their own: %s\n%s" % (out, r.describe()))

