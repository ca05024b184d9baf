-- An expand step: applied at every start of a build that has it, never
-- counted in _sqlx_migrations, so a previous build (which holds the schema
-- version it sees there to its own) runs beside it on the same database.
-- Expand steps only add (a table, a column with a default, an index) what
-- a previous build never reads.
--
-- Each running `stratum serve` and what it is: its build, the stored event
-- versions it reads and writes, the schema versions it runs on, its
-- process-manager settings (a summary without secrets, and its digest),
-- and a heartbeat in the database's own time.
CREATE TABLE IF NOT EXISTS stratum_replicas (
    id              TEXT    PRIMARY KEY,
    host            TEXT    NOT NULL,
    listen          TEXT    NOT NULL,
    version         TEXT    NOT NULL,
    build_commit    TEXT    NOT NULL,
    reads           TEXT    NOT NULL,
    writes          TEXT    NOT NULL,
    schema_min      INTEGER NOT NULL,
    schema_max      INTEGER NOT NULL,
    settings        TEXT    NOT NULL,
    settings_digest TEXT    NOT NULL,
    started_at      INTEGER NOT NULL,
    heartbeat_at    INTEGER NOT NULL,
    stopped_at      INTEGER
);
