//! stratum's own write path: `CommandBus::execute` on SQLite and
//! PostgreSQL, as `api/benches/store.rs` runs it.

use std::sync::Arc;
use std::time::Duration;

use stratum_api::command::{CommandBus, CommandRequest};
use stratum_domain::membership::MemberCommand;
use stratum_domain::Command;
use stratum_store::{self as store, EventStore};

use super::{closed_loop, mgmt_ip, node_id, step, Rate};

/// `commands` of `api/benches/store.rs`: every command through the one
/// write path, which loads the stream's state, decides, appends one
/// event with its expected version and updates the inline read model.
pub async fn commands(url: String, writers: usize, run: Duration) -> Rate {
    let s: Arc<dyn EventStore> = store::connect(&url).await.expect("open the store");
    let bus = CommandBus::start(s.clone())
        .await
        .expect("start the command bus");
    for w in 0..writers {
        let admit = Command::Member(MemberCommand::Admit {
            node_id: Some(node_id(w)),
            role: Some("compute".into()),
            mgmt_ip: Some(mgmt_ip(w)),
            bindings: Default::default(),
            labels: Default::default(),
        });
        bus.execute(CommandRequest::new(admit, "user/bench"))
            .await
            .expect("the write path answers")
            .committed()
            .expect("admitted");
    }
    let rate = closed_loop(writers, run, move |w, k| {
        let bus = bus.clone();
        async move {
            let mut req = CommandRequest::new(
                Command::Member(MemberCommand::ReportJoinProgress {
                    node_id: node_id(w),
                    step: Some(step(k)),
                }),
                "user/bench",
            );
            req.meta.request_id = Some(uuid::Uuid::new_v4().to_string());
            let r = bus
                .execute(req)
                .await
                .expect("the write path answers")
                .committed()
                .expect("committed");
            assert!(r.position.is_some(), "{}", r.body);
        }
    })
    .await;
    let head = s.head().await.expect("read the head").position;
    assert_eq!(
        head,
        writers as u64 + rate.commands,
        "every command appended one event"
    );
    rate
}
