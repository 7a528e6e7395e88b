"""A Python multiprocessing pool (the fork start method, 4 workers) that
burns ~4 s of CPU in its workers, for the bench's process trees
(tree.py): prints the tree's CPU by its own clocks (os.times of the
parent and its reaped children) as `tree_cpu_s=S workers=N`, on stdout or
into the file its one argument names."""

import multiprocessing as mp
import os
import sys


def burn(n):
    x = 0
    for i in range(n):
        x = (x * 1103515245 + i) & 0xFFFFFFFF
    return x


def main():
    ctx = mp.get_context("fork")
    with ctx.Pool(4) as pool:
        pids = set(pool.map(lambda_free_pid, range(8)))
        pool.map(burn, [1500000] * 40)
        pool.close()
        pool.join()
    t = os.times()
    line = "tree_cpu_s=%.3f workers=%d\n" % (t.user + t.system + t.children_user + t.children_system, len(pids))
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as f:
            f.write(line)
    else:
        sys.stdout.write(line)


def lambda_free_pid(_):
    return os.getpid()


if __name__ == "__main__":
    main()
