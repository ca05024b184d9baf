//! Removals in the real rafts: joins that fail at every place, a
//! decommission, a peer removed by hand, the raft's leader decommissioned,
//! an outage and a hung tool.

use super::*;

/// Joins that fail at every place, a decommission, and a peer already
/// removed by hand: each is taken out of exactly the rafts it reached, as
/// each raft's own listing shows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_joins_and_a_decommission_leave_no_stale_voter_in_the_real_rafts() {
    if !available() {
        return;
    }
    let _alone = ONE_CLUSTER_AT_A_TIME.lock().await;
    let rafts = Rafts::up(21).await;
    let dir = tempfile::tempdir().unwrap();
    let server = serve(&rafts, dir.path(), &[]).await;
    let watch = RemovalWatch::start(&rafts, &server);

    // j-1 joined all three rafts, then failed after them.
    joined(&rafts, &server, "j-1", 21, &RAFTS).await;
    for raft in RAFTS {
        assert!(rafts.lists(raft, "j-1", 21).await, "j-1 is in {raft}");
    }
    let failed_at = Instant::now();
    server
        .join_failed("j-1", "join/services", "etcd: timeout")
        .await;
    let m = server.cleaned("j-1").await;
    eprintln!("j-1 out of three real rafts in {:?}", failed_at.elapsed());
    assert_eq!(m["state"], "failed", "{m}");
    let removed = removals(&server, "j-1").await;
    for (raft, adapter) in [
        ("openbao", "openbao-http"),
        ("ovn", "ovn-kick"),
        ("patroni", "patroni-syncobj"),
    ] {
        let e = removal(&removed, raft).unwrap_or_else(|| panic!("{raft}: {removed:?}"));
        assert_eq!(e["payload"]["adapter"], adapter, "{e}");
        assert_eq!(e["payload"]["alreadyGone"], false, "{e}");
        assert!(!rafts.lists(raft, "j-1", 21).await, "j-1 is out of {raft}");
    }

    // j-2 joined, became active, and is decommissioned.
    joined(&rafts, &server, "j-2", 22, &RAFTS).await;
    server.member_post("j-2", "join-complete", json!({})).await;
    server
        .member_post("j-2", "decommission", json!({"reason": "hardware retired"}))
        .await;
    let m = server.cleaned("j-2").await;
    assert_eq!(m["state"], "decommissioned", "{m}");
    assert_eq!(removals(&server, "j-2").await.len(), 3);

    // Failures at a raft's own step, before the node entered that raft:
    // already gone there, without waiting out the adapter's timeout.
    for (id, host, entered, step) in [
        ("j-3", 23, &[][..], "patroni"),
        ("j-4", 24, &["patroni"][..], "openbao"),
        ("j-5", 25, &["patroni", "openbao"][..], "ovn"),
    ] {
        joined(&rafts, &server, id, host, entered).await;
        server
            .member_post(
                id,
                "join-failed",
                json!({"step": format!("join/raft-{step}"), "error": "timed out"}),
            )
            .await;
        server.cleaned(id).await;
        // The raft it never entered is not waited on for the adapter's
        // timeout (10 s): a slow machine, or a call that failed at once and
        // was retried, fits under it.
        // (The rafts it entered are real removals, which a peer seen back
        // makes longer; the watcher and the end of the test check those.)
        let took =
            last_recorded_after_failure(&server, id, &[("RaftPeerRemoved", Some(step))]).await;
        assert!(
            took < Duration::from_secs(10),
            "{id}'s removal from {step}, which it never entered, took {took:?}"
        );
        let removed = removals(&server, id).await;
        assert_eq!(removed.len(), entered.len() + 1, "{removed:?}");
        let never = removal(&removed, step).unwrap();
        assert_eq!(never["payload"]["alreadyGone"], true, "{never}");
        for raft in entered {
            assert_eq!(
                removal(&removed, raft).unwrap()["payload"]["alreadyGone"],
                false
            );
        }
    }

    // j-6 was taken out of OpenBao's raft by hand before stratum got to it.
    joined(&rafts, &server, "j-6", 26, &RAFTS).await;
    rafts.sh("openbao", "remove", &["j-6"]).await;
    server.join_failed("j-6", "join/services", "x").await;
    server.cleaned("j-6").await;
    let removed = removals(&server, "j-6").await;
    assert_eq!(
        removal(&removed, "openbao").unwrap()["payload"]["alreadyGone"],
        true
    );
    assert_eq!(
        removal(&removed, "ovn").unwrap()["payload"]["alreadyGone"],
        false
    );

    watch.checked(14).await;
    let all = [
        ("j-1", 21, &RAFTS[..]),
        ("j-2", 22, &RAFTS[..]),
        ("j-3", 23, &[][..]),
        ("j-4", 24, &["patroni"][..]),
        ("j-5", 25, &["patroni", "openbao"][..]),
        ("j-6", 26, &RAFTS[..]),
    ];
    stopped_and_out(&rafts, &server, &all).await;
    let token = rafts.env().await;
    let token = &token
        .iter()
        .find(|(k, _)| k == "STRATUM_OPENBAO_TOKEN")
        .unwrap()
        .1;
    assert!(
        !server.log().contains(token.as_str()),
        "the OpenBao token never reaches the log"
    );
}

/// The raft's leader decommissioned, a raft that is down and comes back,
/// and a tool that hangs while another member's removals go on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_an_outage_and_a_hung_tool_in_the_real_rafts() {
    if !available() {
        return;
    }
    let _alone = ONE_CLUSTER_AT_A_TIME.lock().await;
    let rafts = Rafts::up(22).await;
    let dir = tempfile::tempdir().unwrap();
    let metrics = format!("127.0.0.1:{}", free_port());
    let server = serve(
        &rafts,
        dir.path(),
        &[
            ("STRATUM_RAFT_TIMEOUT", "3s"),
            ("STRATUM_METRICS_LISTEN", &metrics),
        ],
    )
    .await;
    let watch = RemovalWatch::start(&rafts, &server);

    // j-1 leads Patroni's raft and OVN's Northbound raft when it is
    // decommissioned: pysyncobj's leadership is moved off it first, and the
    // removal says so; OVN hands its leadership over by itself.
    joined(&rafts, &server, "j-1", 21, &RAFTS).await;
    server.member_post("j-1", "join-complete", json!({})).await;
    // Each transfer returns once it has seen j-1 lead. On two loaded cores
    // a starved j-1 can still lose that leadership to an election before
    // the cleanup reads the raft: then it is removed as a follower, and
    // `leaderMoved` must say what the cleanup found. That it is true for a
    // peer found leading, whatever the tries, is
    // `raft_serve::a_removal_retried_keeps_what_its_earlier_tries_did`.
    rafts
        .sh("ovn", "transfer", &["OVN_Northbound", "j-1"])
        .await;
    rafts.sh("patroni", "transfer", &["j-1"]).await;
    server
        .member_post("j-1", "decommission", json!({"reason": "rack moved"}))
        .await;
    let m = server.cleaned("j-1").await;
    assert_eq!(m["state"], "decommissioned", "{m}");
    let removed = removals(&server, "j-1").await;
    let patroni = removal(&removed, "patroni").unwrap();
    let found_leading = server.log().lines().any(|l| {
        l.contains("leadership is moved off it first")
            && l.contains(&format!("{}:5010", rafts.ip(21)))
    });
    eprintln!("j-1 found leading Patroni's raft by the cleanup: {found_leading}");
    assert_eq!(
        patroni["payload"]["leaderMoved"], found_leading,
        "{patroni}"
    );
    assert_eq!(patroni["payload"]["alreadyGone"], false, "{patroni}");
    let leader = rafts.sh("patroni", "leader", &[]).await;
    assert_ne!(leader.trim(), format!("{}:5010", rafts.ip(21)));
    assert!(!rafts.lists("ovn", "j-1", 21).await);
    let leader = rafts.sh("ovn", "leader", &["OVN_Northbound"]).await;
    assert_ne!(leader.trim(), "j-1", "OVN elected another leader");

    // OpenBao at STRATUM_OPENBAO_ADDR (f-1) is down while j-2 fails: the
    // other rafts are cleaned, OpenBao's removal waits and completes once
    // it is back, without a restart.
    joined(&rafts, &server, "j-2", 22, &RAFTS).await;
    rafts.sh("openbao", "stop", &["f-1"]).await;
    server.join_failed("j-2", "join/services", "x").await;
    server
        .eventually("j-2 out of OVN's and Patroni's rafts", || async {
            (removals(&server, "j-2").await.len() == 2).then_some(())
        })
        .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(removal(&removals(&server, "j-2").await, "openbao").is_none());
    assert!(server.member("j-2").await["raftCleanupAt"].is_null());
    rafts.sh("openbao", "start", &["f-1"]).await;
    server.cleaned("j-2").await;
    assert!(!rafts.lists("openbao", "j-2", 22).await);

    // The ovsdb-server behind OVN's control sockets hangs for 30 s: the
    // kicks time out (and are killed), j-3's removals from the other rafts
    // and another member's complete within seconds, and OVN's is recorded
    // only after it happened.
    joined(&rafts, &server, "j-3", 23, &RAFTS).await;
    // j-4 reached only OpenBao's and Patroni's rafts.
    joined(&rafts, &server, "j-4", 24, &["patroni", "openbao"]).await;
    rafts.sh("ovn", "pause", &["f-1"]).await;
    let failed_at = Instant::now();
    server.join_failed("j-3", "join/services", "x").await;
    // Another member fails while OVN's tool hangs on j-3.
    tokio::time::sleep(Duration::from_millis(500)).await;
    server.join_failed("j-4", "join/services", "x").await;
    server.cleaned("j-4").await;
    // OVN hangs for 30 s: well under that, j-4's removals did not wait
    // for it, and neither did j-3's from OpenBao's and Patroni's rafts
    // (each raft's worker takes j-3 then j-4; timed by the service's own
    // record, 6 s was seen on a loaded 2-core machine).
    let took = last_recorded_after_failure(&server, "j-4", &[("RaftCleanupCompleted", None)]).await;
    assert!(
        took < Duration::from_secs(12),
        "another member's removals took {took:?}"
    );
    server
        .eventually("j-3 out of OpenBao's and Patroni's rafts", || async {
            let removed = removals(&server, "j-3").await;
            (removal(&removed, "openbao").is_some() && removal(&removed, "patroni").is_some())
                .then_some(())
        })
        .await;
    let took = last_recorded_after_failure(
        &server,
        "j-3",
        &[
            ("RaftPeerRemoved", Some("openbao")),
            ("RaftPeerRemoved", Some("patroni")),
        ],
    )
    .await;
    assert!(
        took < Duration::from_secs(12),
        "j-3's other rafts took {took:?}"
    );
    let hung_until = failed_at + Duration::from_secs(30);
    while Instant::now() < hung_until {
        assert!(
            removal(&removals(&server, "j-3").await, "ovn").is_none(),
            "OVN's removal is recorded while its server hangs"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let timeouts = metric(
        &metrics,
        r#"stratum_raft_removal_failures_total{raft="ovn",reason="timeout"}"#,
    )
    .await;
    assert!(timeouts >= 2, "OVN's timeouts are counted: {timeouts}");
    rafts.sh("ovn", "resume", &["f-1"]).await;
    server.cleaned("j-3").await;

    watch.checked(8).await;
    let all = [
        ("j-1", 21, &RAFTS[..]),
        ("j-2", 22, &RAFTS[..]),
        ("j-3", 23, &RAFTS[..]),
        ("j-4", 24, &["patroni", "openbao"][..]),
    ];
    stopped_and_out(&rafts, &server, &all).await;
}
