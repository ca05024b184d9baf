//! Recorded logs, imported into each backend, load into the same read
//! models as replaying them in memory.

use stratum_replay_tests::{read_log, render, replay, root};
use stratum_store as store;

#[tokio::test]
async fn recorded_logs_replay_the_same_on_both_backends() {
    let mut logs: Vec<_> = std::fs::read_dir(root().join("logs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "postcard"))
        .collect();
    logs.sort();
    assert!(logs.len() >= 5, "the membership log and four upgrade logs");
    for log in logs {
        same_on_both_backends(&log).await;
    }
}

async fn same_on_both_backends(log: &std::path::Path) {
    let events = read_log(log).unwrap();
    let expected = render(&replay(&events));
    for db in stratum_api::testing::each_backend().await {
        let s = store::connect(&db.url).await.unwrap();
        let mut tx = s.begin_write().await.unwrap();
        tx.append(&events).await.unwrap();
        tx.commit().await.unwrap();
        let rm = stratum_api::command::load(s.clone(), None).await.unwrap();
        assert_eq!(render(&rm), expected, "{} {}", log.display(), db.backend);
        // And the rows a rebuild writes are the rows the fold renders.
        s.replace_read_models(&rm.all_rows(), rm.state.position)
            .await
            .unwrap();
        let stored = s.read_models().await.unwrap();
        let rebuilt = store::StoredReadModels::from_changes(&rm.all_rows(), rm.state.position);
        assert_eq!(stored, rebuilt, "{} {}", log.display(), db.backend);
    }
}
