//! The membership scenarios: `membership` and `member-changes`.

use super::*;

fn step(node_id: &str, s: &str) -> MemberCommand {
    MemberCommand::ReportJoinProgress {
        node_id: node_id.into(),
        step: Some(s.into()),
    }
}

pub(super) async fn membership(store: Arc<dyn EventStore>, bus: &CommandBus) {
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
}

fn update(node_id: &str, body: serde_json::Value) -> MemberCommand {
    let s = |k: &str| body.get(k).and_then(|v| v.as_str()).map(str::to_owned);
    let map = |k: &str| {
        body.get(k)
            .map(|v| serde_json::from_value(v.clone()).expect("a string map"))
    };
    MemberCommand::Update {
        node_id: node_id.into(),
        role: s("role"),
        mgmt_ip: s("mgmtIp"),
        bindings: map("bindings"),
        labels: map("labels"),
        force: body.get("force").and_then(|v| v.as_bool()).unwrap_or(false),
    }
}

/// Waits until every member's raft cleanup is done.
async fn cleanups_done(store: &Arc<dyn EventStore>) {
    for _ in 0..200 {
        let rm = stratum_api::command::load(store.clone(), None)
            .await
            .unwrap();
        if rm.state.membership.pending_cleanups().next().is_none() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("a raft cleanup did not finish");
}

pub(super) async fn member_changes(store: Arc<dyn EventStore>, bus: &CommandBus) {
    let installer = "stratum-installer";
    let admin = "user/admin";
    for (n, ip, rack) in [
        ("n-msst0001", "192.0.2.11", "r1"),
        ("n-msst0002", "192.0.2.12", "r1"),
        ("n-msst0003", "192.0.2.13", "r2"),
    ] {
        run(bus, installer, admit(n, "hybrid", ip, rack)).await;
        run(
            bus,
            installer,
            MemberCommand::CompleteJoin { node_id: n.into() },
        )
        .await;
    }
    // A wrong rack label, corrected.
    run(
        bus,
        admin,
        update(
            "n-msst0003",
            serde_json::json!({"labels": {"topology.rack": "r3", "hw": "gen11"}}),
        ),
    )
    .await;
    // A re-addressed node, with its storage binding.
    run(
        bus,
        "user/alice",
        update(
            "n-msst0002",
            serde_json::json!({"mgmtIp": "192.0.2.22", "bindings": {"storage": "10.1.0.22", "overlay": "10.2.0.22"}}),
        ),
    )
    .await;
    // A change that changes nothing appends nothing.
    run(
        bus,
        "user/alice",
        update("n-msst0002", serde_json::json!({"mgmtIp": "192.0.2.22"})),
    )
    .await;
    // Two voters stay: n-msst0003 is demoted and leaves its rafts.
    run(
        bus,
        admin,
        update("n-msst0003", serde_json::json!({"role": "storage"})),
    )
    .await;
    cleanups_done(&store).await;
    // A compute joiner and a voter joiner; the voter fails at OVN's raft.
    run(
        bus,
        admin,
        admit("n-msst0004", "compute", "192.0.2.14", "r2"),
    )
    .await;
    run(
        bus,
        admin,
        admit("n-msst0005", "control", "192.0.2.15", "r1"),
    )
    .await;
    for s in ["join/packages", "join/raft-patroni", "join/raft-openbao"] {
        run(bus, "node/n-msst0005", step("n-msst0005", s)).await;
    }
    run(
        bus,
        "node/n-msst0005",
        MemberCommand::ReportJoinFailure {
            node_id: "n-msst0005".into(),
            step: Some("join/raft-ovn".into()),
            error: Some("ovsdb-server: cluster/join: connection timed out".into()),
        },
    )
    .await;
    cleanups_done(&store).await;
    // The last two voters: demoting one more needs force.
    run(
        bus,
        admin,
        update(
            "n-msst0002",
            serde_json::json!({"role": "compute", "force": true}),
        ),
    )
    .await;
    cleanups_done(&store).await;
}
