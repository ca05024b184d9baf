-- An expand step (see 0001_replicas.sql): what a previous build never
-- reads, so it runs beside this one on the same database.
--
-- Each read-model row names the version of the projection whose fold made
-- it. A previous build's inserts get the default, 1: the version of every
-- projection before projections had versions. A build compares, trusts
-- and rewrites rows by this version (`stratum replay --check`, the online
-- rebuild of a server of a newer projection version).
ALTER TABLE rm_members ADD COLUMN projection_version INTEGER NOT NULL DEFAULT 1;
ALTER TABLE rm_join_requests ADD COLUMN projection_version INTEGER NOT NULL DEFAULT 1;
ALTER TABLE rm_tokens ADD COLUMN projection_version INTEGER NOT NULL DEFAULT 1;
ALTER TABLE rm_docs ADD COLUMN projection_version INTEGER NOT NULL DEFAULT 1;
-- The projection versions each replica folds (`members=1,iam=1,...`);
-- empty for a build from before projections had versions, whose every
-- projection is version 1.
ALTER TABLE stratum_replicas ADD COLUMN projections TEXT NOT NULL DEFAULT '';
