//! esrs (Prima's event_sourcing.rs) with its PostgreSQL store.

use std::sync::Arc;
use std::time::Duration;

use esrs::manager::AggregateManager;
use esrs::store::postgres::{PgStore, PgStoreBuilder};
use esrs::{Aggregate, AggregateState};
use uuid::Uuid;

use super::{drive, member, pg_count, pg_pool, Rate};

pub struct Member;

impl Aggregate for Member {
    const NAME: &'static str = "member";
    type State = member::State;
    type Command = member::Command;
    type Event = member::Event;
    type Error = member::Refused;

    fn handle_command(
        state: &Self::State,
        command: Self::Command,
    ) -> Result<Vec<Self::Event>, Self::Error> {
        member::decide(state, command).map(|event| vec![event])
    }

    fn apply_event(mut state: Self::State, payload: Self::Event) -> Self::State {
        member::evolve(&mut state, payload);
        state
    }
}

pub async fn postgres(url: String, writers: usize, run: Duration, pool_size: u32) -> Rate {
    let pool = pg_pool(&url, pool_size).await;
    // `try_build` runs esrs's migrations: the table `member_events`.
    let store: PgStore<Member> = PgStoreBuilder::new(pool.clone())
        .try_build()
        .await
        .expect("build the PgStore");
    let manager: Arc<AggregateManager<PgStore<Member>>> = Arc::new(AggregateManager::new(store));
    let ids: Arc<Vec<Uuid>> = Arc::new((0..writers).map(|_| Uuid::new_v4()).collect());
    let rate = drive(writers, run, move |w, command| {
        let manager = manager.clone();
        let id = ids[w];
        async move {
            // The state from the aggregate's events, as esrs loads it for
            // every command (optimistically: the unique index on
            // (aggregate_id, sequence_number) refuses a lost race).
            let state = manager
                .load(id)
                .await
                .expect("load the aggregate")
                .unwrap_or_else(|| AggregateState::with_id(id));
            manager
                .handle_command(state, command)
                .await
                .expect("persisted")
                .expect("accepted");
        }
    })
    .await;
    assert_eq!(
        pg_count(&pool, "member_events").await,
        writers as u64 + rate.commands,
        "every command appended one event"
    );
    pool.close().await;
    rate
}
