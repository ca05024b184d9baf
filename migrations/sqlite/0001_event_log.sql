-- The event log: one append-only table, its head, and the inline read models
-- that the append path updates in the same transaction.

CREATE TABLE events (
    position        INTEGER PRIMARY KEY,
    stream_id       TEXT    NOT NULL,
    stream_version  INTEGER NOT NULL,
    event_type      TEXT    NOT NULL,
    schema_version  INTEGER NOT NULL,
    event_id        TEXT    NOT NULL UNIQUE,
    occurred_at     INTEGER NOT NULL, -- microseconds since the epoch, UTC
    principal       TEXT    NOT NULL,
    request_id      TEXT,
    causation       INTEGER,
    correlation     TEXT,
    payload         BLOB    NOT NULL, -- postcard, see domain::stored
    prev_hash       BLOB    NOT NULL,
    hash            BLOB    NOT NULL,
    UNIQUE (stream_id, stream_version)
);

-- The one row every append locks: the global position and the chain's head.
CREATE TABLE log_head (
    id       INTEGER PRIMARY KEY CHECK (id = 1),
    position INTEGER NOT NULL,
    hash     BLOB    NOT NULL
);
INSERT INTO log_head (id, position, hash) VALUES (1, 0, zeroblob(32));

CREATE TABLE idempotency (
    principal    TEXT    NOT NULL,
    idem_key     TEXT    NOT NULL,
    request_hash BLOB    NOT NULL,
    status       INTEGER NOT NULL,
    body         TEXT    NOT NULL,
    etag         INTEGER,
    position     INTEGER NOT NULL,
    PRIMARY KEY (principal, idem_key)
);

CREATE TABLE rm_members (
    node_id TEXT    PRIMARY KEY,
    state   TEXT    NOT NULL,
    role    TEXT    NOT NULL,
    rack    TEXT,
    ordinal INTEGER NOT NULL,
    version INTEGER NOT NULL,
    doc     TEXT    NOT NULL
);

CREATE TABLE rm_join_requests (
    request_id TEXT    PRIMARY KEY,
    status     TEXT    NOT NULL,
    version    INTEGER NOT NULL,
    doc        TEXT    NOT NULL
);

-- Tokens as authentication looks them up: by the SHA-256 of the secret.
CREATE TABLE rm_tokens (
    token_id      TEXT    PRIMARY KEY,
    secret_sha256 BLOB    NOT NULL UNIQUE,
    principal     TEXT    NOT NULL,
    policies      TEXT    NOT NULL,
    expires_at    INTEGER,
    revoked_at    INTEGER,
    doc           TEXT    NOT NULL
);

-- The membership generation and the position the read models reflect.
CREATE TABLE rm_cluster (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    generation INTEGER NOT NULL,
    checkpoint INTEGER NOT NULL
);
INSERT INTO rm_cluster (id, generation, checkpoint) VALUES (1, 0, 0);
