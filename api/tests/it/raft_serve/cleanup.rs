//! The raft cleanup `serve` runs with an operator's settings: a failed
//! member removed from every raft through its adapter, record-only removals
//! by default, configured commands and the OVN server forms, a kick that was
//! lost, a removal retried.

use super::*;

#[tokio::test]
async fn serve_with_the_readme_settings_removes_a_failed_member_from_every_raft() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let bao = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(REMOVE_PEER))
        .and(header("X-Vault-Token", BAO_TOKEN))
        .and(body_json(json!({"server_id": "n-3"})))
        .respond_with(ResponseTemplate::new(204))
        .expect(1)
        .mount(&bao)
        .await;
    bao_lists(&bao, &["n-1", "n-3"], Some(1), 1).await;
    bao_lists(&bao, &["n-1"], None, 2).await;
    let kicks = d.join("ovs-appctl.calls");
    let appctl = fake_ovs_appctl(
        d,
        &kicks,
        &["ssl:192.0.2.11:6643", "ssl:192.0.2.13:6643"],
        &["ssl:192.0.2.11:6644", "ssl:192.0.2.13:6644"],
    );
    let nb_ctl = d.join("ovnnb_db.ctl");
    let sb_ctl = d.join("ovnsb_db.ctl");
    // syncobj_admin exits 0 whatever happened, and says SUCCESS only when
    // it removed the server, as the real one does. This one says FAIL
    // while the flag file exists; every call is recorded, each -remove
    // with its time.
    let removes = d.join("syncobj_admin.calls");
    let times = d.join("syncobj_admin.calls.times");
    let failing = d.join("syncobj.fail");
    std::fs::write(&failing, "").unwrap();
    let syncobj = fake_syncobj_admin(d, &removes, &["10.0.0.1:2222", "192.0.2.13:2222"]);
    let server = start(
        d,
        &[
            ("STRATUM_OPENBAO_ADDR", bao.uri()),
            ("STRATUM_OPENBAO_TOKEN", BAO_TOKEN.to_owned()),
            ("STRATUM_RAFT_OVN", "kick".to_owned()),
            ("STRATUM_OVS_APPCTL", appctl.display().to_string()),
            ("STRATUM_OVN_NB_CTL", nb_ctl.display().to_string()),
            ("STRATUM_OVN_SB_CTL", sb_ctl.display().to_string()),
            ("STRATUM_RAFT_PATRONI", "syncobj".to_owned()),
            (
                "STRATUM_PATRONI_SYNCOBJ_ADMIN",
                syncobj.display().to_string(),
            ),
            ("STRATUM_PATRONI_RAFT_CONN", "10.0.0.1:2222".to_owned()),
            ("STRATUM_PATRONI_RAFT_PORT", "2222".to_owned()),
            ("STRATUM_RAFT_RETRY_MIN", "200ms".to_owned()),
            ("STRATUM_RAFT_RETRY_MAX", "400ms".to_owned()),
        ],
    )
    .await;
    for (raft, adapter) in [
        ("openbao", "openbao-http"),
        ("ovn", "ovn-kick"),
        ("patroni", "patroni-syncobj"),
    ] {
        server.announces(raft, adapter).await;
    }

    server.admit_three().await;
    server.progress("n-3", "join/raft-patroni").await;
    server.progress("n-3", "join/raft-openbao").await;
    let failed = server
        .join_failed("n-3", "join/raft-ovn", "ovsdb-server: connection refused")
        .await;
    assert_eq!(failed["state"], "failed", "{failed}");
    assert_eq!(failed["failedStep"], "join/raft-ovn", "{failed}");

    // (a) While syncobj_admin fails, the cleanup is not done, and it is
    // tried again with backoff (at least 200 ms apart).
    server
        .eventually("three failed syncobj_admin calls", || async {
            (lines(&times).len() >= 3).then_some(())
        })
        .await;
    let m = server.member("n-3").await;
    let history = server.history("n-3").await;
    assert!(
        m["raftCleanupAt"].is_null(),
        "not cleaned while patroni fails: {m}"
    );
    assert_eq!(m["state"], "failed", "{m}");
    assert!(
        of_type(&history, "RaftCleanupCompleted").is_empty(),
        "{history:?}"
    );
    assert!(
        of_type(&history, "RaftPeerRemoved")
            .iter()
            .all(|e| e["payload"]["raft"] != "patroni"),
        "a FAIL from syncobj_admin records no removal: {history:?}"
    );
    let at: Vec<u128> = lines(&times).iter().map(|t| t.parse().unwrap()).collect();
    for pair in at.windows(2) {
        let gap_ms = (pair[1] - pair[0]) / 1_000_000;
        assert!(gap_ms >= 150, "retried after {gap_ms} ms: {at:?}");
    }
    std::fs::remove_file(&failing).unwrap();
    let m = server.cleaned("n-3").await;
    assert_eq!(m["state"], "failed", "{m}");

    // (b) One remove-peer call, with the server id and the token.
    bao.verify().await;
    let removals: Vec<_> = bao
        .received_requests()
        .await
        .unwrap()
        .into_iter()
        .filter(|r| r.method.as_str() == "POST" && r.url.path() == REMOVE_PEER)
        .collect();
    assert_eq!(removals.len(), 1, "{removals:?}");
    let r = &removals[0];
    assert_eq!(
        r.headers.get("x-vault-token").and_then(|v| v.to_str().ok()),
        Some(BAO_TOKEN)
    );
    assert_eq!(r.body_json::<Value>().unwrap(), json!({"server_id": "n-3"}));

    // (c) Two kicks, one per OVN database, at the default servers, each
    // with ovs-appctl's own timeout, and each database's listing read.
    let calls = lines(&kicks);
    let kicked: Vec<&String> = calls
        .iter()
        .filter(|l| l.contains("cluster/kick"))
        .collect();
    assert_eq!(
        kicked,
        [
            &format!(
                "--timeout=10 -t {} cluster/kick OVN_Northbound ssl:192.0.2.13:6643",
                nb_ctl.display()
            ),
            &format!(
                "--timeout=10 -t {} cluster/kick OVN_Southbound ssl:192.0.2.13:6644",
                sb_ctl.display()
            ),
        ]
    );
    for db in ["OVN_Northbound", "OVN_Southbound"] {
        assert!(
            calls
                .iter()
                .any(|l| l.ends_with(&format!("cluster/status {db}"))),
            "{calls:?}"
        );
    }

    // (d) Failures and a success, each sent to the raft's leader for the
    // peer at the configured port; the listing read at the configured conn.
    let calls = lines(&removes);
    let removes: Vec<&String> = calls.iter().filter(|l| l.contains("-remove")).collect();
    assert!(
        removes.len() >= 4,
        "retried until it succeeded: {removes:?}"
    );
    assert!(
        removes
            .iter()
            .all(|l| *l == "-conn 10.0.0.1:2222 -remove 192.0.2.13:2222"),
        "{removes:?}"
    );
    assert!(
        calls.iter().any(|l| l == "-conn 10.0.0.1:2222 -status"),
        "{calls:?}"
    );

    // (e) Each removal names the adapter that made it; then the completion.
    let history = server.history("n-3").await;
    let removed = of_type(&history, "RaftPeerRemoved");
    assert_eq!(removed.len(), 3, "{history:?}");
    let adapters: BTreeMap<&str, &str> = removed
        .iter()
        .map(|e| {
            assert_eq!(e["payload"]["nodeId"], "n-3", "{e}");
            assert_eq!(e["payload"]["alreadyGone"], json!(false), "{e}");
            (
                e["payload"]["raft"].as_str().unwrap(),
                e["payload"]["adapter"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        adapters,
        BTreeMap::from([
            ("openbao", "openbao-http"),
            ("ovn", "ovn-kick"),
            ("patroni", "patroni-syncobj"),
        ])
    );
    let completed = of_type(&history, "RaftCleanupCompleted");
    assert_eq!(completed.len(), 1, "{history:?}");
    let last_removal = removed.iter().copied().map(position).max().unwrap();
    assert!(
        position(completed[0]) > last_removal,
        "the completion comes after every removal: {history:?}"
    );

    let log = server.log();
    assert!(
        !log.contains(BAO_TOKEN),
        "the OpenBao token never reaches the log:\n{log}"
    );
}

#[tokio::test]
async fn serve_without_raft_settings_records_record_only_removals() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), &[]).await;
    for raft in ["patroni", "openbao", "ovn"] {
        server.announces(raft, "record-only").await;
    }

    server.admit_three().await;
    server.progress("n-3", "join/raft-openbao").await;
    let failed = server
        .join_failed("n-3", "join/raft-patroni", "patroni: no raft leader")
        .await;
    assert_eq!(failed["state"], "failed", "{failed}");
    let m = server.cleaned("n-3").await;
    assert_eq!(m["state"], "failed", "{m}");

    let history = server.history("n-3").await;
    let removed = of_type(&history, "RaftPeerRemoved");
    let rafts: BTreeSet<&str> = removed
        .iter()
        .map(|e| e["payload"]["raft"].as_str().unwrap())
        .collect();
    assert_eq!(removed.len(), 2, "{history:?}");
    assert_eq!(rafts, BTreeSet::from(["openbao", "patroni"]), "{history:?}");
    assert!(
        removed
            .iter()
            .all(|e| e["payload"]["adapter"] == "record-only"),
        "{history:?}"
    );
    assert_eq!(
        of_type(&history, "RaftCleanupCompleted").len(),
        1,
        "{history:?}"
    );
}

#[tokio::test]
async fn serve_runs_configured_commands_and_the_ovn_server_forms_it_is_given() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let kicks = d.join("ovs-appctl.calls");
    let appctl = fake_ovs_appctl(
        d,
        &kicks,
        &["tcp:192.0.2.11:16643", "tcp:[2001:db8::6]:16643"],
        &["n-1", "n-6"],
    );
    let patroni_calls = d.join("patroni.calls");
    let patroni = recorder(d, "etcd-delete-member", &patroni_calls);
    let commands = json!([[
        patroni.display().to_string(),
        "member-remove",
        "{nodeId}",
        "{address}",
        "{host}"
    ]]);
    let server = start(
        d,
        &[
            ("STRATUM_RAFT_OVN", "kick".to_owned()),
            ("STRATUM_OVS_APPCTL", appctl.display().to_string()),
            ("STRATUM_OVN_NB_SERVER", "tcp:{host}:16643".to_owned()),
            ("STRATUM_OVN_SB_SERVER", "{nodeId}".to_owned()),
            ("STRATUM_RAFT_PATRONI_COMMANDS", commands.to_string()),
        ],
    )
    .await;
    server.announces("ovn", "ovn-kick").await;
    server.announces("patroni", "command").await;
    server.announces("openbao", "record-only").await;

    server.admit_three().await;
    // An IPv6 joiner: `{host}` brackets its address.
    server.admit("n-6", "2001:db8::6").await;
    server.progress("n-6", "join/raft-patroni").await;
    server
        .join_failed(
            "n-6",
            "join/raft-ovn",
            "ovsdb-server: cluster/join timed out",
        )
        .await;
    server.cleaned("n-6").await;
    let calls = lines(&kicks);
    let kicked: Vec<&String> = calls
        .iter()
        .filter(|l| l.contains("cluster/kick"))
        .collect();
    assert_eq!(
        kicked,
        [
            "--timeout=10 -t /var/run/ovn/ovnnb_db.ctl cluster/kick OVN_Northbound tcp:[2001:db8::6]:16643",
            "--timeout=10 -t /var/run/ovn/ovnsb_db.ctl cluster/kick OVN_Southbound n-6",
        ]
    );
    assert_eq!(
        lines(&patroni_calls),
        ["member-remove n-6 2001:db8::6 [2001:db8::6]"]
    );
    let adapters: BTreeSet<(String, String)> =
        of_type(&server.history("n-6").await, "RaftPeerRemoved")
            .iter()
            .map(|e| {
                (
                    e["payload"]["raft"].as_str().unwrap().to_owned(),
                    e["payload"]["adapter"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
    assert_eq!(
        adapters,
        BTreeSet::from([
            ("ovn".to_owned(), "ovn-kick".to_owned()),
            ("patroni".to_owned(), "command".to_owned()),
        ])
    );
}

/// OVN's `cluster/kick` prints `started removal` and exits 0 even when the
/// leader then loses leadership and drops the change. Stratum records the
/// removal only once `cluster/status` stops naming the server: while it
/// does, the member stays `removing`, nothing is recorded, and the failure
/// is counted as `not_confirmed`.
#[tokio::test]
async fn a_kick_that_was_lost_is_never_recorded_as_a_removal() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let calls = d.join("ovs-appctl.calls");
    let appctl = fake_ovs_appctl(
        d,
        &calls,
        &["tcp:192.0.2.11:6643", "tcp:192.0.2.13:6643"],
        &["tcp:192.0.2.11:6644", "tcp:192.0.2.13:6644"],
    );
    std::fs::write(d.join("kick-is-lost"), "").unwrap();
    let metrics = format!("127.0.0.1:{}", free_port());
    let server = start(
        d,
        &[
            ("STRATUM_RAFT_OVN", "kick".to_owned()),
            ("STRATUM_OVS_APPCTL", appctl.display().to_string()),
            ("STRATUM_OVN_NB_SERVER", "tcp:{host}:6643".to_owned()),
            ("STRATUM_OVN_SB_SERVER", "tcp:{host}:6644".to_owned()),
            ("STRATUM_RAFT_TIMEOUT", "500ms".to_owned()),
            ("STRATUM_RAFT_RETRY_MIN", "100ms".to_owned()),
            ("STRATUM_RAFT_RETRY_MAX", "200ms".to_owned()),
            ("STRATUM_METRICS_LISTEN", metrics.clone()),
        ],
    )
    .await;
    server.admit_three().await;
    server.progress("n-3", "join/raft-patroni").await;
    server.progress("n-3", "join/raft-openbao").await;
    server.progress("n-3", "join/raft-ovn").await;
    let m = server.member_post("n-3", "join-complete", json!({})).await;
    assert_eq!(m["state"], "active", "{m}");
    server
        .member_post("n-3", "decommission", json!({"reason": "hardware retired"}))
        .await;
    server
        .eventually("three kicks that did not take", || async {
            (lines(&calls)
                .iter()
                .filter(|l| l.contains("cluster/kick"))
                .count()
                >= 3)
                .then_some(())
        })
        .await;
    let m = server.member("n-3").await;
    assert_eq!(m["state"], "removing", "{m}");
    assert!(m["raftCleanupAt"].is_null(), "{m}");
    let history = server.history("n-3").await;
    assert!(
        of_type(&history, "RaftPeerRemoved")
            .iter()
            .all(|e| e["payload"]["raft"] != "ovn"),
        "a kick the listing did not follow records nothing: {history:?}"
    );
    let n = metric(
        &metrics,
        r#"stratum_raft_removal_failures_total{raft="ovn",reason="not_confirmed"}"#,
    )
    .await;
    assert!(n >= 2, "not_confirmed failures are counted: {n}");
    assert!(
        server.log().contains("still names the peer"),
        "the log says why: {}",
        server.log()
    );
    // The kick takes: recorded, and the member decommissioned.
    std::fs::remove_file(d.join("kick-is-lost")).unwrap();
    let m = server.cleaned("n-3").await;
    assert_eq!(m["state"], "decommissioned", "{m}");
    assert_eq!(
        lines(&d.join("OVN_Northbound.servers")),
        ["tcp:192.0.2.11:6643"]
    );
}

/// A removal that takes more than one try is recorded with what its first
/// tries did. n-3 leads Patroni's raft: the first try moves leadership off
/// it, then its `-remove` is refused, and the retry finds n-3 following:
/// `leaderMoved` stays true. n-2's `-remove` is applied but answers past
/// the timeout (killed), and the retry finds n-2 gone: not `alreadyGone`,
/// since the service had asked for it.
#[tokio::test]
async fn a_removal_retried_keeps_what_its_earlier_tries_did() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let calls = d.join("syncobj_admin.calls");
    let failing = d.join("syncobj.fail");
    let syncobj = fake_syncobj_admin(
        d,
        &calls,
        &["192.0.2.13:2222", "10.0.0.1:2222", "192.0.2.12:2222"],
    );
    std::fs::write(&failing, "").unwrap();
    let server = start(
        d,
        &[
            ("STRATUM_RAFT_PATRONI", "syncobj".to_owned()),
            (
                "STRATUM_PATRONI_SYNCOBJ_ADMIN",
                syncobj.display().to_string(),
            ),
            ("STRATUM_PATRONI_RAFT_CONN", "10.0.0.1:2222".to_owned()),
            ("STRATUM_PATRONI_RAFT_PORT", "2222".to_owned()),
            ("STRATUM_RAFT_TIMEOUT", "1s".to_owned()),
            ("STRATUM_RAFT_RETRY_MIN", "200ms".to_owned()),
            ("STRATUM_RAFT_RETRY_MAX", "400ms".to_owned()),
        ],
    )
    .await;
    server.announces("patroni", "patroni-syncobj").await;
    server.admit_three().await;
    server.progress("n-3", "join/raft-patroni").await;
    server.join_failed("n-3", "join/services", "x").await;
    server
        .eventually("a refused -remove of n-3, after the transfer", || async {
            let calls = lines(&calls);
            (calls.iter().any(|c| c.contains("-transfer"))
                && calls.iter().any(|c| c.contains("-remove 192.0.2.13:2222")))
            .then_some(())
        })
        .await;
    assert!(server.member("n-3").await["raftCleanupAt"].is_null());
    std::fs::remove_file(&failing).unwrap();
    server.cleaned("n-3").await;
    let removed = of_type(&server.history("n-3").await, "RaftPeerRemoved")
        .into_iter()
        .cloned()
        .collect::<Vec<_>>();
    assert_eq!(removed.len(), 1, "{removed:?}");
    assert_eq!(removed[0]["payload"]["leaderMoved"], true, "{}", removed[0]);
    assert_eq!(
        removed[0]["payload"]["alreadyGone"], false,
        "{}",
        removed[0]
    );

    // Active n-2 is demoted to compute (out of the rafts); its -remove is
    // applied but answers too late.
    std::fs::write(d.join("syncobj.slow"), "").unwrap();
    let (status, body) = server
        .call(
            reqwest::Client::new()
                .patch(server.url(&format!("{MEMBERS}/n-2")))
                .bearer_auth(ADMIN)
                .json(&json!({"role": "compute", "force": true})),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    server.cleaned("n-2").await;
    assert!(
        !d.join("syncobj.slow").exists(),
        "the slow answer was given"
    );
    let removed = of_type(&server.history("n-2").await, "RaftPeerRemoved")
        .into_iter()
        .find(|e| e["payload"]["raft"] == "patroni")
        .cloned()
        .unwrap();
    assert_eq!(removed["payload"]["alreadyGone"], false, "{removed}");
}
