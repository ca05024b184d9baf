//! SQLite on a full disk, through the built binary on a 4 MiB tmpfs (in a
//! mount namespace of its own): a write that cannot be stored answers 503
//! `UNAVAILABLE` with `Retry-After`, nothing half-written is left, and the
//! service writes again as soon as there is space, without a restart.

use std::io::Write;

use serde_json::{json, Value};

use crate::binary::{start_under, MEMBERS};

#[tokio::test]
async fn a_full_disk_answers_503_appends_nothing_and_recovers_when_space_is_made() {
    let dir = tempfile::tempdir().unwrap();
    let mnt = dir.path().join("db");
    std::fs::create_dir(&mnt).unwrap();
    let server = start_under(
        dir.path(),
        Some(&format!(
            "mount -t tmpfs -o size=4m tmpfs {}",
            mnt.display()
        )),
        &[],
        &[(
            "STRATUM_DATABASE_URL",
            format!("sqlite://{}", mnt.join("stratum.db").display()),
        )],
    )
    .await;
    // The mount is the server's; this process reaches it through /proc.
    let seen = std::path::PathBuf::from(format!(
        "/proc/{}/root{}",
        server.child.id().unwrap(),
        mnt.display()
    ));
    assert!(seen.join("stratum.db").exists(), "{}", server.log());
    let filler = seen.join("filler");
    {
        let mut f = std::fs::File::create(&filler).unwrap();
        let block = vec![0u8; 64 * 1024];
        while f.write_all(&block).is_ok() {}
        let _ = f.sync_all();
        // Room for a few writes, not many.
        let len = f.metadata().unwrap().len();
        f.set_len(len.saturating_sub(192 * 1024)).unwrap();
    }

    // Writes until the database cannot grow: each is stored whole or not
    // at all.
    let labels: serde_json::Map<String, Value> = (0..64)
        .map(|i| {
            (
                format!("label.{i}.{}", "k".repeat(50)),
                json!("x".repeat(63)),
            )
        })
        .collect();
    let mut admitted = 0;
    let mut refused = None;
    for i in 0..400 {
        let res = server
            .http
            .post(server.url(MEMBERS))
            .bearer_auth(crate::binary::ADMIN)
            .json(&json!({
                "nodeId": format!("n-{i}"),
                "role": "compute",
                "mgmtIp": format!("10.0.{}.{}", i / 200, i % 200 + 1),
                "labels": labels,
            }))
            .send()
            .await
            .unwrap();
        match res.status().as_u16() {
            201 => admitted += 1,
            503 => {
                assert_eq!(res.headers()["retry-after"], "30");
                refused = Some(res.json::<Value>().await.unwrap());
                break;
            }
            other => panic!("{other}: {}", res.text().await.unwrap()),
        }
    }
    let refused = refused.unwrap_or_else(|| panic!("the disk never filled:\n{}", server.log()));
    assert_eq!(refused["code"], "UNAVAILABLE", "{refused}");
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .contains("disk is full"),
        "{refused}"
    );
    assert!(admitted > 0, "some writes fit before the disk filled");
    // Reads go on; what was acknowledged is there, and nothing else.
    let (status, page) = server.get(&format!("{MEMBERS}?limit=1000")).await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(page["items"].as_array().unwrap().len(), admitted);
    let (status, verified) = server.get("/v1/admin/events/verify").await;
    assert_eq!(status, 200);
    assert_eq!(verified["verified"], true, "{verified}");
    let head = verified["position"].as_u64().unwrap();

    // Space is made; the next write is stored, with no restart.
    std::fs::remove_file(&filler).unwrap();
    let (status, body) = server
        .post(
            MEMBERS,
            json!({"nodeId": "n-after", "role": "compute", "mgmtIp": "10.9.0.1"}),
        )
        .await;
    assert_eq!(status, 201, "{body}\n{}", server.log());
    let (_, verified) = server.get("/v1/admin/events/verify").await;
    assert_eq!(verified["verified"], true, "{verified}");
    assert_eq!(verified["position"].as_u64().unwrap(), head + 1);
}
