//! The raft adapters against stand-ins of what they call.

use stratum_api::raft::{
    CommandAdapter, OpenBaoAdapter, PatroniSyncobj, RaftAdapter, RaftPeer, Removal,
};
use wiremock::matchers::{body_json, header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

fn peer() -> RaftPeer {
    RaftPeer {
        node_id: "n-msst0002".into(),
        address: "192.0.2.12".into(),
    }
}

#[tokio::test]
async fn openbao_remove_peer_posts_the_server_id_with_the_token() {
    let bao = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/sys/storage/raft/remove-peer"))
        .and(header("X-Vault-Token", "s.root-token"))
        .and(body_json(serde_json::json!({"server_id": "n-msst0002"})))
        .respond_with(ResponseTemplate::new(204))
        .expect(1)
        .mount(&bao)
        .await;
    let a = OpenBaoAdapter::new(&bao.uri(), "s.root-token".into(), None).unwrap();
    assert_eq!(a.remove_peer(&peer()).await.unwrap(), Removal::Removed);
    assert!(
        !format!("{a:?}").contains("s.root-token"),
        "the token never reaches logs"
    );
}

#[tokio::test]
async fn openbao_a_peer_already_gone_counts_as_done() {
    let bao = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(400).set_body_string(
            r#"{"errors":["1 error occurred:\n\t* peer \"n-msst0002\" not found in configuration\n"]}"#,
        ))
        .mount(&bao)
        .await;
    let a = OpenBaoAdapter::new(&bao.uri(), "t".into(), None).unwrap();
    assert_eq!(a.remove_peer(&peer()).await.unwrap(), Removal::AlreadyGone);
}

#[tokio::test]
async fn openbao_failures_are_errors_without_the_token() {
    let bao = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(503).set_body_string(r#"{"errors":["Vault is sealed"]}"#),
        )
        .mount(&bao)
        .await;
    let a = OpenBaoAdapter::new(&bao.uri(), "s.secret".into(), None).unwrap();
    let err = a.remove_peer(&peer()).await.unwrap_err().to_string();
    assert!(err.contains("503") && err.contains("sealed"), "{err}");
    assert!(!err.contains("s.secret"));
    // Nothing listening at all.
    let a = OpenBaoAdapter::new("http://127.0.0.1:1", "s.secret".into(), None).unwrap();
    let err = a.remove_peer(&peer()).await.unwrap_err().to_string();
    assert!(
        err.contains("unreachable") && !err.contains("s.secret"),
        "{err}"
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
    let failing = CommandAdapter::new(vec![vec!["false".into()]]);
    assert!(failing.remove_peer(&peer()).await.is_err());
    // ovs-appctl says so of a server that is not in the raft: done.
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
    let err = missing.remove_peer(&peer()).await.unwrap_err().to_string();
    assert!(err.contains("127"), "{err}");
}

#[tokio::test]
async fn syncobj_admin_counts_only_when_it_says_success() {
    // syncobj_admin exits 0 whatever happened.
    let dir = tempfile::tempdir().unwrap();
    let fake = dir.path().join("syncobj_admin");
    let answer = dir.path().join("answer");
    std::fs::write(
        &fake,
        format!("#!/bin/sh\ncat '{}'\nexit 0\n", answer.display()),
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let a = CommandAdapter::patroni_syncobj(&PatroniSyncobj {
        program: fake.display().to_string(),
        ..Default::default()
    });
    std::fs::write(&answer, "FAIL REMOVE 192.0.2.12:5010\n").unwrap();
    let err = a.remove_peer(&peer()).await.unwrap_err().to_string();
    assert!(err.contains("FAIL REMOVE"), "{err}");
    std::fs::write(&answer, "No response from server\n").unwrap();
    assert!(a.remove_peer(&peer()).await.is_err());
    std::fs::write(&answer, "SUCCESS REMOVE 192.0.2.12:5010\n").unwrap();
    assert_eq!(a.remove_peer(&peer()).await.unwrap(), Removal::Removed);
}

#[tokio::test]
async fn openbao_a_404_page_that_does_not_name_the_peer_is_a_failure() {
    let bao = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(404).set_body_string("404 page not found"))
        .mount(&bao)
        .await;
    let a = OpenBaoAdapter::new(&bao.uri(), "t".into(), None).unwrap();
    assert!(a.remove_peer(&peer()).await.is_err());
    // Another peer's "not found" is not this one's.
    let bao = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(400)
                .set_body_string(r#"{"errors":["peer \"n-other\" not found in configuration"]}"#),
        )
        .mount(&bao)
        .await;
    let a = OpenBaoAdapter::new(&bao.uri(), "t".into(), None).unwrap();
    assert!(a.remove_peer(&peer()).await.is_err());
}
