//! Expand steps and the replica registry.
//!
//! During an upgrade of stratum itself two builds share one database. A
//! schema change the previous build cannot live with waits for the
//! upgrade's finalization (it is an ordinary migration, counted in
//! `_sqlx_migrations`, whose version a build holds to its own). A change it
//! can live with (a table or column it never reads) is an *expand step*:
//! `migrations/<backend>/expand/NNNN_*.sql`, applied at every read-write
//! open of a build that has it, recorded in `stratum_expand`, never counted
//! where a previous build looks.
//!
//! The first expand step is the replica registry: each `stratum serve`
//! says what it is in `stratum_replicas`, with a heartbeat in the
//! database's own time (so the clocks of the hosts do not matter).

use sqlx::migrate::Migrator;
use sqlx::{ColumnIndex, Database, Decode, Encode, Executor, IntoArguments, Row, Type};

use crate::{StoreError, StoreResult};

pub(crate) static SQLITE_EXPAND: Migrator = sqlx::migrate!("../../migrations/sqlite/expand");
pub(crate) static POSTGRES_EXPAND: Migrator = sqlx::migrate!("../../migrations/postgres/expand");

/// Where the applied expand steps are recorded (both backends).
pub(crate) const EXPAND_TABLE: &str = "CREATE TABLE IF NOT EXISTS stratum_expand (
    version     BIGINT PRIMARY KEY,
    description TEXT   NOT NULL,
    checksum    TEXT   NOT NULL
)";

/// The expand steps of `migrator` not in `applied` (version, checksum in
/// hex), in order; an applied step whose text changed since is refused, as
/// a changed migration is.
pub(crate) fn pending<'a>(
    migrator: &'a Migrator,
    applied: &[(i64, String)],
) -> StoreResult<Vec<&'a sqlx::migrate::Migration>> {
    let mut out = Vec::new();
    for m in migrator.iter() {
        match applied.iter().find(|(v, _)| *v == m.version) {
            Some((_, sum)) if *sum != hex::encode(&m.checksum) => {
                return Err(StoreError::Schema(format!(
                    "expand step {} ({}) was applied with other text than this build's: \
                     an applied step never changes",
                    m.version, m.description
                )))
            }
            Some(_) => {}
            None => out.push(m),
        }
    }
    Ok(out)
}

/// One `stratum serve`, as it registered itself, and its heartbeat.
/// Times are the database's, in microseconds since the epoch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicaRow {
    /// Random, one per process start.
    pub id: String,
    /// The host's name.
    pub host: String,
    /// The address it serves the API on.
    pub listen: String,
    /// The build: its version and the commit it was built from.
    pub version: String,
    pub commit: String,
    /// JSON: each stored event type and the newest version it decodes.
    pub reads: String,
    /// JSON: each stored event type and the version it writes.
    pub writes: String,
    /// The schema versions (`_sqlx_migrations`) it runs on.
    pub schema_min: i64,
    pub schema_max: i64,
    /// JSON: its process-manager settings, without secrets.
    pub settings: String,
    /// SHA-256 of `settings`, hex.
    pub settings_digest: String,
    pub started_at: i64,
    pub heartbeat_at: i64,
    pub stopped_at: Option<i64>,
    /// The projection versions it folds, `members=1,iam=1,upgrades=1`;
    /// empty for a build from before projections had versions (every one
    /// of its projections is version 1).
    pub projections: String,
}

/// Every registered replica and the database's time when they were read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Replicas {
    pub now: i64,
    pub rows: Vec<ReplicaRow>,
}

/// How long a stopped or silent replica's row is kept before a heartbeat
/// of another one removes it: a week, in microseconds.
pub const KEPT_FOR_MICROS: i64 = 7 * 24 * 3600 * 1_000_000;

/// The database's time in microseconds since the epoch, per backend.
pub(crate) const SQLITE_NOW: &str =
    "CAST(ROUND((julianday('now') - 2440587.5) * 86400000000.0) AS INTEGER)";
pub(crate) const POSTGRES_NOW: &str = "(EXTRACT(EPOCH FROM clock_timestamp()) * 1000000)::BIGINT";

const COLUMNS: &str = "id, host, listen, version, build_commit, reads, writes, \
     schema_min, schema_max, settings, settings_digest, started_at, heartbeat_at, stopped_at, \
     projections";

/// The registry's statements, the same on both backends but for how the
/// database's time is read (`now`).
pub(crate) struct Registry<DB>(std::marker::PhantomData<DB>);

impl<DB> Registry<DB>
where
    DB: Database,
    for<'q> <DB as Database>::Arguments<'q>: IntoArguments<'q, DB>,
    for<'q> i64: Encode<'q, DB> + Type<DB>,
    for<'q> &'q str: Encode<'q, DB> + Type<DB>,
    usize: ColumnIndex<DB::Row>,
    for<'r> i64: Decode<'r, DB>,
    for<'r> String: Decode<'r, DB> + Type<DB>,
    for<'r> Option<i64>: Decode<'r, DB>,
{
    pub(crate) async fn register<'e, E: Executor<'e, Database = DB>>(
        e: E,
        now: &str,
        r: &ReplicaRow,
    ) -> StoreResult<()> {
        let q = format!(
            "INSERT INTO stratum_replicas ({COLUMNS}) VALUES \
             ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, {now}, {now}, NULL, $12) \
             ON CONFLICT (id) DO UPDATE SET host = excluded.host, listen = excluded.listen, \
             version = excluded.version, build_commit = excluded.build_commit, \
             reads = excluded.reads, writes = excluded.writes, \
             schema_min = excluded.schema_min, schema_max = excluded.schema_max, \
             settings = excluded.settings, settings_digest = excluded.settings_digest, \
             heartbeat_at = excluded.heartbeat_at, stopped_at = NULL, \
             projections = excluded.projections"
        );
        sqlx::query(&q)
            .bind(r.id.as_str())
            .bind(r.host.as_str())
            .bind(r.listen.as_str())
            .bind(r.version.as_str())
            .bind(r.commit.as_str())
            .bind(r.reads.as_str())
            .bind(r.writes.as_str())
            .bind(r.schema_min)
            .bind(r.schema_max)
            .bind(r.settings.as_str())
            .bind(r.settings_digest.as_str())
            .bind(r.projections.as_str())
            .execute(e)
            .await?;
        Ok(())
    }

    pub(crate) async fn heartbeat(pool: &sqlx::Pool<DB>, now: &str, id: &str) -> StoreResult<bool>
    where
        for<'c> &'c sqlx::Pool<DB>: Executor<'c, Database = DB>,
    {
        let beat = sqlx::query(&format!(
            "UPDATE stratum_replicas SET heartbeat_at = {now} WHERE id = $1 RETURNING id"
        ))
        .bind(id)
        .fetch_optional(pool)
        .await?;
        sqlx::query(&format!(
            "DELETE FROM stratum_replicas WHERE id <> $1 AND \
             COALESCE(stopped_at, heartbeat_at) < {now} - $2"
        ))
        .bind(id)
        .bind(KEPT_FOR_MICROS)
        .execute(pool)
        .await?;
        Ok(beat.is_some())
    }

    pub(crate) async fn stopped<'e, E: Executor<'e, Database = DB>>(
        e: E,
        now: &str,
        id: &str,
    ) -> StoreResult<()> {
        sqlx::query(&format!(
            "UPDATE stratum_replicas SET stopped_at = {now} WHERE id = $1"
        ))
        .bind(id)
        .execute(e)
        .await?;
        Ok(())
    }

    pub(crate) async fn all(pool: &sqlx::Pool<DB>, now: &str) -> StoreResult<Replicas>
    where
        for<'c> &'c sqlx::Pool<DB>: Executor<'c, Database = DB>,
    {
        let now: i64 = sqlx::query_scalar(&format!("SELECT {now}"))
            .fetch_one(pool)
            .await?;
        let rows = sqlx::query(&format!(
            "SELECT {COLUMNS} FROM stratum_replicas ORDER BY started_at, id"
        ))
        .fetch_all(pool)
        .await?;
        let rows = rows
            .iter()
            .map(|row| -> StoreResult<ReplicaRow> {
                Ok(ReplicaRow {
                    id: row.try_get(0)?,
                    host: row.try_get(1)?,
                    listen: row.try_get(2)?,
                    version: row.try_get(3)?,
                    commit: row.try_get(4)?,
                    reads: row.try_get(5)?,
                    writes: row.try_get(6)?,
                    schema_min: row.try_get(7)?,
                    schema_max: row.try_get(8)?,
                    settings: row.try_get(9)?,
                    settings_digest: row.try_get(10)?,
                    started_at: row.try_get(11)?,
                    heartbeat_at: row.try_get(12)?,
                    stopped_at: row.try_get(13)?,
                    projections: row.try_get(14)?,
                })
            })
            .collect::<StoreResult<Vec<_>>>()?;
        Ok(Replicas { now, rows })
    }
}

/// Applies this build's expand steps on SQLite, in one `BEGIN IMMEDIATE`
/// (a host tool may open the file at the same time).
pub(crate) async fn expand_sqlite(conn: &mut sqlx::SqliteConnection) -> StoreResult<()> {
    sqlx::raw_sql("BEGIN IMMEDIATE").execute(&mut *conn).await?;
    let applied = apply_expand(&mut *conn, &SQLITE_EXPAND).await;
    let end = if applied.is_ok() {
        "COMMIT"
    } else {
        "ROLLBACK"
    };
    sqlx::raw_sql(end).execute(&mut *conn).await?;
    applied
}

/// The advisory lock that keeps two replicas starting at once from
/// applying the same expand step twice.
const EXPAND_LOCK: i64 = 0x5354_5241_0002;

/// Applies this build's expand steps on PostgreSQL, in one transaction.
pub(crate) async fn expand_postgres(pool: &sqlx::PgPool) -> StoreResult<()> {
    let mut tx = pool.begin().await?;
    sqlx::query("SELECT pg_advisory_xact_lock($1)")
        .bind(EXPAND_LOCK)
        .execute(&mut *tx)
        .await?;
    apply_expand(&mut *tx, &POSTGRES_EXPAND).await?;
    tx.commit().await?;
    Ok(())
}

async fn apply_expand<C>(conn: &mut C, migrator: &Migrator) -> StoreResult<()>
where
    C: sqlx::Connection,
    for<'c> &'c mut C: Executor<'c, Database = C::Database>,
    for<'q> <C::Database as Database>::Arguments<'q>: IntoArguments<'q, C::Database>,
    for<'q> i64: Encode<'q, C::Database> + Type<C::Database>,
    for<'q> &'q str: Encode<'q, C::Database> + Type<C::Database>,
    usize: ColumnIndex<<C::Database as Database>::Row>,
    for<'r> i64: Decode<'r, C::Database>,
    for<'r> String: Decode<'r, C::Database> + Type<C::Database>,
{
    sqlx::raw_sql(EXPAND_TABLE).execute(&mut *conn).await?;
    let applied: Vec<(i64, String)> = sqlx::query("SELECT version, checksum FROM stratum_expand")
        .fetch_all(&mut *conn)
        .await?
        .iter()
        .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
        .collect::<Result<_, sqlx::Error>>()?;
    for m in pending(migrator, &applied)? {
        sqlx::raw_sql(&m.sql).execute(&mut *conn).await?;
        sqlx::query(
            "INSERT INTO stratum_expand (version, description, checksum) VALUES ($1, $2, $3)",
        )
        .bind(m.version)
        .bind(&*m.description)
        .bind(hex::encode(&m.checksum).as_str())
        .execute(&mut *conn)
        .await?;
        tracing::info!(version = m.version, step = %m.description, "schema expanded");
    }
    Ok(())
}
