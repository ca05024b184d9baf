//! The `stratum` binary: verify, export and replay.

use std::process::Command;

use crate::membership::scenario;
use crate::support::{each_backend, spawn_app};

fn stratum(args: &[&str], db_url: &str) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_stratum"))
        .args(args)
        .env("STRATUM_DATABASE_URL", db_url)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

async fn exec(db_url: &str, sql: &str) {
    use sqlx::Connection;
    if db_url.starts_with("sqlite") {
        let mut c = sqlx::SqliteConnection::connect(db_url).await.unwrap();
        sqlx::query(sql).execute(&mut c).await.unwrap();
    } else {
        let mut c = sqlx::PgConnection::connect(db_url).await.unwrap();
        sqlx::query(sql).execute(&mut c).await.unwrap();
    }
}

/// Flips the lowest bit of the first payload byte of one event.
async fn flip_payload_byte(db_url: &str, position: u64) {
    use sqlx::Connection;
    let sel = format!("SELECT payload FROM events WHERE position = {position}");
    let upd = "UPDATE events SET payload = $1 WHERE position = $2";
    if db_url.starts_with("sqlite") {
        let mut c = sqlx::SqliteConnection::connect(db_url).await.unwrap();
        let mut b: Vec<u8> = sqlx::query_scalar(&sel).fetch_one(&mut c).await.unwrap();
        b[0] ^= 1;
        sqlx::query(upd)
            .bind(b)
            .bind(position as i64)
            .execute(&mut c)
            .await
            .unwrap();
    } else {
        let mut c = sqlx::PgConnection::connect(db_url).await.unwrap();
        let mut b: Vec<u8> = sqlx::query_scalar(&sel).fetch_one(&mut c).await.unwrap();
        b[0] ^= 1;
        sqlx::query(upd)
            .bind(b)
            .bind(position as i64)
            .execute(&mut c)
            .await
            .unwrap();
    }
}

#[tokio::test]
async fn changing_one_byte_of_any_stored_event_is_named_by_verify() {
    for db in each_backend().await {
        let app = spawn_app(&db).await;
        scenario(&app).await;
        let head = app.head().await;
        let store = app.svc.state.store.clone();
        drop(app);

        let (code, out) = stratum(&["events", "verify"], &db.url);
        assert_eq!(code, 0, "{out}");
        assert!(out.contains(&format!("verified: {head} events")), "{out}");

        // Each column of each event is covered; flip one at a time.
        let flips = [
            "payload",
            "principal = principal || 'x'",
            "stream_version = stream_version + 100",
            "occurred_at = occurred_at + 1",
            "event_type = event_type || 'x'",
        ];
        for p in 1..=head {
            let flip = flips[p as usize % flips.len()];
            if flip == "payload" {
                flip_payload_byte(&db.url, p).await;
            } else {
                exec(
                    &db.url,
                    &format!("UPDATE events SET {flip} WHERE position = {p}"),
                )
                .await;
            }
            let got = stratum_api::http::events::verify_chain(&*store)
                .await
                .unwrap();
            assert_eq!(
                got,
                stratum_api::http::events::Verification::Broken {
                    position: p,
                    reason: "Hash { position: ".to_owned() + &p.to_string() + " }"
                },
                "{}: {flip} at {p}",
                db.backend
            );
            if p == 3 {
                let (code, out) = stratum(&["events", "verify"], &db.url);
                assert_eq!(code, 1, "{out}");
                assert!(out.contains("broken at position 3"), "{out}");
            }
            let undo = match flip.split(" = ").next().unwrap() {
                "payload" => {
                    flip_payload_byte(&db.url, p).await;
                    continue;
                }
                "principal" => "principal = substr(principal, 1, length(principal) - 1)".to_owned(),
                "stream_version" => "stream_version = stream_version - 100".to_owned(),
                "occurred_at" => "occurred_at = occurred_at - 1".to_owned(),
                _ => "event_type = substr(event_type, 1, length(event_type) - 1)".to_owned(),
            };
            exec(
                &db.url,
                &format!("UPDATE events SET {undo} WHERE position = {p}"),
            )
            .await;
        }
        let (code, out) = stratum(&["events", "verify"], &db.url);
        assert_eq!(code, 0, "{}: {out}", db.backend);
    }
}

#[tokio::test]
async fn export_writes_every_event_as_a_json_line_and_replay_checks_the_read_models() {
    for db in each_backend().await {
        let app = spawn_app(&db).await;
        scenario(&app).await;
        let head = app.head().await;
        drop(app);
        let (code, out) = stratum(&["events", "export"], &db.url);
        assert_eq!(code, 0);
        let lines: Vec<serde_json::Value> = out
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len() as u64, head);
        assert_eq!(lines[1]["type"], "MemberAdmitted");
        assert_eq!(lines[1]["payload"]["nodeId"], "n-1");
        assert_eq!(lines[1]["principal"], "user/admin");

        let (code, out) = stratum(&["replay", "--check"], &db.url);
        assert_eq!(code, 0, "{out}");
        exec(
            &db.url,
            "UPDATE rm_members SET doc = '{}' WHERE node_id = 'n-2'",
        )
        .await;
        let (code, out) = stratum(&["replay", "--check"], &db.url);
        assert_eq!(code, 1, "{out}");
        assert!(out.contains("member n-2 differs"), "{out}");
        let (code, _) = stratum(&["replay", "--rebuild"], &db.url);
        assert_eq!(code, 0);
        let (code, out) = stratum(&["replay", "--check"], &db.url);
        assert_eq!(code, 0, "{}: {out}", db.backend);
    }
}
