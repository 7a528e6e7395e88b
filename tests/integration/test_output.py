"""What the shim says: exactly one summary line on stderr, naming every file
written; nothing else, and nothing ever on stdout."""

import os
import re

from common import SUMMARY_PREFIX, check, image_files, indent, profile_dir_names


def _compare_with_plain(ctx, argv, expect_names, name="run", **vars):
    plain = ctx.run_plain(argv)
    r, d = ctx.profile(argv, name=name, expect_rc=plain.rc, **vars)
    summary = [l for l in r.stderr_lines if l.startswith(SUMMARY_PREFIX)]
    check(len(summary) == 1, "%s: want exactly one stderr line starting %r, got %d\n%s" % (
        " ".join(argv), SUMMARY_PREFIX, len(summary), r.describe()))
    line = summary[0]
    check(r.out == plain.out, "%s: stdout differs from the run without the shim (the shim must never write "
          "to stdout)\nwithout:\n%s\nwith:\n%s" % (" ".join(argv), indent(plain.stdout_text), indent(r.stdout_text)))
    rest = [l for l in r.stderr_lines if l != line]
    check(rest == plain.stderr_lines, "%s: apart from the summary line, stderr must be the program's own\n"
          "without the shim:\n%s\nwith (summary removed):\n%s" % (
              " ".join(argv), indent("\n".join(plain.stderr_lines) or "(empty)"), indent("\n".join(rest) or "(empty)")))
    named = r.named_files()
    want = sorted(os.path.join(d, n) for n in expect_names)
    check(sorted(named) == want, "summary line should name %s; it names %s\n  %s" % (want, named, line))
    for p in named:
        check(os.path.isfile(p), "summary names %s, which does not exist" % p)
    check(profile_dir_names(d) == sorted(expect_names), "PROFILE_DIR holds %s, want %s" % (
        profile_dir_names(d), sorted(expect_names)))
    return line, r


def test_summary_line_names_both_files(ctx):
    line, r = _compare_with_plain(ctx, ["cpu_split", "80"], image_files("run"))
    # The few figures a reader wants first: samples, wall and CPU seconds,
    # peak RSS, heap in use.
    low = line.lower()
    missing = [w for w in ("sample", "wall", "cpu", "rss", "heap") if w not in low]
    check(not missing, "summary line lacks %s: %r" % (missing, line))
    check(len(re.findall(r"\d+(?:\.\d+)?", line)) >= 4, "summary line has too few figures: %r" % line)


def test_summary_line_with_stderr_noise(ctx):
    """A program that writes to stderr itself (heap_hold) and exits via exit()."""
    _compare_with_plain(ctx, ["heap_hold", "exit"], image_files("run"))


def test_summary_line_nonzero_status(ctx):
    _compare_with_plain(ctx, ["exit_code", "3"], image_files("job"), name="job")
