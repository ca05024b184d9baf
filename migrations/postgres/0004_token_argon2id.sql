-- A token whose secret an operator chose is recognized by a salted
-- Argon2id hash instead of a SHA-256 (TokenIssued v2): its SHA-256 is NULL.
ALTER TABLE rm_tokens ALTER COLUMN secret_sha256 DROP NOT NULL;
ALTER TABLE rm_tokens ADD COLUMN secret_argon2id TEXT;
ALTER TABLE rm_tokens ADD CONSTRAINT rm_tokens_one_verifier
    CHECK ((secret_sha256 IS NULL) <> (secret_argon2id IS NULL));
