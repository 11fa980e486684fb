-- Fills a kiln state database (made by `kiln project create`, so the real
-- schema with every migration) with one jobset, 200 evaluations and
-- 1,000,000 builds: 5,000 jobs per evaluation, each job's derivation
-- changing every 20 evaluations (staggered, so 5 % of the jobs change per
-- evaluation), ~4 % of builds failing (some jobs always), one output and one
-- step per distinct derivation, times over the last ~33 hours. Used by
-- bench/web_bench.sh; run with `sqlite3 DB < bench/web_fill.sql`.
PRAGMA journal_mode = WAL;
PRAGMA synchronous = OFF;
PRAGMA cache_size = -262144;
BEGIN;
INSERT INTO projects (name, description) VALUES ('bench', 'web benchmark');
INSERT INTO jobsets (project, name, kind, location, check_interval, enabled)
  SELECT id, 'main', 'path', '/nonexistent', 0, 0 FROM projects
  WHERE name = 'bench';
CREATE TEMP TABLE params AS SELECT
  (SELECT id FROM jobsets WHERE name = 'main' AND project =
     (SELECT id FROM projects WHERE name = 'bench')) AS jobset,
  CAST(strftime('%s', 'now') AS INTEGER) * 1000 - 200 * 600000 AS t0,
  COALESCE((SELECT MAX(id) FROM evaluations), 0) AS e0;
WITH RECURSIVE e(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM e WHERE i < 200)
INSERT INTO evaluations (id, jobset, inputs_hash, time, duration, jobs)
  SELECT p.e0 + i, p.jobset, printf('inputs-%d', i), p.t0 + i * 600000,
         45000, 5000
  FROM e, params p;
-- Job j of evaluation i builds version (i + j % 20) / 20 of its derivation.
CREATE TEMP TABLE cells AS
  WITH RECURSIVE
    e(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM e WHERE i < 200),
    j(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM j WHERE n < 4999)
  SELECT e.i AS i, j.n AS n, (e.i + j.n % 20) / 20 AS v FROM e, j;
INSERT INTO builds (eval, jobset, job, nix_name, system, drv_path, finished,
                    status, global_priority, created, stop_time)
  SELECT p.e0 + c.i, p.jobset, printf('pkgs.job%04d', c.n),
         printf('job%04d-%d', c.n, c.v),
         CASE WHEN c.n % 4 = 3 THEN 'aarch64-linux' ELSE 'x86_64-linux' END,
         printf('/nix/store/%032d-job%04d-%d.drv', c.n * 1000 + c.v, c.n, c.v),
         1,
         CASE WHEN c.n % 97 = 0 THEN 1
              WHEN (c.n * 7 + c.v) % 41 = 0 THEN 1
              WHEN (c.n * 7 + c.v) % 43 = 0 THEN 2
              ELSE 0 END,
         0, p.t0 + c.i * 600000, p.t0 + c.i * 600000 + 60000 + (c.n % 500) * 1000
  FROM cells c, params p ORDER BY c.i, c.n;
INSERT INTO build_outputs (build, name, path)
  SELECT id, 'out', substr(drv_path, 1, length(drv_path) - 4) FROM builds
  WHERE jobset = (SELECT jobset FROM params);
INSERT OR IGNORE INTO steps (drv_path, system, pname, finished, status,
                             attempts, worker, created, start_time, stop_time)
  SELECT drv_path, system, nix_name, 1, status, 1,
         printf('worker-%d', id % 8), created, created + 1000, stop_time
  FROM builds WHERE jobset = (SELECT jobset FROM params) GROUP BY drv_path;
COMMIT;
ANALYZE;
