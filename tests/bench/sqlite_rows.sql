-- The allocation-heavy sqlite3 workload of tests/bench/bench.py: an in-memory
-- table of 2 million rows with two indexes, then a few aggregate queries.
-- About 14 million calls to malloc/realloc/free (heaptrack counts them).
-- Deterministic: no random(). Run as: sqlite3 :memory: < sqlite_rows.sql
CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, v INTEGER, w REAL);
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 2000000)
INSERT INTO t SELECT x, printf('name-%d-%08x', x, (x * 2654435761) % 4294967296),
                     (x * 40503) % 100003, x / 7.0 FROM c;
CREATE INDEX t_name ON t(name);
CREATE INDEX t_v ON t(v);
SELECT count(*), sum(v), count(DISTINCT v) FROM t;
SELECT v, count(*) FROM t GROUP BY v ORDER BY 2 DESC, 1 LIMIT 3;
