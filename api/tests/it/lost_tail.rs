//! A PostgreSQL failover that loses acknowledged events: an asynchronous
//! standby promoted before it received the last commits. On one database
//! the promoted standby is made as it would hold the log: the events after
//! a position gone, with the kept answers and snapshots written after
//! them, and the read models as they stood there. Two `stratum serve`
//! replicas held the lost tail; one of them never writes again. Neither
//! may go on serving the lost events, answer 500, or need a restart.

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use sqlx::Connection;

use crate::replicas::serve;
use crate::support::{postgres, ADMIN_TOKEN};

const MEMBERS: &str = "/v1/admin/cluster/members";

/// Makes the database what a standby that received the log up to `keep`
/// holds once promoted.
async fn lose_the_tail_after(url: &str, keep: u64) {
    let store = stratum_store::connect(url).await.unwrap();
    let at = store.read_after(keep - 1, 1).await.unwrap();
    let hash = at[0].hash;
    let mut c = sqlx::PgConnection::connect(url).await.unwrap();
    let mut tx = c.begin().await.unwrap();
    for table in ["events", "idempotency", "rm_snapshots"] {
        sqlx::query(&format!("DELETE FROM {table} WHERE position > $1"))
            .bind(keep as i64)
            .execute(&mut *tx)
            .await
            .unwrap();
    }
    sqlx::query("UPDATE log_head SET position = $1, hash = $2 WHERE id = 1")
        .bind(keep as i64)
        .bind(hash.to_vec())
        .execute(&mut *tx)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    // The read models as they stood at `keep`: the standby's own rows.
    let rm = stratum_api::command::load(store.clone(), Some(keep))
        .await
        .unwrap();
    store
        .replace_read_models(&rm.all_rows(), keep)
        .await
        .unwrap();
}

async fn get(client: &reqwest::Client, base: &str, path: &str) -> (u16, Value) {
    let res = client
        .get(format!("{base}{path}"))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .unwrap();
    let status = res.status().as_u16();
    (status, res.json().await.unwrap_or(Value::Null))
}

async fn admit(client: &reqwest::Client, base: &str, n: u32) -> (u16, Value) {
    let res = client
        .post(format!("{base}{MEMBERS}"))
        .bearer_auth(ADMIN_TOKEN)
        .json(&json!({
            "nodeId": format!("n-{n}"),
            "role": "compute",
            "mgmtIp": format!("10.9.0.{n}"),
        }))
        .send()
        .await
        .unwrap();
    let status = res.status().as_u16();
    (status, res.json().await.unwrap_or(Value::Null))
}

/// Waits until `ok` holds of a replica, or fails after `within`.
async fn eventually<F, Fut>(within: Duration, what: &str, mut ok: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), String>>,
{
    let start = Instant::now();
    loop {
        match ok().await {
            Ok(()) => return,
            Err(e) if start.elapsed() > within => panic!("{what}: {e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

fn divergences(metrics: &str) -> u64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix("stratum_log_divergences_total "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn replicas_that_served_a_lost_tail_reload_what_the_database_holds() {
    let Some(db) = postgres().await else { return };
    let (a, b) = tokio::join!(serve(&db.url), serve(&db.url));
    let client = reqwest::Client::new();
    for n in 1..=4 {
        assert_eq!(admit(&client, &a.base, n).await.0, 201);
    }
    let (_, ready) = get(&client, &a.base, "/readyz").await;
    let keep = ready["position"].as_u64().unwrap();
    // The tail the failover loses: acknowledged, and served by both.
    for n in 5..=8 {
        assert_eq!(admit(&client, &a.base, n).await.0, 201);
    }
    let (status, _) = get(&client, &b.base, &format!("{MEMBERS}/n-8")).await;
    assert_eq!(status, 200, "b serves the tail before the failover");
    let (_, tail) = get(
        &client,
        &a.base,
        &format!("/v1/admin/events?after={keep}&limit=1000"),
    )
    .await;
    let lost: Vec<Value> = tail["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| json!({"position": e["position"], "hash": e["hash"]}))
        .collect();
    let last = lost.last().unwrap()["position"].as_u64().unwrap();

    lose_the_tail_after(&db.url, keep).await;

    // The replica that never writes notices by itself, within seconds:
    // the lost members are gone, and it is ready at the database's head.
    eventually(Duration::from_secs(10), "b reloads", || async {
        let (status, body) = get(&client, &b.base, &format!("{MEMBERS}/n-8")).await;
        if status != 404 {
            return Err(format!("n-8 answers {status}: {body}"));
        }
        let (status, body) = get(&client, &b.base, "/readyz").await;
        match (status, body["position"].as_u64()) {
            // At the database's head, or past the alarm that records the
            // loss, if it was raised already.
            (200, Some(p)) if p == keep || p == keep + 1 => Ok(()),
            _ => Err(format!("readyz {status}: {body}")),
        }
    })
    .await;
    for n in 5..=8 {
        let (status, body) = get(&client, &b.base, &format!("{MEMBERS}/n-{n}")).await;
        assert_eq!(status, 404, "b still serves the lost n-{n}: {body}");
    }

    // The loss is recorded once, whichever replica noticed first: the
    // log-events-lost alarm names the range, and its event lists the lost
    // events' hashes as the replicas held them.
    let alarm_of = |alarms: &Value| {
        alarms["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|a| a["name"] == "log-events-lost")
            .cloned()
            .collect::<Vec<Value>>()
    };
    eventually(Duration::from_secs(10), "the alarm is raised", || async {
        let (_, alarms) = get(&client, &b.base, "/v1/admin/alarms").await;
        match alarm_of(&alarms).as_slice() {
            [_] => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    let (_, alarms) = get(&client, &b.base, "/v1/admin/alarms").await;
    let alarm = &alarm_of(&alarms)[0];
    let message = alarm["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("events {} to {last} were lost", keep + 1))
            && message.contains(&format!("ended at position {keep}")),
        "{alarm}"
    );
    assert!(alarm["clearedAt"].is_null(), "{alarm}");
    let (_, recorded) = get(
        &client,
        &b.base,
        "/v1/admin/events?type=EventsLost&limit=1000",
    )
    .await;
    let recorded = recorded["events"].as_array().unwrap();
    assert_eq!(recorded.len(), 1, "recorded once: {recorded:?}");
    let payload = &recorded[0]["payload"];
    assert_eq!(payload["first"], keep + 1, "{payload}");
    assert_eq!(payload["last"], last, "{payload}");
    assert_eq!(payload["databasePosition"], keep, "{payload}");
    assert_eq!(payload["lost"], Value::Array(lost.clone()), "{payload}");
    assert_eq!(recorded[0]["principal"], "stratum", "{payload}");
    let after_alarm = recorded[0]["position"].as_u64().unwrap();
    assert_eq!(
        after_alarm,
        keep + 1,
        "the alarm took the first free position"
    );
    let (_, listed) = get(&client, &b.base, MEMBERS).await;
    let items = listed["items"].as_array().cloned().unwrap_or_default();
    assert!(
        items.iter().all(|m| {
            let id = m["nodeId"].as_str().unwrap_or_default();
            !["n-5", "n-6", "n-7", "n-8"].contains(&id)
        }),
        "b lists a lost member: {listed}"
    );

    // The replica that writes next answers no 500: its write is decided
    // against the database's log and takes the position after it.
    let (status, body) = admit(&client, &a.base, 8).await;
    assert_eq!(status, 201, "{body}");
    let (_, ready) = get(&client, &a.base, "/readyz").await;
    assert_eq!(ready["position"].as_u64(), Some(after_alarm + 1), "{ready}");
    // Both now serve the new n-8, which the other replica folds in.
    eventually(Duration::from_secs(10), "b follows", || async {
        let (status, body) = get(&client, &b.base, &format!("{MEMBERS}/n-8")).await;
        match (status, body["mgmtIp"].as_str()) {
            (200, Some("10.9.0.8")) => Ok(()),
            _ => Err(format!("n-8 answers {status}: {body}")),
        }
    })
    .await;
    for n in 5..=7 {
        let (status, _) = get(&client, &a.base, &format!("{MEMBERS}/n-{n}")).await;
        assert_eq!(status, 404, "a still serves the lost n-{n}");
    }

    // What both serve is what a replica that never saw the lost tail
    // serves: the same membership, generation and all.
    let fresh = serve(&db.url).await;
    let (_, truth) = get(&client, &fresh.base, "/v1/admin/cluster/membership").await;
    for replica in [&a, &b] {
        let (_, seen) = get(&client, &replica.base, "/v1/admin/cluster/membership").await;
        assert_eq!(seen, truth, "{}", replica.base);
    }
    // And each said so: an ERROR in its log, and the count in /metrics.
    for replica in [&a, &b] {
        let text = client
            .get(format!("{}/metrics", replica.metrics))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert!(divergences(&text) >= 1, "{}: {text}", replica.base);
    }
}

/// A snapshot is only trusted for the log it was taken of: one taken of
/// events the database no longer holds (a snapshot written to the old
/// primary as the failover happened) is never used, even at a position
/// the new log has reached again with other events.
#[tokio::test]
async fn a_snapshot_of_another_log_at_the_same_position_is_ignored() {
    use stratum_api::command::{state_at, CommandBus};
    use stratum_store::EventStore;

    async fn admit_all(store: std::sync::Arc<dyn EventStore>, nodes: &[&str]) {
        let bus = CommandBus::start(store).await.unwrap();
        for (i, n) in nodes.iter().enumerate() {
            bus.execute(crate::support::admit_request(
                n,
                &format!("10.8.0.{}", i + 1),
            ))
            .await
            .unwrap()
            .committed()
            .unwrap();
        }
    }
    for (lost, kept) in [(
        stratum_store::testing::sqlite(),
        stratum_store::testing::sqlite(),
    )]
    .into_iter()
    .chain(
        match (
            stratum_store::testing::postgres().await,
            stratum_store::testing::postgres().await,
        ) {
            (Some(a), Some(b)) => Some((a, b)),
            _ => None,
        },
    ) {
        let old = stratum_store::connect(&lost.url).await.unwrap();
        let new = stratum_store::connect(&kept.url).await.unwrap();
        admit_all(old.clone(), &["lost-1", "lost-2", "lost-3"]).await;
        admit_all(new.clone(), &["kept-1", "kept-2", "kept-3"]).await;
        let at = new.head().await.unwrap().position;
        assert_eq!(old.head().await.unwrap().position, at);
        // The old log's state at that position, kept as a snapshot in the
        // new log's database.
        let stale = state_at(old.clone(), at).await.unwrap();
        assert!(stale.state.membership.members.contains_key("lost-1"));
        new.put_snapshot(at, &stale.snapshot()).await.unwrap();

        let got = state_at(new.clone(), at).await.unwrap();
        let members = &got.state.membership.members;
        assert!(
            members.contains_key("kept-1") && !members.contains_key("lost-1"),
            "{}: the stale snapshot was used: {:?}",
            kept.backend,
            members.keys().collect::<Vec<_>>()
        );
    }
}
