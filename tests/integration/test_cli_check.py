"""profshim check: what the shim would make of an environment (this one,
an EnvironmentFile, a unit's), with the shim's own parsers: a misspelt
variable the shim itself would pass over in silence is named, with the
name it was probably meant to be."""

import os
import shutil
import subprocess

from cli_helpers import profshim
from common import check, indent

GENERATOR = "systemd/user-environment-generators/30-systemd-environment-d-generator"


def _clean_env(ctx, **extra):
    e = {k: v for k, v in ctx.env(preload=False).items() if not k.startswith("PROFILE_") and k != "LD_PRELOAD"}
    e.update(extra)
    return e


def test_check_names_a_typo_when_the_shim_is_inert(ctx):
    # PROFILE_DIRECTORY instead of PROFILE_DIR: the shim is inert and says
    # nothing (as it must); check says what happened and what was meant.
    f = os.path.join(ctx.mkdtemp("envfile"), "svc.env")
    with open(f, "w") as out:
        out.write("# a unit's file\nLD_PRELOAD=%s\nPROFILE_DIRECTORY=/var/lib/profshim/svc\n"
                  "  PROFILE_CPU_HZ = 200\n" % ctx.lib)
    r = profshim(ctx, ["check", "--env-file", f], env=_clean_env(ctx))
    text = r.stdout_text
    check(r.rc == 1, "a typo should make check exit 1:\n%s" % r.describe())
    check("inert" in text and "PROFILE_DIRECTORY" in text and "did you mean PROFILE_DIR?" in text,
          "check should say inert and name PROFILE_DIRECTORY with PROFILE_DIR:\n%s" % indent(text))
    check("PROFILE_CPU_HZ=200" in text, "the file's other variable (spaces around =) should be read:\n%s"
          % indent(text))


def test_check_of_the_environment_parses_each_variable(ctx):
    d = ctx.mkdtemp("prof")
    # No LD_PRELOAD: it would profile the command itself into d.
    env = _clean_env(ctx, PROFILE_DIR=d, PROFILE_HEAP_SAMPLE="500000", PROFILE_INTERVAL="5m",
                     PROFILE_CPU_HERTZ="1000")
    r = profshim(ctx, ["check"], env=env)
    text = r.stdout_text
    check(r.rc == 1 and "active" in text and d in text, "active, with a warning for the typo:\n%s" % r.describe())
    check("LD_PRELOAD: does not name libprofshim.so" in text, "nothing preloads the shim here:\n%s" % indent(text))
    check("did you mean PROFILE_CPU_HZ?" in text, "PROFILE_CPU_HERTZ's near name:\n%s" % indent(text))
    check("524288" in text and "300 s" in text, "the parsed values (500000 -> 524288, 5m -> 300 s):\n%s"
          % indent(text))
    check(not os.listdir(d), "check must not write in PROFILE_DIR: %s" % os.listdir(d))


def test_check_reports_the_shims_own_error(ctx):
    d = os.path.join(ctx.mkdtemp("prof"), "out")
    bad = dict(PROFILE_DIR=d, PROFILE_CPU_HZ="abc", PROFILE_SNAPSHOT_KEEP="0")
    shim = ctx.run(["hello"], **bad)
    errs = shim.error_lines()
    check(shim.rc == 78 and len(errs) == 1, "the premise: the shim refuses this:\n%s" % shim.describe())
    r = profshim(ctx, ["check"], env=_clean_env(ctx, **bad))
    text = r.stdout_text
    check(r.rc == 78 and errs[0] in text, "check should exit 78 and quote the shim's line %r:\n%s" % (
        errs[0], r.describe()))
    check("PROFILE_SNAPSHOT_KEEP" in text and "from 1 to 100000" in text,
          "each variable's error, not only the first one the shim stops at:\n%s" % indent(text))
    check(not os.path.exists(d), "check must not make PROFILE_DIR")


def test_check_reads_a_units_environment(ctx):
    # systemctl show's answer, from a stand-in on PATH (no manager runs here).
    bin_dir, files = ctx.mkdtemp("fakebin"), ctx.mkdtemp("files")
    envf = os.path.join(files, "crawler.env")
    with open(envf, "w") as out:
        out.write("PROFILE_WAIT_SAMPLE=10ms\n")
    with open(os.path.join(bin_dir, "systemctl"), "w") as out:
        out.write("#!/bin/sh\n[ \"$1 $2 $3 $4\" = 'show -p Environment,EnvironmentFiles crawler' ] || exit 9\n"
                  "echo 'Environment=LD_PRELOAD=/usr/lib/libprofshim.so \"PROFILE_DIR=/var/lib/profshim/crawler\" "
                  "PROFILE_NAME=crawler'\n"
                  "echo 'EnvironmentFiles=%s (ignore_errors=no)'\n"
                  "echo 'EnvironmentFiles=/nonexistent/x.env (ignore_errors=yes)'\n" % envf)
    os.chmod(os.path.join(bin_dir, "systemctl"), 0o755)
    env = _clean_env(ctx)
    env["PATH"] = bin_dir + os.pathsep + env.get("PATH", "/usr/bin:/bin")
    r = profshim(ctx, ["check", "--unit", "crawler"], env=env)
    text = r.stdout_text
    check(r.rc == 78 and "/var/lib/profshim/crawler" in text and "PROFILE_WAIT_SAMPLE='10ms' is malformed" in text,
          "the unit's variables and its file's, the file's value refused:\n%s" % r.describe())


def test_env_file_read_as_systemd_reads_it(ctx):
    # The same file through systemd's own parser (the environment.d
    # generator's load_env_file, that of EnvironmentFile=) and check's.
    gen = next((p for p in ("/usr/lib/" + GENERATOR, "/lib/" + GENERATOR) if os.access(p, os.X_OK)), None)
    check(gen, "systemd's environment.d generator (%s) not found: install Debian's systemd" % GENERATOR)
    text = ("# comment\n; also a comment\nPROFILE_NAME=plain\n  PROFILE_CPU_HZ  =  250  \n"
            "PROFILE_INTERVAL=\"5m\"\nPROFILE_PEAK_FLOOR='1M'\nPROFILE_MEM_HZ=1\\\n0\nPROFILE_DIR=/tmp/x\n")
    conf = ctx.mkdtemp("xdg")
    os.makedirs(os.path.join(conf, "environment.d"))
    with open(os.path.join(conf, "environment.d", "t.conf"), "w") as out:
        out.write(text)
    p = subprocess.run([gen], env={"XDG_CONFIG_HOME": conf, "PATH": "/usr/bin:/bin"}, capture_output=True,
                       timeout=30)
    theirs = dict(l.split("=", 1) for l in p.stdout.decode().splitlines() if l.startswith("PROFILE_"))
    f = os.path.join(ctx.mkdtemp("envfile"), "t.env")
    shutil.copy(os.path.join(conf, "environment.d", "t.conf"), f)
    r = profshim(ctx, ["check", "--env-file", f, "--print-env"], env=_clean_env(ctx))
    mine = dict(l.split("=", 1) for l in r.stdout_text.splitlines() if l.startswith("PROFILE_"))
    check(theirs and mine == theirs, "systemd reads %s, check reads %s\n%s" % (theirs, mine, r.describe()))
