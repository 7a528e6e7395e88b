"""top and diff: thin over `go tool pprof -top`, on a file or on every
profile of DIR/NAME, and on two runs (-base for profiles that count since
the start, -diff_base for a heap's state at one moment)."""

import os

import compare
import gopprof
import images
import pprofile


def parse(args, nfiles):
    """(pprof options, targets) from [-n N] [-i TYPE] [--lines] T... [-- X...]."""
    opts, targets, extra = {"n": "20", "i": None, "lines": False, "abs": False}, [], []
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            extra = args[i + 1:]
            break
        if a in ("-n", "-i"):
            if i + 1 >= len(args):
                raise ValueError("%s needs a value" % a)
            opts[a[1]] = args[i + 1]
            i += 2
            continue
        if a in ("--lines", "--abs"):
            opts[a[2:]] = True
        elif a.startswith("-") and a != "-":
            raise ValueError("unknown option %s (see --help; pprof's own options go after --)" % a)
        else:
            targets.append(a)
        i += 1
    if len(targets) != nfiles:
        raise ValueError("want %s, got %d argument%s" % (
            "FILE or DIR/NAME" if nfiles == 1 else "BASE and NEW", len(targets), "" if len(targets) == 1 else "s"))
    if not opts["n"].isdigit():
        raise ValueError("-n wants a number of lines, got %r" % opts["n"])
    pp = ["-top", "-nodecount=" + opts["n"]] + (["-lines"] if opts["lines"] else [])
    return pp, opts, targets, extra


def is_snapshot_kind(path):
    """A heap's profile is the state at one moment (its in-use types)."""
    s = pprofile.read(path)
    return any(t.startswith("inuse_") for t in s.types)


def index_args(path, index):
    if not index:
        return []
    s = pprofile.read(path)
    return ["-sample_index=" + index] if s.total(index) is not None else None


def resolve(target, err, out):
    """{kind: path} of FILE or DIR/NAME; of a DIR, its latest run's root."""
    if os.path.isdir(target):
        imgs, _ = images.scan(target)
        roots = [s.images[0] for s in images.sessions(imgs) if s.root]
        if not roots:
            err("%s: no root's profiles here; name one: %s/NAME (profshim ls %s)" % (target, target, target))
            return {}
        target = os.path.join(target, roots[0].base)
        out("# %s: the root of its latest run" % target)
    if not os.path.isfile(target):
        # DIR/NAME: its image's files, the snapshots with them, and the
        # latest snapshots of an image that never reached its stop.
        d, name = os.path.split(target)
        if os.path.isdir(d or "."):
            imgs, _ = images.scan(d or ".", name)
            img = next((i for i in imgs if i.base == name), None)
            if img is not None:
                return {k: [f.path for f in img.run_files(k)] for k in img.files}
    found = gopprof.profiles_of(target)
    if not found:
        err("%s: no such file, and no %s.KIND.pprof profiles" % (target, target))
    return {k: [path] for k, path in found.items()}


def main(cmd, args, out, err):
    try:
        return _main(cmd, args, out, err)
    finally:
        gopprof.cleanup()


def _main(cmd, args, out, err):
    try:
        pp, opts, targets, extra = parse(args, 1 if cmd == "top" else 2)
    except ValueError as e:
        err("profshim %s: %s" % (cmd, e))
        return 64
    index = opts["i"]
    sets = [resolve(t, err, out) for t in targets]
    if not all(sets):
        return 66
    if cmd == "top":
        jobs = [(k, sets[0][k], []) for k in gopprof.ordered(sets[0])]
    else:
        base, new = sets
        kinds = [k for k in gopprof.ordered(new) if k in base]
        if len(base) == 1 and len(new) == 1 and not kinds:  # two files of differing names
            kinds = list(new)
            base = {kinds[0]: list(base.values())[0]}
        if not kinds:
            err("profshim diff: %s and %s have no kind of profile in common (%s; %s)" % (
                targets[0], targets[1], ", ".join(base), ", ".join(new)))
            return 66
        jobs = []
        for k in kinds:
            flag = "-diff_base" if is_snapshot_kind(new[k][0]) else "-base"
            jobs.append((k, new[k], [flag, base[k]]))
        if not extra:
            return shares(jobs, opts, out, err)
    if opts["abs"]:
        err("profshim %s: --abs is diff's, and not with pprof's options after --" % cmd)
        return 64
    status, shown = 0, 0
    for kind, files, pre in jobs:
        ia = index_args(files[0], index)
        if ia is None:
            continue  # this kind has no such sample type
        try:
            # pprof merges several sources, but takes one -base: a base
            # with snapshots is merged into one file first.
            args = [pre[0], gopprof.merged(pre[1])] if pre else []
            rc, text, errtext = gopprof.run(args + pp + ia + extra + files)
        except gopprof.Missing as e:
            err(str(e))
            return 69
        except OSError as e:
            err("profshim %s: %s" % (cmd, e))
            return 65
        if len(jobs) > 1:
            out("== %s: %s" % (kind, ("%s -> %s (%s)" % (_names(pre[1]), _names(files), pre[0])) if pre
                                     else _names(files)))
        if rc != 0:
            err("go tool pprof failed on %s:\n%s" % (files[0], errtext.strip()))
            status = 65
            continue
        out(text.rstrip("\n"))
        shown += 1
        if len(jobs) > 1:
            out("")
    if index and not shown:
        err("profshim %s: no profile of %s has the sample type %s" % (cmd, " ".join(targets), index))
        return 64
    return status


def shares(jobs, opts, out, err):
    """diff's own comparison (compare.py): shares with their noise."""
    status, shown = 0, 0
    for kind, files, pre in jobs:
        try:
            text = compare.compare(pre[1], files, opts["i"], int(opts["n"]), opts["abs"], opts["lines"])
        except ValueError as e:
            if opts["i"]:
                continue  # this kind has no such sample type
            err("profshim diff: %s: %s" % (files[0], e))
            status = 65
            continue
        except (OSError, EOFError, IndexError) as e:
            err("profshim diff: cannot read %s: %s" % (files[0], e))
            status = 65
            continue
        out("== %s: %s -> %s" % (kind, _names(pre[1]), _names(files)))
        out("\n".join(text))
        out("")
        shown += 1
    if opts["i"] and not shown:
        err("profshim diff: no profile has the sample type %s" % opts["i"])
        return 64
    return status


def _names(files):
    return files[0] + ("" if len(files) == 1 else " and %d snapshot%s" % (
        len(files) - 1, "" if len(files) == 2 else "s"))
