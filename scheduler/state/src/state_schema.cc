// The state database's schema: each migration's SQL, in order
// (docs/scheduler.md). StateDb applies them with migrateSchema.
#include "state_rows.h"

namespace kiln::scheduler::detail {
namespace {

// Migration 1: the Hydra-like data model. Times are Unix milliseconds.
const char* kSchemaV1 = R"SQL(
CREATE TABLE projects (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL UNIQUE,
  description TEXT NOT NULL DEFAULT '',
  enabled INTEGER NOT NULL DEFAULT 1
);
CREATE TABLE jobsets (
  id INTEGER PRIMARY KEY,
  project INTEGER NOT NULL REFERENCES projects(id),
  name TEXT NOT NULL,
  kind TEXT NOT NULL CHECK (kind IN ('path', 'git')),
  location TEXT NOT NULL,
  branch TEXT NOT NULL DEFAULT '',
  file TEXT NOT NULL DEFAULT 'default.nix',
  attribute TEXT NOT NULL DEFAULT '',
  arguments TEXT NOT NULL DEFAULT '{}',
  check_interval INTEGER NOT NULL DEFAULT 300,
  shares INTEGER NOT NULL DEFAULT 100 CHECK (shares >= 1),
  enabled INTEGER NOT NULL DEFAULT 1,
  last_checked INTEGER NOT NULL DEFAULT 0,
  last_inputs TEXT NOT NULL DEFAULT '',
  UNIQUE (project, name)
);
CREATE TABLE evaluations (
  id INTEGER PRIMARY KEY,
  jobset INTEGER NOT NULL REFERENCES jobsets(id),
  inputs_hash TEXT NOT NULL,
  time INTEGER NOT NULL,
  duration INTEGER NOT NULL DEFAULT 0,
  jobs INTEGER NOT NULL DEFAULT 0,
  error TEXT NOT NULL DEFAULT ''
);
CREATE TABLE eval_errors (
  eval INTEGER NOT NULL REFERENCES evaluations(id),
  attr TEXT NOT NULL,
  error TEXT NOT NULL
);
CREATE TABLE builds (
  id INTEGER PRIMARY KEY,
  eval INTEGER NOT NULL REFERENCES evaluations(id),
  jobset INTEGER NOT NULL REFERENCES jobsets(id),
  job TEXT NOT NULL,
  nix_name TEXT NOT NULL DEFAULT '',
  system TEXT NOT NULL DEFAULT '',
  drv_path TEXT NOT NULL,
  finished INTEGER NOT NULL DEFAULT 0,
  status INTEGER,
  global_priority INTEGER NOT NULL DEFAULT 0,
  local_priority INTEGER NOT NULL DEFAULT 0,
  created INTEGER NOT NULL,
  stop_time INTEGER NOT NULL DEFAULT 0,
  error TEXT NOT NULL DEFAULT '',
  reused_from INTEGER NOT NULL DEFAULT 0,
  UNIQUE (eval, job)
);
CREATE INDEX builds_unfinished ON builds(finished) WHERE finished = 0;
CREATE INDEX builds_drv ON builds(drv_path);
CREATE TABLE build_outputs (
  build INTEGER NOT NULL REFERENCES builds(id),
  name TEXT NOT NULL,
  path TEXT NOT NULL,
  PRIMARY KEY (build, name)
);
CREATE TABLE steps (
  id INTEGER PRIMARY KEY,
  drv_path TEXT NOT NULL UNIQUE,
  system TEXT NOT NULL,
  pname TEXT NOT NULL DEFAULT '',
  features TEXT NOT NULL DEFAULT '',
  finished INTEGER NOT NULL DEFAULT 0,
  status INTEGER,
  error TEXT NOT NULL DEFAULT '',
  attempts INTEGER NOT NULL DEFAULT 0,
  worker TEXT NOT NULL DEFAULT '',
  created INTEGER NOT NULL,
  start_time INTEGER NOT NULL DEFAULT 0,
  stop_time INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX steps_unfinished ON steps(finished) WHERE finished = 0;
CREATE TABLE step_deps (
  step INTEGER NOT NULL REFERENCES steps(id),
  dep INTEGER NOT NULL REFERENCES steps(id),
  PRIMARY KEY (step, dep)
);
CREATE TABLE cached_failures (
  drv_path TEXT PRIMARY KEY,
  status INTEGER NOT NULL,
  time INTEGER NOT NULL,
  expires INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE requests (
  id INTEGER PRIMARY KEY,
  kind TEXT NOT NULL,
  args TEXT NOT NULL DEFAULT '{}',
  done INTEGER NOT NULL DEFAULT 0,
  ok INTEGER NOT NULL DEFAULT 0,
  result TEXT NOT NULL DEFAULT ''
);
CREATE INDEX requests_pending ON requests(done) WHERE done = 0;
)SQL";

// Migration 2: per-build limits from the job's meta.maxSilent and
// meta.timeout (seconds); the step gets those of its owner build.
const char* kSchemaV2 = R"SQL(
ALTER TABLE builds ADD COLUMN max_silent INTEGER NOT NULL DEFAULT 3600;
ALTER TABLE builds ADD COLUMN timeout INTEGER NOT NULL DEFAULT 36000;
)SQL";

// Migration 3: the notification outbox (notification_store.h). One row per
// event and notifier, written in the transaction of the state change it
// reports; the delivery thread marks it delivered (Unix ms, 0 = pending).
const char* kSchemaV3 = R"SQL(
CREATE TABLE notifications (
  id INTEGER PRIMARY KEY,
  target TEXT NOT NULL,
  ordering_key TEXT NOT NULL,
  event TEXT NOT NULL,
  payload TEXT NOT NULL,
  created INTEGER NOT NULL,
  attempts INTEGER NOT NULL DEFAULT 0,
  next_attempt INTEGER NOT NULL DEFAULT 0,
  last_error TEXT NOT NULL DEFAULT '',
  delivered INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX notifications_pending ON notifications(id) WHERE delivered = 0;
)SQL";

// Migration 4: each jobset chooses its evaluator (jobset.h); existing
// jobsets keep kiln's own.
const char* kSchemaV4 = R"SQL(
ALTER TABLE jobsets ADD COLUMN evaluator TEXT NOT NULL DEFAULT 'builtin'
  CHECK (evaluator IN ('builtin', 'nix'));
)SQL";

// Migration 5: indexes for the read model (state_view.h, the web): every
// page query walks one of these and stops at its LIMIT, so a page costs
// the same with 1,000,000 builds as with 100.
const char* kSchemaV5 = R"SQL(
CREATE INDEX evaluations_jobset ON evaluations(jobset, id);
CREATE INDEX eval_errors_eval ON eval_errors(eval, attr);
CREATE INDEX builds_eval_status ON builds(eval, finished, status, id);
CREATE INDEX builds_job ON builds(job, jobset, id);
CREATE INDEX builds_stop ON builds(stop_time) WHERE finished = 1;
CREATE INDEX build_outputs_path ON build_outputs(path);
)SQL";

// Migration 6: API tokens (tokens.h): a salted SHA-256 of each secret,
// found by its public key id; revoked ones are kept for the listing.
const char* kSchemaV6 = R"SQL(
CREATE TABLE api_tokens (
  id INTEGER PRIMARY KEY,
  key_id TEXT NOT NULL UNIQUE,
  name TEXT NOT NULL DEFAULT '',
  scope TEXT NOT NULL CHECK (scope IN ('read', 'operate', 'admin')),
  salt TEXT NOT NULL,
  hash TEXT NOT NULL,
  created INTEGER NOT NULL,
  revoked INTEGER NOT NULL DEFAULT 0
);
)SQL";

// Migration 7: a jobset's evaluator is any evaluator plugin's name (the
// scheduler checks it against the loaded ones): migration 4's CHECK goes.
// SQLite cannot drop a constraint, so the table is rebuilt with every row
// and id, in the migration's transaction. Foreign keys are deferred to the
// commit: dropping the table orphans the evaluations' and builds' rows,
// re-inserting the same ids adopts them again, and the commit fails if one
// were left behind.
const char* kSchemaV7 = R"SQL(
PRAGMA defer_foreign_keys = ON;
CREATE TEMP TABLE jobsets_before_v7 AS SELECT * FROM main.jobsets;
DROP TABLE main.jobsets;
CREATE TABLE main.jobsets (
  id INTEGER PRIMARY KEY,
  project INTEGER NOT NULL REFERENCES projects(id),
  name TEXT NOT NULL,
  kind TEXT NOT NULL CHECK (kind IN ('path', 'git')),
  location TEXT NOT NULL,
  branch TEXT NOT NULL DEFAULT '',
  file TEXT NOT NULL DEFAULT 'default.nix',
  attribute TEXT NOT NULL DEFAULT '',
  arguments TEXT NOT NULL DEFAULT '{}',
  check_interval INTEGER NOT NULL DEFAULT 300,
  shares INTEGER NOT NULL DEFAULT 100 CHECK (shares >= 1),
  enabled INTEGER NOT NULL DEFAULT 1,
  last_checked INTEGER NOT NULL DEFAULT 0,
  last_inputs TEXT NOT NULL DEFAULT '',
  evaluator TEXT NOT NULL DEFAULT 'builtin',
  UNIQUE (project, name)
);
INSERT INTO main.jobsets (id, project, name, kind, location, branch, file,
  attribute, arguments, check_interval, shares, enabled, last_checked,
  last_inputs, evaluator)
SELECT id, project, name, kind, location, branch, file, attribute, arguments,
  check_interval, shares, enabled, last_checked, last_inputs, evaluator
FROM temp.jobsets_before_v7;
DROP TABLE temp.jobsets_before_v7;
)SQL";

// Migration 8 (the web's): an evaluation's build counts kept up to date by
// triggers, so the overview and the jobset page read them in O(1) instead
// of counting 5,000 builds per evaluation; the failure-rate index covers
// the status too.
const char* kSchemaV8 = R"SQL(
DROP INDEX builds_stop;
CREATE INDEX builds_stop ON builds(stop_time, status) WHERE finished = 1;
CREATE TABLE eval_counts (
  eval INTEGER PRIMARY KEY REFERENCES evaluations(id),
  builds INTEGER NOT NULL DEFAULT 0,
  finished INTEGER NOT NULL DEFAULT 0,
  succeeded INTEGER NOT NULL DEFAULT 0
);
INSERT INTO eval_counts (eval, builds, finished, succeeded)
  SELECT eval, count(*), sum(finished), sum(coalesce(finished AND status = 0, 0))
  FROM builds GROUP BY eval;
CREATE TRIGGER builds_count_insert AFTER INSERT ON builds BEGIN
  INSERT OR IGNORE INTO eval_counts (eval) VALUES (NEW.eval);
  UPDATE eval_counts SET builds = builds + 1, finished = finished + NEW.finished,
    succeeded = succeeded + coalesce(NEW.finished AND NEW.status = 0, 0)
  WHERE eval = NEW.eval;
END;
CREATE TRIGGER builds_count_update AFTER UPDATE OF finished, status ON builds
BEGIN
  UPDATE eval_counts SET finished = finished - OLD.finished + NEW.finished,
    succeeded = succeeded - coalesce(OLD.finished AND OLD.status = 0, 0)
                + coalesce(NEW.finished AND NEW.status = 0, 0)
  WHERE eval = NEW.eval;
END;
CREATE TRIGGER builds_count_delete AFTER DELETE ON builds BEGIN
  UPDATE eval_counts SET builds = builds - 1, finished = finished - OLD.finished,
    succeeded = succeeded - coalesce(OLD.finished AND OLD.status = 0, 0)
  WHERE eval = OLD.eval;
END;
)SQL";

// PostgreSQL's schema, created whole at version 8 (the version the SQLite
// migrations above reach; later versions add a step for each backend).
// The same tables, columns and indexes; ids are identity columns (so
// `kiln db copy` can keep them and move the sequences past them); text
// that pages sort or search by range is compared byte-wise (COLLATE "C")
// as SQLite does; eval_counts is kept by one trigger function.
const char* kPostgresV8 = R"SQL(
CREATE TABLE projects (
  id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
  name TEXT COLLATE "C" NOT NULL UNIQUE,
  description TEXT NOT NULL DEFAULT '',
  enabled BIGINT NOT NULL DEFAULT 1
);
CREATE TABLE jobsets (
  id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
  project BIGINT NOT NULL REFERENCES projects(id),
  name TEXT COLLATE "C" NOT NULL,
  kind TEXT NOT NULL CHECK (kind IN ('path', 'git')),
  location TEXT NOT NULL,
  branch TEXT NOT NULL DEFAULT '',
  file TEXT NOT NULL DEFAULT 'default.nix',
  attribute TEXT NOT NULL DEFAULT '',
  arguments TEXT NOT NULL DEFAULT '{}',
  check_interval BIGINT NOT NULL DEFAULT 300,
  shares BIGINT NOT NULL DEFAULT 100 CHECK (shares >= 1),
  enabled BIGINT NOT NULL DEFAULT 1,
  last_checked BIGINT NOT NULL DEFAULT 0,
  last_inputs TEXT NOT NULL DEFAULT '',
  evaluator TEXT NOT NULL DEFAULT 'builtin',
  UNIQUE (project, name)
);
CREATE TABLE evaluations (
  id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
  jobset BIGINT NOT NULL REFERENCES jobsets(id),
  inputs_hash TEXT NOT NULL,
  time BIGINT NOT NULL,
  duration BIGINT NOT NULL DEFAULT 0,
  jobs BIGINT NOT NULL DEFAULT 0,
  error TEXT NOT NULL DEFAULT ''
);
CREATE TABLE eval_errors (
  eval BIGINT NOT NULL REFERENCES evaluations(id),
  attr TEXT COLLATE "C" NOT NULL,
  error TEXT NOT NULL
);
CREATE TABLE builds (
  id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
  eval BIGINT NOT NULL REFERENCES evaluations(id),
  jobset BIGINT NOT NULL REFERENCES jobsets(id),
  job TEXT COLLATE "C" NOT NULL,
  nix_name TEXT NOT NULL DEFAULT '',
  system TEXT COLLATE "C" NOT NULL DEFAULT '',
  drv_path TEXT COLLATE "C" NOT NULL,
  finished BIGINT NOT NULL DEFAULT 0,
  status BIGINT,
  global_priority BIGINT NOT NULL DEFAULT 0,
  local_priority BIGINT NOT NULL DEFAULT 0,
  created BIGINT NOT NULL,
  stop_time BIGINT NOT NULL DEFAULT 0,
  error TEXT NOT NULL DEFAULT '',
  reused_from BIGINT NOT NULL DEFAULT 0,
  max_silent BIGINT NOT NULL DEFAULT 3600,
  timeout BIGINT NOT NULL DEFAULT 36000,
  UNIQUE (eval, job)
);
CREATE INDEX builds_unfinished ON builds(finished) WHERE finished = 0;
CREATE INDEX builds_drv ON builds(drv_path);
CREATE INDEX builds_eval_status ON builds(eval, finished, status, id);
CREATE INDEX builds_job ON builds(job, jobset, id);
CREATE INDEX builds_stop ON builds(stop_time, status) WHERE finished = 1;
CREATE TABLE build_outputs (
  build BIGINT NOT NULL REFERENCES builds(id),
  name TEXT COLLATE "C" NOT NULL,
  path TEXT COLLATE "C" NOT NULL,
  PRIMARY KEY (build, name)
);
CREATE INDEX build_outputs_path ON build_outputs(path);
CREATE TABLE steps (
  id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
  drv_path TEXT COLLATE "C" NOT NULL UNIQUE,
  system TEXT NOT NULL,
  pname TEXT COLLATE "C" NOT NULL DEFAULT '',
  features TEXT NOT NULL DEFAULT '',
  finished BIGINT NOT NULL DEFAULT 0,
  status BIGINT,
  error TEXT NOT NULL DEFAULT '',
  attempts BIGINT NOT NULL DEFAULT 0,
  worker TEXT NOT NULL DEFAULT '',
  created BIGINT NOT NULL,
  start_time BIGINT NOT NULL DEFAULT 0,
  stop_time BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX steps_unfinished ON steps(finished) WHERE finished = 0;
CREATE TABLE step_deps (
  step BIGINT NOT NULL REFERENCES steps(id),
  dep BIGINT NOT NULL REFERENCES steps(id),
  PRIMARY KEY (step, dep)
);
CREATE TABLE cached_failures (
  drv_path TEXT COLLATE "C" PRIMARY KEY,
  status BIGINT NOT NULL,
  time BIGINT NOT NULL,
  expires BIGINT NOT NULL DEFAULT 0
);
CREATE TABLE requests (
  id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
  kind TEXT NOT NULL,
  args TEXT NOT NULL DEFAULT '{}',
  done BIGINT NOT NULL DEFAULT 0,
  ok BIGINT NOT NULL DEFAULT 0,
  result TEXT NOT NULL DEFAULT ''
);
CREATE INDEX requests_pending ON requests(done) WHERE done = 0;
CREATE TABLE notifications (
  id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
  target TEXT COLLATE "C" NOT NULL,
  ordering_key TEXT NOT NULL,
  event TEXT NOT NULL,
  payload TEXT NOT NULL,
  created BIGINT NOT NULL,
  attempts BIGINT NOT NULL DEFAULT 0,
  next_attempt BIGINT NOT NULL DEFAULT 0,
  last_error TEXT NOT NULL DEFAULT '',
  delivered BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX notifications_pending ON notifications(id) WHERE delivered = 0;
CREATE INDEX evaluations_jobset ON evaluations(jobset, id);
CREATE INDEX eval_errors_eval ON eval_errors(eval, attr);
CREATE TABLE api_tokens (
  id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
  key_id TEXT NOT NULL UNIQUE,
  name TEXT NOT NULL DEFAULT '',
  scope TEXT NOT NULL CHECK (scope IN ('read', 'operate', 'admin')),
  salt TEXT NOT NULL,
  hash TEXT NOT NULL,
  created BIGINT NOT NULL,
  revoked BIGINT NOT NULL DEFAULT 0
);
CREATE TABLE eval_counts (
  eval BIGINT PRIMARY KEY REFERENCES evaluations(id),
  builds BIGINT NOT NULL DEFAULT 0,
  finished BIGINT NOT NULL DEFAULT 0,
  succeeded BIGINT NOT NULL DEFAULT 0
);
CREATE FUNCTION kiln_eval_counts() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'UPDATE' AND OLD.eval = NEW.eval THEN
    UPDATE eval_counts SET finished = finished - OLD.finished + NEW.finished,
        succeeded = succeeded
          - (CASE WHEN OLD.finished = 1 AND OLD.status = 0 THEN 1 ELSE 0 END)
          + (CASE WHEN NEW.finished = 1 AND NEW.status = 0 THEN 1 ELSE 0 END)
      WHERE eval = NEW.eval;
    RETURN NULL;
  END IF;
  IF TG_OP <> 'INSERT' THEN
    UPDATE eval_counts SET builds = builds - 1, finished = finished -
        OLD.finished, succeeded = succeeded -
        (CASE WHEN OLD.finished = 1 AND OLD.status = 0 THEN 1 ELSE 0 END)
      WHERE eval = OLD.eval;
  END IF;
  IF TG_OP <> 'DELETE' THEN
    INSERT INTO eval_counts (eval) VALUES (NEW.eval) ON CONFLICT DO NOTHING;
    UPDATE eval_counts SET builds = builds + 1, finished = finished +
        NEW.finished, succeeded = succeeded +
        (CASE WHEN NEW.finished = 1 AND NEW.status = 0 THEN 1 ELSE 0 END)
      WHERE eval = NEW.eval;
  END IF;
  RETURN NULL;
END $$;
CREATE TRIGGER builds_count AFTER INSERT OR DELETE OR UPDATE OF finished,
  status, eval ON builds FOR EACH ROW EXECUTE FUNCTION kiln_eval_counts();
)SQL";

// Migration 9, both backends: the running scheduler's snapshot, for web
// front ends on other hosts (snapshot_store.h). One row.
const char* kSchemaV9 = R"SQL(
CREATE TABLE scheduler_snapshot (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  taken BIGINT NOT NULL,
  body TEXT NOT NULL
);
)SQL";

// Migration 10, PostgreSQL: builds inserted are counted into eval_counts
// once per INSERT statement (a statement-level trigger over the inserted
// rows) instead of once per row. An evaluation's builds are inserted in
// one transaction, and each row-level count updated the same eval_counts
// row again: PostgreSQL keeps every version of it until the commit, and
// each update walked the chain of those before it, so recording an
// evaluation of n jobs took O(n^2) (50,000 jobs: 34 s against SQLite's
// 2.9 s; 30,000 rows inserted by psql took 9.2 s with that trigger and
// 0.3 s without; bench/README.md "PostgreSQL"). With StateDb::createBuilds'
// multi-row INSERTs the row is updated once per statement. Updates and
// deletes stay counted per row (each is its own statement anyway).
const char* kPostgresV10 = R"SQL(
CREATE FUNCTION kiln_eval_counts_inserted() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO eval_counts AS c (eval, builds, finished, succeeded)
    SELECT eval, count(*), sum(finished),
           sum(CASE WHEN finished = 1 AND status = 0 THEN 1 ELSE 0 END)
    FROM inserted_builds GROUP BY eval
  ON CONFLICT (eval) DO UPDATE SET builds = c.builds + excluded.builds,
    finished = c.finished + excluded.finished,
    succeeded = c.succeeded + excluded.succeeded;
  RETURN NULL;
END $$;
DROP TRIGGER builds_count ON builds;
CREATE TRIGGER builds_count AFTER DELETE OR UPDATE OF finished, status, eval
  ON builds FOR EACH ROW EXECUTE FUNCTION kiln_eval_counts();
CREATE TRIGGER builds_count_inserted AFTER INSERT ON builds
  REFERENCING NEW TABLE AS inserted_builds
  FOR EACH STATEMENT EXECUTE FUNCTION kiln_eval_counts_inserted();
)SQL";

// Migration 10, SQLite: nothing (its row-level triggers update in place).
const char* kSqliteV10 =
    "-- eval_counts' insert trigger changed on PostgreSQL only";

// Migration 11: evaluations run by `kiln evaluator` hosts (eval_queue.h).
// A claim says which evaluator evaluates a jobset (until its lease ends);
// a result is what it produced, as zstd-compressed base64 chunks, until the
// scheduler records it.
#define KILN_EVAL_QUEUE_TABLES(ID)          \
  "CREATE TABLE eval_claims (\n"            \
  "  jobset BIGINT PRIMARY KEY,\n"          \
  "  evaluator TEXT NOT NULL,\n"            \
  "  request BIGINT,\n"                     \
  "  force BIGINT NOT NULL DEFAULT 0,\n"    \
  "  claimed BIGINT NOT NULL,\n"            \
  "  lease_until BIGINT NOT NULL\n"         \
  ");\n"                                    \
  "CREATE TABLE eval_results (\n"           \
  "  id " ID ",\n"                          \
  "  jobset BIGINT NOT NULL,\n"             \
  "  request BIGINT,\n"                     \
  "  evaluator TEXT NOT NULL,\n"            \
  "  created BIGINT NOT NULL,\n"            \
  "  chunks BIGINT NOT NULL DEFAULT 0,\n"   \
  "  bytes BIGINT NOT NULL DEFAULT 0\n"     \
  ");\n"                                    \
  "CREATE TABLE eval_result_chunks (\n"     \
  "  result BIGINT NOT NULL,\n"             \
  "  seq BIGINT NOT NULL,\n"                \
  "  data TEXT NOT NULL,\n"                 \
  "  PRIMARY KEY (result, seq)\n"           \
  ");\n"
const char* kSqliteV11 = KILN_EVAL_QUEUE_TABLES("INTEGER PRIMARY KEY");
const char* kPostgresV11 = KILN_EVAL_QUEUE_TABLES(
    "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY");
#undef KILN_EVAL_QUEUE_TABLES

// Migration 12, both backends (the same tables; only the types' spelling
// differs): build logs in the database, so that web front ends on other
// hosts serve them (log_store.h). While an attempt runs, its log arrives
// in pieces (step_log_chunks, `pos` its byte offset); when it ends, the
// whole log goes into one zstd-compressed row of step_logs (`size` the
// uncompressed bytes) and its pieces are deleted. The scheduler writes
// them only on PostgreSQL; SQLite has the tables so that `kiln db copy`
// keeps them both ways.
// PostgreSQL stores the compressed body EXTERNAL (out of line, not
// compressed again): readers fetch it in slices with substr(), which then
// reads only the slice's TOAST chunks.
// clang-format off
#define KILN_STEP_LOG_TABLES(INT, BYTES, BODY_STORAGE)    \
  "CREATE TABLE step_logs (\n"                             \
  "  step " INT " NOT NULL REFERENCES steps(id),\n"        \
  "  attempt " INT " NOT NULL,\n"                          \
  "  size " INT " NOT NULL,\n"                             \
  "  body " BYTES " NOT NULL,\n"                           \
  "  PRIMARY KEY (step, attempt)\n"                        \
  ");\n" BODY_STORAGE                                      \
  "CREATE TABLE step_log_chunks (\n"                       \
  "  step " INT " NOT NULL REFERENCES steps(id),\n"        \
  "  attempt " INT " NOT NULL,\n"                          \
  "  pos " INT " NOT NULL,\n"                              \
  "  data " BYTES " NOT NULL,\n"                           \
  "  PRIMARY KEY (step, attempt, pos)\n"                   \
  ");\n"
// clang-format on
const char* kSqliteV12 = KILN_STEP_LOG_TABLES("INTEGER", "BLOB", "");
const char* kPostgresV12 = KILN_STEP_LOG_TABLES(
    "BIGINT", "BYTEA",
    "ALTER TABLE step_logs ALTER COLUMN body SET STORAGE EXTERNAL;\n");
#undef KILN_STEP_LOG_TABLES

// Migration 13, both backends: what each step's last attempt used, as
// its worker measured it (docs/worker.md, "Limits per build"); 0 when
// not measured.
#define KILN_STEP_USAGE_COLUMNS(INT)              \
  "ALTER TABLE steps ADD COLUMN peak_memory " INT \
  " NOT NULL DEFAULT 0;\n"                        \
  "ALTER TABLE steps ADD COLUMN cpu_time_us " INT \
  " NOT NULL DEFAULT 0;\n"                        \
  "ALTER TABLE steps ADD COLUMN build_dir_bytes " INT " NOT NULL DEFAULT 0;\n"
const char* kSqliteV13 = KILN_STEP_USAGE_COLUMNS("INTEGER");
const char* kPostgresV13 = KILN_STEP_USAGE_COLUMNS("BIGINT");

// Migration 14, both backends: named pins of the binary cache's garbage
// collection (cache_roots.h); each protects a store path's closure.
#define KILN_CACHE_PIN_TABLE(INT)              \
  "CREATE TABLE cache_pins (\n"                \
  "  name TEXT PRIMARY KEY,\n"                 \
  "  path TEXT NOT NULL,\n"                    \
  "  created " INT " NOT NULL\n"               \
  ");\n"
const char* kSqliteV14 = KILN_CACHE_PIN_TABLE("INTEGER");
const char* kPostgresV14 = KILN_CACHE_PIN_TABLE("BIGINT");
#undef KILN_CACHE_PIN_TABLE

// Migration 15, both backends: release engineering (docs/release.md).
// Which builds an aggregate build's constituents are; the job whose
// success advances each jobset's channel, the channel's advances, the
// store path of each evaluation's sources (nixexprs.tar.xz), and the
// regression gates: per-jobset limits (percent; 0 = none) and the jobs
// that broke them in an evaluation, which held the channel.
// clang-format off
#define KILN_RELEASE_TABLES(ID, INT)                                   \
  "CREATE TABLE aggregate_constituents (\n"                            \
  "  aggregate " INT " NOT NULL REFERENCES builds(id),\n"              \
  "  constituent " INT " NOT NULL REFERENCES builds(id),\n"            \
  "  PRIMARY KEY (aggregate, constituent)\n"                           \
  ");\n"                                                               \
  "ALTER TABLE jobsets ADD COLUMN channel_job TEXT NOT NULL "          \
  "DEFAULT 'tested';\n"                                                \
  "CREATE TABLE channel_advances (\n"                                  \
  "  id " ID ",\n"                                                     \
  "  jobset " INT " NOT NULL REFERENCES jobsets(id),\n"                \
  "  eval " INT " NOT NULL REFERENCES evaluations(id),\n"              \
  "  build " INT " NOT NULL REFERENCES builds(id),\n"                  \
  "  time " INT " NOT NULL\n"                                          \
  ");\n"                                                               \
  "CREATE INDEX channel_advances_jobset ON channel_advances "          \
  "(jobset, id);\n"                                                    \
  "CREATE TABLE eval_sources (\n"                                      \
  "  eval " INT " PRIMARY KEY REFERENCES evaluations(id),\n"           \
  "  path TEXT NOT NULL\n"                                             \
  ");\n"                                                               \
  "ALTER TABLE jobsets ADD COLUMN max_closure_growth " INT             \
  " NOT NULL DEFAULT 0;\n"                                             \
  "ALTER TABLE jobsets ADD COLUMN max_build_time_growth " INT          \
  " NOT NULL DEFAULT 0;\n"                                             \
  "CREATE TABLE eval_regressions (\n"                                  \
  "  eval " INT " NOT NULL REFERENCES evaluations(id),\n"              \
  "  job TEXT NOT NULL,\n"                                             \
  "  kind TEXT NOT NULL,\n"                                            \
  "  base_eval " INT " NOT NULL,\n"                                    \
  "  before_value " INT " NOT NULL,\n"                                 \
  "  after_value " INT " NOT NULL,\n"                                  \
  "  PRIMARY KEY (eval, job, kind)\n"                                  \
  ");\n"
// clang-format on
const char* kSqliteV15 = KILN_RELEASE_TABLES("INTEGER PRIMARY KEY", "INTEGER");
const char* kPostgresV15 = KILN_RELEASE_TABLES(
    "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY", "BIGINT");
#undef KILN_RELEASE_TABLES
// Migration 16, both backends: continuous integration through the forges
// (forge_store.h, docs/ci.md). A project's webhook secret file; the
// delivery ids already received (a replay is ignored); the jobsets the
// forges drive: a followed branch (number 0) or a pull request (its
// number, head commit, the jobset of its base branch, and when it was
// closed; 0 while open).
// clang-format off
#define KILN_FORGE_TABLES(INT)                                    \
  "CREATE TABLE forge_webhooks (\n"                               \
  "  project " INT " PRIMARY KEY REFERENCES projects(id),\n"      \
  "  secret_file TEXT NOT NULL\n"                                 \
  ");\n"                                                          \
  "CREATE TABLE forge_deliveries (\n"                             \
  "  forge TEXT NOT NULL,\n"                                      \
  "  delivery TEXT NOT NULL,\n"                                   \
  "  received " INT " NOT NULL,\n"                                \
  "  PRIMARY KEY (forge, delivery)\n"                             \
  ");\n"                                                          \
  "CREATE TABLE forge_jobsets (\n"                                \
  "  jobset " INT " PRIMARY KEY REFERENCES jobsets(id),\n"        \
  "  forge TEXT NOT NULL,\n"                                      \
  "  repo TEXT NOT NULL,\n"                                       \
  "  number " INT " NOT NULL DEFAULT 0,\n"                        \
  "  base_jobset " INT " NOT NULL DEFAULT 0,\n"                   \
  "  head TEXT NOT NULL DEFAULT '',\n"                            \
  "  closed " INT " NOT NULL DEFAULT 0,\n"                        \
  "  swept " INT " NOT NULL DEFAULT 0\n"                          \
  ");\n"
// clang-format on
const char* kSqliteV16 = KILN_FORGE_TABLES("INTEGER");
const char* kPostgresV16 = KILN_FORGE_TABLES("BIGINT");
#undef KILN_FORGE_TABLES

// Migration 17, both backends: reproducibility checks (docs/release.md,
// "Reproducibility checks"). Each jobset's share of successful steps that
// are built again (parts per million; 0 = none), and one row per step
// checked: where each build ran, its state (pending, running, same,
// differs, failed), the outputs whose NAR hashes differ, the second
// build's NARs' side location, and the diffoscope report. With them, the
// expected finish recorded for each evaluation when its builds were made
// (docs/scheduler.md, "Expected finish").
// clang-format off
#define KILN_REPEAT_TABLES(INT)                                        \
  "ALTER TABLE jobsets ADD COLUMN repeat_ppm " INT                     \
  " NOT NULL DEFAULT 0;\n"                                             \
  "CREATE TABLE repeat_checks (\n"                                     \
  "  step " INT " PRIMARY KEY REFERENCES steps(id),\n"                 \
  "  jobset " INT " NOT NULL REFERENCES jobsets(id),\n"                \
  "  state TEXT NOT NULL CHECK (state IN ('pending', 'running', "      \
  "'same', 'differs', 'failed')),\n"                                  \
  "  first_worker TEXT NOT NULL,\n"                                    \
  "  second_worker TEXT NOT NULL DEFAULT '',\n"                        \
  "  differing TEXT NOT NULL DEFAULT '',\n"                            \
  "  side_location TEXT NOT NULL DEFAULT '',\n"                        \
  "  report TEXT NOT NULL DEFAULT '',\n"                               \
  "  created " INT " NOT NULL,\n"                                      \
  "  finished " INT " NOT NULL DEFAULT 0\n"                            \
  ");\n"                                                               \
  "CREATE INDEX repeat_checks_jobset ON repeat_checks (jobset, state);\n" \
  "CREATE TABLE eval_estimates (\n"                                    \
  "  eval " INT " PRIMARY KEY REFERENCES evaluations(id),\n"           \
  "  made " INT " NOT NULL,\n"                                         \
  "  estimated " INT " NOT NULL\n"                                     \
  ");\n"
// clang-format on
const char* kSqliteV17 = KILN_REPEAT_TABLES("INTEGER");
const char* kPostgresV17 = KILN_REPEAT_TABLES("BIGINT");
#undef KILN_REPEAT_TABLES

// Migration 18 (both backends): the workers that refused a check's second
// build (they hold its outputs), one name a line, so that a check still
// avoids them after a restart.
const char* kSchemaV18 =
    "ALTER TABLE repeat_checks ADD COLUMN refused_by TEXT NOT NULL DEFAULT "
    "'';\n";

}  // namespace

const char* postgresBaseline() { return kPostgresV8; }

const std::vector<PostgresMigration>& postgresMigrations() {
  static const std::vector<PostgresMigration> m = {
      {9, kSchemaV9},     {10, kPostgresV10}, {11, kPostgresV11},
      {12, kPostgresV12}, {13, kPostgresV13}, {14, kPostgresV14},
      {15, kPostgresV15}, {16, kPostgresV16}, {17, kPostgresV17},
      {18, kSchemaV18}};
  return m;
}

const std::vector<SqliteMigration>& stateMigrations() {
  static const std::vector<SqliteMigration> m = {
      {1, kSchemaV1},   {2, kSchemaV2},   {3, kSchemaV3},   {4, kSchemaV4},
      {5, kSchemaV5},   {6, kSchemaV6},   {7, kSchemaV7},   {8, kSchemaV8},
      {9, kSchemaV9},   {10, kSqliteV10}, {11, kSqliteV11}, {12, kSqliteV12},
      {13, kSqliteV13}, {14, kSqliteV14}, {15, kSqliteV15}, {16, kSqliteV16},
      {17, kSqliteV17}, {18, kSchemaV18}};
  return m;
}

}  // namespace kiln::scheduler::detail
