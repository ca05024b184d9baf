-- The caller's own X-Request-Id, kept apart from the server's request id
-- (several requests may share one). NULL for every event before.
ALTER TABLE events ADD COLUMN client_request_id TEXT;
