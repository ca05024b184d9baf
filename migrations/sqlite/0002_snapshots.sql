-- Snapshots of the read models' fold at a position: a cache that keeps
-- time travel (asOf) fast on a long log. Replay is the truth; a snapshot of
-- another format is ignored and replaced.
CREATE TABLE rm_snapshots (
    position INTEGER PRIMARY KEY,
    state    BLOB    NOT NULL
);
