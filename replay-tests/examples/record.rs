//! Records the membership log: runs a scenario through the real service on
//! a fresh SQLite database and writes the log it produced in both forms to
//! `logs/membership.jsonl` and `logs/membership.postcard`.
//!
//! `cargo run -p stratum-replay-tests --example record`
//!
//! A founder and two joiners, one failing at `join/raft-openbao` after
//! reaching Patroni's raft; a voter decommissioned (removing, raft cleanup,
//! decommissioned); a join request approved and one rejected; nodes
//! reporting the generation they applied.

use std::time::Duration;

use stratum_api::command::CommandRequest;
use stratum_api::service::{self, ServiceConfig};
use stratum_domain::membership::MemberCommand;
use stratum_domain::Command;

async fn run(bus: &stratum_api::command::CommandBus, principal: &str, c: MemberCommand) {
    let reply = bus
        .execute(CommandRequest::new(Command::Member(c), principal))
        .await
        .unwrap();
    assert!(reply.status < 300, "{}", reply.body);
}

fn admit(node_id: &str, role: &str, ip: &str, rack: &str) -> MemberCommand {
    MemberCommand::Admit {
        node_id: Some(node_id.into()),
        role: Some(role.into()),
        mgmt_ip: Some(ip.into()),
        bindings: [("storage".to_owned(), ip.replace("192.0.2", "10.1.0"))].into(),
        labels: [("topology.rack".to_owned(), rack.to_owned())].into(),
    }
}

fn step(node_id: &str, s: &str) -> MemberCommand {
    MemberCommand::ReportJoinProgress {
        node_id: node_id.into(),
        step: Some(s.into()),
    }
}

#[tokio::main]
async fn main() {
    let dir = tempfile_dir();
    let url = format!("sqlite://{}/record.db", dir.display());
    let store = stratum_api::store::connect(&url).await.unwrap();
    let svc = service::start(
        store.clone(),
        ServiceConfig {
            bootstrap_token: Some("recorded-log-token".into()),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let bus = &svc.state.bus;
    let installer = "stratum-installer";
    let admin = "user/admin";

    run(
        bus,
        installer,
        admit("n-msst0001", "hybrid", "192.0.2.11", "r1"),
    )
    .await;
    run(
        bus,
        installer,
        MemberCommand::CompleteJoin {
            node_id: "n-msst0001".into(),
        },
    )
    .await;
    run(
        bus,
        admin,
        admit("n-msst0002", "hybrid", "192.0.2.12", "r1"),
    )
    .await;
    run(
        bus,
        admin,
        admit("n-msst0003", "hybrid", "192.0.2.13", "r2"),
    )
    .await;
    for s in ["join/packages", "join/raft-patroni"] {
        run(bus, "node/n-msst0002", step("n-msst0002", s)).await;
    }
    run(
        bus,
        "node/n-msst0002",
        MemberCommand::ReportJoinFailure {
            node_id: "n-msst0002".into(),
            step: Some("join/raft-openbao".into()),
            error: Some("Error joining raft: permission denied (403)".into()),
        },
    )
    .await;
    for s in [
        "join/packages",
        "join/raft-patroni",
        "join/raft-openbao",
        "join/raft-ovn",
    ] {
        run(bus, "node/n-msst0003", step("n-msst0003", s)).await;
    }
    run(
        bus,
        "node/n-msst0003",
        MemberCommand::CompleteJoin {
            node_id: "n-msst0003".into(),
        },
    )
    .await;
    run(
        bus,
        "node/n-msst0004",
        MemberCommand::RequestJoin {
            request_id: "jr-0000000001".into(),
            node_id: Some("n-msst0004".into()),
            mgmt_ip: Some("192.0.2.14".into()),
            labels: [("topology.rack".to_owned(), "r2".to_owned())].into(),
            facts: r#"{"cpus":32,"memoryGiB":256}"#.into(),
        },
    )
    .await;
    run(
        bus,
        admin,
        MemberCommand::ApproveJoin {
            request_id: "jr-0000000001".into(),
            role: Some("hybrid".into()),
            mgmt_ip: None,
            bindings: None,
            labels: None,
        },
    )
    .await;
    run(
        bus,
        "node/n-msst0004",
        MemberCommand::CompleteJoin {
            node_id: "n-msst0004".into(),
        },
    )
    .await;
    run(
        bus,
        "node/n-msst0009",
        MemberCommand::RequestJoin {
            request_id: "jr-0000000002".into(),
            node_id: Some("n-msst0009".into()),
            mgmt_ip: Some("192.0.2.19".into()),
            labels: Default::default(),
            facts: "{}".into(),
        },
    )
    .await;
    run(
        bus,
        admin,
        MemberCommand::RejectJoin {
            request_id: "jr-0000000002".into(),
            reason: Some("unknown hardware".into()),
        },
    )
    .await;
    run(
        bus,
        "user/alice",
        MemberCommand::Decommission {
            node_id: "n-msst0004".into(),
            reason: Some("motherboard replaced under RMA 7731".into()),
            force: false,
        },
    )
    .await;
    // The raft cleanup runs after the answers; wait for it.
    for _ in 0..200 {
        let rm = stratum_api::command::load(store.clone(), None)
            .await
            .unwrap();
        let m = &rm.state.membership.members;
        if m["n-msst0002"].raft_cleanup_at.is_some()
            && m["n-msst0004"].state == stratum_domain::membership::MemberState::Decommissioned
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let generation = stratum_api::command::load(store.clone(), None)
        .await
        .unwrap()
        .state
        .membership
        .generation;
    for n in ["n-msst0001", "n-msst0003"] {
        run(
            bus,
            &format!("node/{n}"),
            MemberCommand::ReportAppliedGeneration {
                node_id: n.into(),
                generation: Some(generation),
            },
        )
        .await;
    }

    let events = store.read_after(0, u32::MAX).await.unwrap();
    let logs = stratum_replay_tests::root().join("logs");
    std::fs::create_dir_all(&logs).unwrap();
    let mut jsonl = Vec::new();
    stratum_api::cli::export(&*store, 0, None, &mut jsonl)
        .await
        .unwrap();
    std::fs::write(logs.join("membership.jsonl"), jsonl).unwrap();
    std::fs::write(
        logs.join("membership.postcard"),
        stratum_domain::log::encode_log(&events),
    )
    .unwrap();
    println!("recorded {} events to {}", events.len(), logs.display());
    drop(svc);
    let _ = std::fs::remove_dir_all(dir);
}

fn tempfile_dir() -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("stratum-record-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}
