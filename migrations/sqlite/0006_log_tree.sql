-- The log as a Merkle tree (C2SP tlog-tiles, RFC 6962), kept in the same
-- commit as the events: for each tile level >= 1, the root of every
-- complete subtree of 256^level leaves (the hashes a level's tiles list).
-- Level 0 is each event's leaf hash, SHA-256(0x00 || hash), a function of
-- the events table. A database from before this table gets it filled at
-- the next start.
CREATE TABLE log_tree (
    level INTEGER NOT NULL,
    idx   INTEGER NOT NULL,
    hash  BLOB    NOT NULL,
    PRIMARY KEY (level, idx)
) WITHOUT ROWID;

-- The newest checkpoint any signer signed over this database, so that a
-- signer whose own record is gone still never signs a fork of it.
CREATE TABLE log_signed (
    id   INTEGER PRIMARY KEY CHECK (id = 1),
    size INTEGER NOT NULL,
    root BLOB    NOT NULL,
    note TEXT    NOT NULL
);
