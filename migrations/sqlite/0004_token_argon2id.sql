-- A token whose secret an operator chose is recognized by a salted
-- Argon2id hash instead of a SHA-256 (TokenIssued v2): its SHA-256 is
-- NULL. SQLite cannot drop NOT NULL in place, so the table is rebuilt; it
-- is a read model, its rows are copied as they are.
CREATE TABLE rm_tokens_v4 (
    token_id        TEXT    PRIMARY KEY,
    secret_sha256   BLOB    UNIQUE,
    secret_argon2id TEXT,
    principal       TEXT    NOT NULL,
    policies        TEXT    NOT NULL,
    expires_at      INTEGER,
    revoked_at      INTEGER,
    doc             TEXT    NOT NULL,
    CHECK ((secret_sha256 IS NULL) <> (secret_argon2id IS NULL))
);
INSERT INTO rm_tokens_v4 (token_id, secret_sha256, principal, policies, expires_at, revoked_at, doc)
    SELECT token_id, secret_sha256, principal, policies, expires_at, revoked_at, doc FROM rm_tokens;
DROP TABLE rm_tokens;
ALTER TABLE rm_tokens_v4 RENAME TO rm_tokens;
