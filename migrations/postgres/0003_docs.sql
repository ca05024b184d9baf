-- Read models kept as one JSON document per id: upgrades, releases and the
-- running release (kind 'cluster', id 'release'). Lists page by sort_key
-- (an upgrade's is the position that planned it), then id.
CREATE TABLE rm_docs (
    kind     TEXT   NOT NULL,
    id       TEXT   NOT NULL,
    sort_key BIGINT NOT NULL,
    doc      TEXT   NOT NULL,
    PRIMARY KEY (kind, id)
);
CREATE INDEX rm_docs_sorted ON rm_docs (kind, sort_key, id);
