-- The event log: one append-only table, its head, and the inline read models
-- that the append path updates in the same transaction (PostgreSQL).

CREATE TABLE events (
    position        BIGINT PRIMARY KEY,
    stream_id       TEXT    NOT NULL,
    stream_version  BIGINT  NOT NULL,
    event_type      TEXT    NOT NULL,
    schema_version  BIGINT  NOT NULL,
    event_id        TEXT    NOT NULL UNIQUE,
    occurred_at     BIGINT  NOT NULL, -- microseconds since the epoch, UTC
    principal       TEXT    NOT NULL,
    request_id      TEXT,
    causation       BIGINT,
    correlation     TEXT,
    payload         BYTEA   NOT NULL, -- postcard, see domain::stored
    prev_hash       BYTEA   NOT NULL,
    hash            BYTEA   NOT NULL,
    UNIQUE (stream_id, stream_version)
);

-- The one row every append locks: the global position and the chain's head.
CREATE TABLE log_head (
    id       INTEGER PRIMARY KEY CHECK (id = 1),
    position BIGINT  NOT NULL,
    hash     BYTEA   NOT NULL
);
INSERT INTO log_head (id, position, hash) VALUES (1, 0, decode(repeat('00', 32), 'hex'));

CREATE TABLE idempotency (
    principal    TEXT    NOT NULL,
    idem_key     TEXT    NOT NULL,
    request_hash BYTEA   NOT NULL,
    status       BIGINT  NOT NULL,
    body         TEXT    NOT NULL,
    etag         BIGINT,
    position     BIGINT  NOT NULL,
    PRIMARY KEY (principal, idem_key)
);

CREATE TABLE rm_members (
    node_id TEXT    PRIMARY KEY,
    state   TEXT    NOT NULL,
    role    TEXT    NOT NULL,
    rack    TEXT,
    ordinal BIGINT  NOT NULL,
    version BIGINT  NOT NULL,
    doc     TEXT    NOT NULL
);

CREATE TABLE rm_join_requests (
    request_id TEXT    PRIMARY KEY,
    status     TEXT    NOT NULL,
    version    BIGINT  NOT NULL,
    doc        TEXT    NOT NULL
);

-- Tokens as authentication looks them up: by the SHA-256 of the secret.
CREATE TABLE rm_tokens (
    token_id      TEXT    PRIMARY KEY,
    secret_sha256 BYTEA   NOT NULL UNIQUE,
    principal     TEXT    NOT NULL,
    policies      TEXT    NOT NULL,
    expires_at    BIGINT,
    revoked_at    BIGINT,
    doc           TEXT    NOT NULL
);

-- The membership generation and the position the read models reflect.
CREATE TABLE rm_cluster (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    generation BIGINT  NOT NULL,
    checkpoint BIGINT  NOT NULL
);
INSERT INTO rm_cluster (id, generation, checkpoint) VALUES (1, 0, 0);
