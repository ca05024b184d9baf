//! `GET /metrics` on the metrics address: the process's counters, and
//! gauges set from the published read models at each scrape. Every label
//! a counter can take is there from the start, at 0, so that `increase()`
//! sees the first one.

use std::sync::Arc;

use stratum_domain::membership::{MemberState, Raft};

use crate::metrics::global;
use crate::service::AppState;

/// Every metric in the text exposition format, the read models' ones
/// as `state` publishes them now.
pub async fn render(state: &AppState) -> String {
    let g = global();
    if let Ok(head) = state.store.head().await {
        g.head.set(head.position as i64);
    }
    let rm = state.bus.published();
    let m = &rm.state.membership;
    g.generation.set(m.generation as i64);
    for s in MemberState::ALL {
        let n = m.members.values().filter(|x| x.state == s).count();
        g.members.with_label_values(&[s.as_str()]).set(n as i64);
    }
    let lagging = m
        .members
        .values()
        .filter(|x| {
            stratum_domain::membership::lagging(x.state, x.applied_generation, m.generation)
        })
        .count();
    g.lagging.set(lagging as i64);
    for reason in crate::auth::REFUSAL_REASONS {
        g.auth_refused.with_label_values(&[reason]);
    }
    for raft in Raft::ALL {
        // Every raft has its counters from the start, at 0, so that
        // `increase()` sees the first removal or failure.
        g.raft_removals.with_label_values(&[raft.as_str()]);
        g.raft_returns.with_label_values(&[raft.as_str()]);
        for reason in crate::raft::Failure::ALL {
            g.raft_failures
                .with_label_values(&[raft.as_str(), reason.as_str()]);
        }
        let n = m
            .members
            .values()
            .filter(|x| x.pending_cleanup().contains(&raft))
            .count();
        g.raft_pending
            .with_label_values(&[raft.as_str()])
            .set(n as i64);
    }
    g.upgrade.reset();
    if let Some(u) = rm.state.upgrades.active_upgrade() {
        g.upgrade
            .with_label_values(&[u.id.as_str(), u.state.as_str()])
            .set(1);
    }
    let active_alarms = rm
        .state
        .upgrades
        .alarms
        .values()
        .filter(|a| a.cleared_at.is_none())
        .count();
    g.alarms.set(active_alarms as i64);
    let free = state.watchers.available_permits();
    g.watchers
        .set(state.limits.max_watchers.saturating_sub(free) as i64);
    if let Some((size, idle)) = state.store.pool_stats() {
        g.pool
            .with_label_values(&["in_use"])
            .set(i64::from(size.saturating_sub(idle)));
        g.pool.with_label_values(&["idle"]).set(i64::from(idle));
    }
    if let Ok(all) = state.store.replicas().await {
        for s in crate::replicas::ReplicaState::ALL {
            let n = all
                .rows
                .iter()
                .filter(|r| crate::replicas::ReplicaState::of(r, all.now) == s)
                .count();
            g.replicas.with_label_values(&[s.as_str()]).set(n as i64);
        }
    }
    g.settings_differ.set(i64::from(state.acting.differs()));
    g.storage_level.set(i64::from(rm.state.storage.level));
    g.encode()
}

/// The router of the metrics address: `GET /metrics` only.
pub fn app(state: AppState) -> axum::Router {
    use axum::response::IntoResponse;
    let state = Arc::new(state);
    axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let state = state.clone();
            async move {
                (
                    [(
                        axum::http::header::CONTENT_TYPE,
                        "text/plain; version=0.0.4; charset=utf-8",
                    )],
                    render(&state).await,
                )
                    .into_response()
            }
        }),
    )
}
