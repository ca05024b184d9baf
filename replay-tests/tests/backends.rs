//! Recorded logs, imported into each backend, load into the same read
//! models as replaying them in memory.

use stratum_api::store;
use stratum_replay_tests::{read_log, render, replay, root};

#[tokio::test]
async fn recorded_logs_replay_the_same_on_both_backends() {
    let events = read_log(&root().join("logs/membership.postcard")).unwrap();
    let expected = render(&replay(&events));
    for db in stratum_api::testing::each_backend().await {
        let s = store::connect(&db.url).await.unwrap();
        let mut tx = s.begin_write().await.unwrap();
        tx.append(&events).await.unwrap();
        tx.commit().await.unwrap();
        let rm = stratum_api::command::load(s.clone(), None).await.unwrap();
        assert_eq!(render(&rm), expected, "{}", db.backend);
        // And the rows a rebuild writes are the rows the fold renders.
        s.replace_read_models(&rm.all_rows(), rm.state.position)
            .await
            .unwrap();
        let stored = s.read_models().await.unwrap();
        let rebuilt = store::StoredReadModels::from_changes(&rm.all_rows(), rm.state.position);
        assert_eq!(stored, rebuilt, "{}", db.backend);
    }
}
