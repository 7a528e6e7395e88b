"""profshim ls | top | diff | report | check: the commands that read the files
(and check, which reads an environment)
(scripts/profshim runs programs and hands these to this file)."""

import sys

USAGE = {
    "ls": """usage: profshim ls [DIR|DIR/NAME...]

One line per process image whose profiles are in DIR (default: .), or only
those named NAME and NAME.*: its name (what `profshim top DIR/NAME` takes),
program, pid, parent, how it stopped, CPU, heap in use at the stop, wait
time, what else it wrote and its command line (cut at 60 characters; all
of it is in the report). One header per session (one run of a root
program with all it started); the root first, then the largest by CPU.
Read from the files themselves (their gzip header and comments); needs no
Go.""",
    "top": """usage: profshim top [-n N] [-i SAMPLE_INDEX] [--lines] FILE|DIR/NAME|DIR [-- PPROF_OPTION...]

`go tool pprof -top` on FILE, or on each of DIR/NAME's profiles (NAME.cpu,
NAME.heap, NAME.wait, ...; a DIR alone: its latest run's root): the N
(default 20) functions with the most
flat time or bytes. -i picks the sample type (heap: inuse_space,
alloc_space, ...); --lines ranks file:line instead of functions; what
follows -- goes to pprof as it is. A CPU or wait profile's numbered
snapshots (each the CPU since the one before) are read with it: the run.""",
    "diff": """usage: profshim diff [-n N] [-i SAMPLE_INDEX] [--lines] [--abs] BASE NEW [-- PPROF_OPTION...]

What changed from BASE to NEW: two files of one kind, or DIR/NAME twice
(each kind both have), or two directories (their latest runs' roots). Per
function, its share of its own run's total (flat and cum), base and new,
the change, and ±3σ: three standard errors of the sampling, from the
profile's own sample rate. CHANGED: beyond that; noise: within it. Largest
change first, N rows (default 20). --abs: the values instead of shares
(for runs of a fixed amount of work). With options after --, pprof's own
difference instead (`go tool pprof -base`, a heap's `-diff_base`).""",
    "check": """usage: profshim check [--env-file FILE | --unit NAME] [-- COMMAND]

What the shim would do with an environment: this command's (default), an
EnvironmentFile as systemd reads it, or a unit's (`systemctl show -p
Environment,EnvironmentFiles NAME`, its files read here). Says whether
LD_PRELOAD names the shim; inert (no PROFILE_DIR), active, or refused (the
setup error the shim would stop the program with, exit 78); each PROFILE_*
variable's value as the shim's own parsers read it, or its error; and each
PROFILE_* name that is not the shim's, with the one it resembles (the shim
ignores those, and says nothing at all while inert). With COMMAND: whether
the loader would preload into it. Writes nothing. Exit status: 0, 1 for an
unknown name, 78 when the shim would refuse.""",
    "report": """usage: profshim report [-o FILE.html] [--images N] [--nodes N] [--base OLD] DIR|DIR/NAME

Writes one self-contained HTML page (no server, no network): contents,
the images as `profshim ls` lists them, then for the root and the N
(default 8) largest other images, each profile's flame graph (click to
zoom), its top functions, its call graph (`go tool pprof -svg`, graphviz's
dot), CPU and waits by thread, and memory over time where a NAME.mem.tsv
exists. C++ names are shortened (std::vector<…>::push_back(…)); hover for
the full name. --base OLD (DIR or DIR/NAME): first, the root's change from
OLD, as `profshim diff` reckons it, with a flame graph coloured by change.
Default output: DIR/NAME.report.html, or DIR/report.html.""",
}


def out(line):
    sys.stdout.write(line + "\n")


def err(line):
    sys.stderr.write("# profshim: error: %s\n" % line)


def main(argv):
    if not argv or argv[0] not in USAGE:
        err("usage: profshim ls|top|diff|report|check ... (see profshim --help)")
        return 64
    cmd, args = argv[0], argv[1:]
    opts = args[:args.index("--")] if "--" in args else args
    if "-h" in opts or "--help" in opts:
        out(USAGE[cmd])
        return 0
    if cmd == "check":
        import check_cmd
        return check_cmd.check_main(args, out, err)
    if cmd == "ls":
        import ls
        return ls.main(args, out, err)
    if cmd in ("top", "diff"):
        import topdiff
        return topdiff.main(cmd, args, out, err)
    import report
    return report.main(args, out, err)


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except BrokenPipeError:
        sys.exit(0)
    except KeyboardInterrupt:
        sys.exit(130)
