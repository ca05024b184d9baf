//! A removed peer that comes back into each real raft is noticed, recorded
//! and removed again.

use super::*;

/// A failed member, taken out of every raft, comes back into each: joined
/// back into OpenBao's raft by hand (`bao operator raft join`), into both of
/// OVN's (`ovsdb-tool join-cluster`), and into Patroni's by restarting its
/// raft member with its old settings (it adds itself back). Within 30 s of
/// each, with the default settings, the service raises `raft-peer-returned`,
/// records the return (`RaftPeerReturned`, naming the removal it undoes),
/// removes the member again through the same adapter, once the raft's own
/// listing drops it, and the alarm is cleared; the history, the CLI and the
/// metrics show it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removed_peer_that_comes_back_is_noticed_and_removed_again_in_the_real_rafts() {
    if !available() {
        return;
    }
    let _alone = ONE_CLUSTER_AT_A_TIME.lock().await;
    let rafts = Rafts::up(23).await;
    let dir = tempfile::tempdir().unwrap();
    let metrics = format!("127.0.0.1:{}", free_port());
    let server = serve(&rafts, dir.path(), &[("STRATUM_METRICS_LISTEN", &metrics)]).await;
    let watch = RemovalWatch::start(&rafts, &server);

    joined(&rafts, &server, "j-1", 21, &RAFTS).await;
    server
        .join_failed("j-1", "join/services", "etcd: timeout")
        .await;
    server.cleaned("j-1").await;
    for raft in RAFTS {
        assert!(!rafts.lists(raft, "j-1", 21).await, "j-1 is out of {raft}");
    }

    for (raft, adapter) in [
        ("openbao", "openbao-http"),
        ("ovn", "ovn-kick"),
        ("patroni", "patroni-syncobj"),
    ] {
        let first = removal(&removals(&server, "j-1").await, raft)
            .unwrap_or_else(|| panic!("j-1's removal from {raft}"))
            .clone();
        // The node comes back into the raft.
        match raft {
            "patroni" => {
                rafts.sh(raft, "stop", &["j-1"]).await;
                rafts.sh(raft, "start", &["j-1"]).await;
            }
            _ => {
                rafts.sh(raft, "rejoin", &["j-1"]).await;
            }
        }
        let back_at = Instant::now();
        if raft == "patroni" {
            server
                .eventually("j-1 back in Patroni's raft", || async {
                    rafts.lists(raft, "j-1", 21).await.then_some(())
                })
                .await;
        }
        assert!(rafts.lists(raft, "j-1", 21).await, "j-1 is back in {raft}");

        // Within 30 s: the alarm, and the return recorded.
        let alarm = server
            .eventually(&format!("raft-peer-returned for j-1 in {raft}"), || async {
                let (status, body) = server.get("/v1/admin/alarms").await;
                assert_eq!(status, 200, "{body}");
                body["items"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|a| {
                        a["name"] == "raft-peer-returned"
                            && a["nodeId"] == "j-1"
                            && a["message"]
                                .as_str()
                                .is_some_and(|m| m.contains(&format!("the {raft} raft")))
                    })
                    .cloned()
            })
            .await;
        let noticed = back_at.elapsed();
        assert!(noticed < Duration::from_secs(30), "{raft}: {noticed:?}");
        let message = alarm["message"].as_str().unwrap();
        assert!(
            message.contains(&format!("position {}", position(&first))),
            "the alarm names the removal it follows: {alarm}"
        );

        // Removed again, through the same adapter, once the listing drops it.
        let again = server
            .eventually(&format!("j-1 out of {raft} again"), || async {
                let history = server.history("j-1").await;
                let back = of_type(&history, "RaftPeerReturned")
                    .into_iter()
                    .find(|e| e["payload"]["raft"] == raft)?
                    .clone();
                let again = of_type(&history, "RaftPeerRemoved")
                    .into_iter()
                    .find(|e| e["payload"]["raft"] == raft && position(e) > position(&back))?
                    .clone();
                Some((back, again))
            })
            .await;
        let (back, again) = again;
        eprintln!(
            "j-1 back in {raft}: noticed in {noticed:?}, out again in {:?}",
            back_at.elapsed()
        );
        assert_eq!(
            back["payload"]["removedPosition"],
            position(&first),
            "{back}"
        );
        assert_eq!(back["payload"]["removedAt"], first["occurredAt"], "{back}");
        assert_eq!(back["causation"], position(&first), "{back}");
        assert_eq!(back["principal"], "stratum", "{back}");
        assert_eq!(again["payload"]["adapter"], adapter, "{again}");
        assert_eq!(again["payload"]["alreadyGone"], false, "{again}");
        assert_eq!(
            again["causation"],
            position(&back),
            "the removal names the return: {again}"
        );
        assert!(
            !rafts.lists(raft, "j-1", 21).await,
            "j-1 is out of {raft} again"
        );
        let m = server.cleaned("j-1").await;
        assert_eq!(m["state"], "failed", "{m}");
        let (_, alarms) = server.get("/v1/admin/alarms?active=true").await;
        assert!(
            !alarms["items"]
                .as_array()
                .unwrap()
                .iter()
                .any(|a| a["name"] == "raft-peer-returned"),
            "the alarm is cleared by the removal again: {alarms}"
        );
        // What an operator does about it: the node stops its raft member.
        rafts.sh(raft, "stop", &["j-1"]).await;
        assert!(
            metric(
                &metrics,
                &format!(r#"stratum_raft_peer_returns_total{{raft="{raft}"}}"#)
            )
            .await
                >= 1
        );
    }

    // The CLI shows the returns in the member's history and the alarms.
    let cli = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_stratum"))
            .args(["--server", &server.base])
            .args(args)
            .env("STRATUM_TOKEN", ADMIN)
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let history = cli(&["members", "history", "j-1"]);
    for raft in RAFTS {
        assert!(
            history.contains(&format!(
                "back in the {raft} raft after its removal at position"
            )),
            "{history}"
        );
    }
    assert!(
        history.contains("out of the openbao raft (openbao-http)"),
        "{history}"
    );
    let alarms = cli(&["alarms"]);
    assert_eq!(alarms.matches("raft-peer-returned").count(), 3, "{alarms}");

    watch.checked(6).await;
    rafts
        .assert_only(&[("f-1", 11), ("f-2", 12), ("f-3", 13)])
        .await;
}
