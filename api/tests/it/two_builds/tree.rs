//! A build that keeps no Merkle tree writes beside this one, and no proof is
//! a 500.

use super::*;

/// The build the upgrade of issue 32 was first tried from: it keeps no
/// Merkle tree and runs on schema 5.
const BEFORE_THE_TREE: &str = "70370d0dae22a4f3696fff990a6ba562c919aa2c";

#[tokio::test]
async fn a_build_that_keeps_no_tree_writes_600_events_beside_this_one_and_no_proof_is_a_500() {
    let Some(db) = stratum_store::testing::postgres().await else {
        return; // no PostgreSQL here, and none required
    };
    let old = previous(BEFORE_THE_TREE);
    let dir = tempfile::tempdir().unwrap();
    let url = db.url.clone();
    let env = [("STRATUM_DATABASE_URL", url.clone())];
    let a = start_program(&old, &place(dir.path(), "old"), None, &[], &env).await;
    for i in 0..10 {
        a.admit(&format!("n-{i}"), &format!("10.1.0.{}", i + 1))
            .await;
    }
    // This build starts beside it (and migrates the schema).
    let b = start(&place(dir.path(), "new"), &env).await;
    let proof = |to: u64| format!("/v1/log/consistency?from=10&to={to}");
    let mut head = b.get("/readyz").await.1["position"].as_u64().unwrap();
    let mut answered = std::collections::BTreeMap::new();
    // The old build writes 600 events; this one is asked for proofs
    // meanwhile, and the log verified.
    for i in 0..600u32 {
        a.admit(
            &format!("m-{i}"),
            &format!("10.2.{}.{}", i / 200, i % 200 + 1),
        )
        .await;
        head += 1;
        if i % 50 == 49 {
            // A consistency proof, an inclusion proof and the first tile
            // of leaves, up to the head this replica has folded: served,
            // or 503 while the tree catches up.
            let seen = b.get("/readyz").await.1["position"].as_u64().unwrap();
            for path in [
                proof(seen),
                format!("/v1/admin/events/5/proof?size={seen}"),
                "/v1/log/tile/0/000.p/5".to_owned(),
            ] {
                let (status, body) = b.get(&path).await;
                assert!(status == 200 || status == 503, "{path}: {status}: {body}");
                *answered.entry(status).or_insert(0) += 1;
            }
            let out = on_host(THIS_BUILD.as_ref(), &url, &["events", "verify"]);
            assert_eq!(out.status.code(), Some(0), "{}", text(&out));
            assert!(
                String::from_utf8_lossy(&out.stdout).starts_with("verified:"),
                "{}",
                text(&out)
            );
            assert!(!text(&out).contains("missing"), "{}", text(&out));
        }
    }
    eprintln!("proofs while the old build wrote: {answered:?}");
    assert!(
        answered.get(&200).is_some_and(|n| *n > 0),
        "never served: {answered:?}"
    );
    // Once it stops, the tree is whole without a restart.
    stop(a).await;
    let (status, body) = b
        .eventually("a proof over everything", || async {
            let (status, body) = b.get(&proof(head)).await;
            assert_ne!(status, 500, "{body}");
            (status == 200).then_some((status, body))
        })
        .await;
    assert_eq!(status, 200, "{body}");
    let out = on_host(THIS_BUILD.as_ref(), &url, &["events", "verify"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("covers the events before"),
        "the tree is whole: {}",
        text(&out)
    );
    clean(THIS_BUILD.as_ref(), &url);
    stop(b).await;
}
