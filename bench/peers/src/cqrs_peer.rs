//! cqrs-es with postgres-es and sqlite-es.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use cqrs_es::event_sink::EventSink;
use cqrs_es::{Aggregate, DomainEvent};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};

use super::{drive, member, node_id, pg_count, pg_pool, sqlite_count, Rate};

impl DomainEvent for member::Event {
    fn event_type(&self) -> String {
        match self {
            member::Event::Admitted { .. } => "Admitted".into(),
            member::Event::JoinProgressReported { .. } => "JoinProgressReported".into(),
        }
    }

    fn event_version(&self) -> String {
        "1.0".into()
    }
}

impl Aggregate for member::State {
    const TYPE: &'static str = "member";
    type Command = member::Command;
    type Event = member::Event;
    type Error = member::Refused;
    type Services = ();

    async fn handle(
        &mut self,
        command: Self::Command,
        _services: &Self::Services,
        sink: &EventSink<Self>,
    ) -> Result<(), Self::Error> {
        let event = member::decide(self, command)?;
        sink.write(event, self).await;
        Ok(())
    }

    fn apply(&mut self, event: Self::Event) {
        member::evolve(self, event);
    }
}

/// The metadata stratum records with each event: who, and a request id.
fn metadata() -> HashMap<String, String> {
    HashMap::from([
        ("principal".to_owned(), "user/bench".to_owned()),
        ("request_id".to_owned(), uuid::Uuid::new_v4().to_string()),
    ])
}

/// The tables of postgres-es's `db/init.sql` (without its view table,
/// sample row and user).
const POSTGRES_TABLES: [&str; 2] = [
    "CREATE TABLE events
    (
        aggregate_type text                         NOT NULL,
        aggregate_id   text                         NOT NULL,
        sequence       bigint CHECK (sequence >= 0) NOT NULL,
        event_type     text                         NOT NULL,
        event_version  text                         NOT NULL,
        payload        json                         NOT NULL,
        metadata       json                         NOT NULL,
        PRIMARY KEY (aggregate_type, aggregate_id, sequence)
    )",
    "CREATE TABLE snapshots
    (
        aggregate_type   text                                 NOT NULL,
        aggregate_id     text                                 NOT NULL,
        last_sequence    bigint CHECK (last_sequence >= 0)    NOT NULL,
        current_snapshot bigint CHECK (current_snapshot >= 0) NOT NULL,
        payload          json                                 NOT NULL,
        PRIMARY KEY (aggregate_type, aggregate_id, last_sequence)
    )",
];

/// The tables of sqlite-es's `migrations/20221114171845_init.sql`
/// (without its view table and sample row).
const SQLITE_TABLES: [&str; 2] = [
    "CREATE TABLE events
    (
      aggregate_type text                          NOT NULL,
      aggregate_id   text                          NOT NULL,
      sequence       integer CHECK (sequence >= 0) NOT NULL,
      event_type     text                          NOT NULL,
      event_version  text                          NOT NULL,
      payload        text                          NOT NULL,
      metadata       text                          NOT NULL,
      PRIMARY KEY (aggregate_type, aggregate_id, sequence)
    ) STRICT",
    "CREATE TABLE snapshots
    (
      aggregate_type   text                                  NOT NULL,
      aggregate_id     text                                  NOT NULL,
      last_sequence    integer CHECK (last_sequence >= 0)    NOT NULL,
      current_snapshot integer CHECK (current_snapshot >= 0) NOT NULL,
      payload          text                                  NOT NULL,
      PRIMARY KEY (aggregate_type, aggregate_id, last_sequence)
    ) STRICT",
];

/// `snapshot`: `None` for `postgres_cqrs` (all events loaded per
/// command), `Some(n)` for `postgres_snapshot_cqrs` every n events.
pub async fn postgres(
    url: String,
    writers: usize,
    run: Duration,
    pool_size: u32,
    snapshot: Option<usize>,
) -> Rate {
    let pool = pg_pool(&url, pool_size).await;
    for ddl in POSTGRES_TABLES {
        sqlx::query(ddl)
            .execute(&pool)
            .await
            .expect("create the tables");
    }
    let cqrs = Arc::new(match snapshot {
        None => postgres_es::postgres_cqrs::<member::State>(pool.clone(), vec![], ()),
        Some(n) => {
            postgres_es::postgres_snapshot_cqrs::<member::State>(pool.clone(), vec![], n, ())
        }
    });
    let rate = drive(writers, run, move |w, command| {
        let cqrs = cqrs.clone();
        async move {
            cqrs.execute_with_metadata(&node_id(w), command, metadata())
                .await
                .expect("committed");
        }
    })
    .await;
    assert_eq!(
        pg_count(&pool, "events").await,
        writers as u64 + rate.commands,
        "every command appended one event"
    );
    pool.close().await;
    rate
}

/// sqlite-es's `default_sqlite_pool` (create, WAL, foreign keys, 10
/// connections) with synchronous=FULL instead of NORMAL, a 10 s busy
/// timeout as stratum's, and no ping on checkout.
pub async fn sqlite(path: PathBuf, writers: usize, run: Duration, pool_size: u32) -> Rate {
    let options = SqliteConnectOptions::new()
        .filename(&path)
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Full)
        .busy_timeout(Duration::from_secs(10))
        .foreign_keys(true);
    let pool = SqlitePoolOptions::new()
        .max_connections(pool_size)
        .test_before_acquire(false)
        .connect_with(options)
        .await
        .expect("open SQLite");
    for ddl in SQLITE_TABLES {
        sqlx::query(ddl)
            .execute(&pool)
            .await
            .expect("create the tables");
    }
    let cqrs = Arc::new(sqlite_es::sqlite_cqrs::<member::State>(
        pool.clone(),
        vec![],
        (),
    ));
    let rate = drive(writers, run, move |w, command| {
        let cqrs = cqrs.clone();
        async move {
            cqrs.execute_with_metadata(&node_id(w), command, metadata())
                .await
                .expect("committed");
        }
    })
    .await;
    assert_eq!(
        sqlite_count(&pool, "events").await,
        writers as u64 + rate.commands,
        "every command appended one event"
    );
    pool.close().await;
    rate
}
