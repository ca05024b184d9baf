//! The raft adapters against stand-ins of what they call, for the faults
//! the real rafts cannot be made to show at will (`real_rafts/` runs
//! them against the real OpenBao, OVN and Patroni).

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use stratum_api::raft::{
    CommandAdapter, Failure, OpenBaoAdapter, OvnKick, OvnKickAdapter, PatroniSyncobj,
    PatroniSyncobjAdapter, RaftAdapter, RaftPeer, Removal,
};
use wiremock::matchers::{body_json, header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::binary::{fake_ovs_appctl, fake_syncobj_admin, lines};

const TIMEOUT: Duration = Duration::from_millis(600);

fn peer() -> RaftPeer {
    RaftPeer {
        node_id: "n-msst0002".into(),
        address: "192.0.2.12".into(),
    }
}

/// OpenBao's raft configuration names `ids` (`times` times, or always).
async fn lists(bao: &MockServer, ids: &[&str], times: Option<u64>, priority: u8) {
    let servers: Vec<Value> = ids
        .iter()
        .map(|id| json!({"node_id": id, "address": "192.0.2.1:8201", "leader": *id == "n-leader", "voter": true}))
        .collect();
    let mock = Mock::given(method("GET"))
        .and(path("/v1/sys/storage/raft/configuration"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"data": {"config": {"servers": servers}}})),
        )
        .with_priority(priority);
    match times {
        Some(n) => mock.up_to_n_times(n).mount(bao).await,
        None => mock.mount(bao).await,
    }
}

fn bao(uri: &str, token: &str) -> OpenBaoAdapter {
    OpenBaoAdapter::new(uri, token.into(), None, TIMEOUT).unwrap()
}

#[tokio::test]
async fn openbao_removes_a_listed_peer_and_waits_until_the_configuration_drops_it() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/sys/storage/raft/remove-peer"))
        .and(header("X-Vault-Token", "s.root-token"))
        .and(body_json(json!({"server_id": "n-msst0002"})))
        .respond_with(ResponseTemplate::new(204))
        .expect(1)
        .mount(&server)
        .await;
    // Listed before the call and once after it, then gone.
    lists(&server, &["n-leader", "n-msst0002"], Some(2), 1).await;
    lists(&server, &["n-leader"], None, 2).await;
    let a = bao(&server.uri(), "s.root-token");
    assert_eq!(a.remove_peer(&peer()).await.unwrap(), Removal::Removed);
    assert!(
        !format!("{a:?}").contains("s.root-token"),
        "the token never reaches logs"
    );
}

#[tokio::test]
async fn openbao_a_peer_the_configuration_does_not_name_is_already_gone_without_a_call() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(204))
        .expect(0)
        .mount(&server)
        .await;
    lists(&server, &["n-leader", "n-other"], None, 1).await;
    let a = bao(&server.uri(), "t");
    assert_eq!(a.remove_peer(&peer()).await.unwrap(), Removal::AlreadyGone);
}

#[tokio::test]
async fn openbao_a_204_the_configuration_does_not_follow_is_not_a_removal() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(204))
        .mount(&server)
        .await;
    lists(&server, &["n-leader", "n-msst0002"], None, 1).await;
    let err = bao(&server.uri(), "t")
        .remove_peer(&peer())
        .await
        .unwrap_err();
    assert_eq!(err.failure, Failure::NotConfirmed, "{err}");
}

#[tokio::test]
async fn openbao_failures_are_errors_by_reason_without_the_token() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(
            ResponseTemplate::new(503).set_body_string(r#"{"errors":["Vault is sealed"]}"#),
        )
        .mount(&server)
        .await;
    let err = bao(&server.uri(), "s.secret")
        .remove_peer(&peer())
        .await
        .unwrap_err();
    assert_eq!(err.failure, Failure::Refused);
    assert!(
        err.message.contains("503") && err.message.contains("sealed"),
        "{err}"
    );
    assert!(!err.message.contains("s.secret"));
    // A refused removal of a listed peer keeps OpenBao's whole answer.
    let server = MockServer::start().await;
    lists(&server, &["n-leader", "n-msst0002"], None, 1).await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(403)
                .set_body_string(r#"{"errors":["1 error occurred:\n\t* permission denied\n\n"]}"#),
        )
        .mount(&server)
        .await;
    let err = bao(&server.uri(), "t")
        .remove_peer(&peer())
        .await
        .unwrap_err();
    assert_eq!(err.failure, Failure::Refused);
    assert!(
        err.message.contains("403") && err.message.contains("permission denied"),
        "{err}"
    );
    // Nothing listening at all.
    let err = bao("http://127.0.0.1:1", "s.secret")
        .remove_peer(&peer())
        .await
        .unwrap_err();
    assert_eq!(err.failure, Failure::Unreachable, "{err}");
    assert!(!err.message.contains("s.secret"), "{err}");
    // A 404 page from a wrong address is not a configuration.
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(200).set_body_string("<html>hello</html>"))
        .mount(&server)
        .await;
    let err = bao(&server.uri(), "t")
        .remove_peer(&peer())
        .await
        .unwrap_err();
    assert_eq!(err.failure, Failure::Unreadable, "{err}");
}

#[tokio::test]
async fn openbao_that_does_not_answer_times_out() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(200).set_delay(Duration::from_secs(5)))
        .mount(&server)
        .await;
    let started = Instant::now();
    let err = bao(&server.uri(), "t")
        .remove_peer(&peer())
        .await
        .unwrap_err();
    assert_eq!(err.failure, Failure::Timeout, "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn command_adapters_run_argument_vectors_with_placeholders() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("kicked");
    let a = CommandAdapter::new(vec![
        vec![
            "sh".into(),
            "-c".into(),
            "echo \"$0 $1\" >> \"$2\"".into(),
            "{nodeId}".into(),
            "{address}".into(),
            out.display().to_string(),
        ],
        vec!["true".into()],
    ]);
    assert_eq!(a.remove_peer(&peer()).await.unwrap(), Removal::Removed);
    assert_eq!(
        std::fs::read_to_string(&out).unwrap(),
        "n-msst0002 192.0.2.12\n"
    );
    // A placeholder is one argument however it is spelled: no shell sees it.
    let hostile = RaftPeer {
        node_id: "n-1; rm -rf /".into(),
        address: "x".into(),
    };
    assert_eq!(a.remove_peer(&hostile).await.unwrap(), Removal::Removed);
    assert!(std::fs::read_to_string(&out)
        .unwrap()
        .contains("n-1; rm -rf / x"));
    // A failure keeps the tool's whole message, every line of it.
    let failing = CommandAdapter::new(vec![vec![
        "sh".into(),
        "-c".into(),
        "echo 'first line' >&2; echo 'the reason' >&2; exit 3".into(),
    ]]);
    let err = failing.remove_peer(&peer()).await.unwrap_err();
    assert_eq!(err.failure, Failure::Refused);
    assert!(err.message.contains("first line | the reason"), "{err}");
    let gone = CommandAdapter::new(vec![vec![
        "sh".into(),
        "-c".into(),
        "echo 'unknown server' >&2; exit 2".into(),
    ]]);
    assert_eq!(
        gone.remove_peer(&peer()).await.unwrap(),
        Removal::AlreadyGone
    );
    // A program that cannot run is a failure, even when its shell says
    // "not found".
    let missing = CommandAdapter::new(vec![vec![
        "sh".into(),
        "-c".into(),
        "no-such-raft-tool {nodeId}".into(),
    ]]);
    let err = missing.remove_peer(&peer()).await.unwrap_err();
    assert_eq!(err.failure, Failure::Unreachable, "{err}");
    assert!(err.message.contains("127"), "{err}");
}

#[tokio::test]
async fn a_tool_that_hangs_is_killed_at_the_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let pid = dir.path().join("pid");
    // A wrapper whose own child hangs: both go at the timeout.
    let a = CommandAdapter::new(vec![vec![
        "sh".into(),
        "-c".into(),
        format!("sleep 30 & echo $! > {}; wait", pid.display()),
    ]])
    .with_timeout(Duration::from_millis(300));
    let started = Instant::now();
    let err = a.remove_peer(&peer()).await.unwrap_err();
    assert_eq!(err.failure, Failure::Timeout, "{err}");
    assert!(started.elapsed() < Duration::from_secs(2));
    let pid = std::fs::read_to_string(&pid).unwrap();
    // Killed, and reaped soon after.
    let mut gone = false;
    for _ in 0..40 {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", pid.trim()));
        if stat.map_or(true, |s| s.contains(") Z ")) {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(gone, "the hung tool's child {pid} still runs");
}

fn ovn(dir: &std::path::Path, appctl: &std::path::Path) -> OvnKickAdapter {
    OvnKickAdapter::new(
        OvnKick {
            appctl: appctl.display().to_string(),
            nb_ctl: dir.join("nb.ctl").display().to_string(),
            sb_ctl: dir.join("sb.ctl").display().to_string(),
            nb_server: "tcp:{host}:6643".into(),
            sb_server: "tcp:{host}:6644".into(),
        },
        TIMEOUT,
    )
}

#[tokio::test]
async fn ovn_a_kick_the_listing_does_not_follow_is_not_a_removal() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let calls = d.join("calls");
    let appctl = fake_ovs_appctl(
        d,
        &calls,
        &["tcp:192.0.2.11:6643", "tcp:192.0.2.12:6643"],
        &["tcp:192.0.2.11:6644"],
    );
    // `started removal`, exit 0, and the leader lost leadership: the server
    // is still listed.
    std::fs::write(d.join("kick-is-lost"), "").unwrap();
    let a = ovn(d, &appctl);
    let err = a.remove_peer(&peer()).await.unwrap_err();
    assert_eq!(err.failure, Failure::NotConfirmed, "{err}");
    assert!(err.message.contains("OVN_Northbound"), "{err}");
    // Once the kick takes: removed from the Northbound raft; the
    // Southbound one never named it, so it is not kicked there.
    std::fs::remove_file(d.join("kick-is-lost")).unwrap();
    assert_eq!(a.remove_peer(&peer()).await.unwrap(), Removal::Removed);
    let kicks: Vec<String> = lines(&calls)
        .into_iter()
        .filter(|l| l.contains("kick"))
        .collect();
    assert!(
        kicks
            .iter()
            .all(|k| k.contains("OVN_Northbound tcp:192.0.2.12:6643")),
        "{kicks:?}"
    );
    // Gone from both: already gone, with no kick.
    assert_eq!(a.remove_peer(&peer()).await.unwrap(), Removal::AlreadyGone);
    let after: Vec<String> = lines(&calls)
        .into_iter()
        .filter(|l| l.contains("kick"))
        .collect();
    assert_eq!(after.len(), kicks.len());
}

#[tokio::test]
async fn ovn_a_server_that_is_no_cluster_member_is_no_listing() {
    let dir = tempfile::tempdir().unwrap();
    let appctl = crate::binary::program(
        dir.path(),
        "ovs-appctl",
        "printf 'Name: OVN_Northbound\\nStatus: leaving cluster\\nServers:\\n    a (a at tcp:192.0.2.12:6643)\\n'",
    );
    let err = ovn(dir.path(), &appctl)
        .remove_peer(&peer())
        .await
        .unwrap_err();
    assert_eq!(err.failure, Failure::Unreadable, "{err}");
    assert!(err.message.contains("not a cluster member"), "{err}");
}

#[tokio::test]
async fn syncobj_a_fail_remove_of_a_listed_peer_is_refused_and_an_absent_one_is_gone() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let calls = d.join("calls");
    let fake = fake_syncobj_admin(d, &calls, &["192.0.2.11:5010", "192.0.2.12:5010"]);
    let a = PatroniSyncobjAdapter::new(
        PatroniSyncobj {
            program: fake.display().to_string(),
            conns: vec!["192.0.2.12:5010".into(), "192.0.2.11:5010".into()],
            port: 5010,
        },
        TIMEOUT,
    );
    std::fs::write(d.join("syncobj.fail"), "").unwrap();
    let err = a.remove_peer(&peer()).await.unwrap_err();
    assert_eq!(err.failure, Failure::Refused, "{err}");
    assert!(err.message.contains("FAIL REMOVE"), "{err}");
    // The peer's own address is never asked about itself.
    assert!(
        lines(&calls)
            .iter()
            .all(|l| !l.starts_with("-conn 192.0.2.12:5010")),
        "{:?}",
        lines(&calls)
    );
    std::fs::remove_file(d.join("syncobj.fail")).unwrap();
    assert_eq!(a.remove_peer(&peer()).await.unwrap(), Removal::Removed);
    // Not in the raft: done, with no -remove (the real one says FAIL
    // REMOVE of an absent peer forever).
    let removes = lines(&calls)
        .iter()
        .filter(|l| l.contains("-remove"))
        .count();
    assert_eq!(a.remove_peer(&peer()).await.unwrap(), Removal::AlreadyGone);
    assert_eq!(
        lines(&calls)
            .iter()
            .filter(|l| l.contains("-remove"))
            .count(),
        removes
    );
}
