//! `stratum serve` with the upgrade settings the README documents (the
//! backup target and recipient, the settling), and `stratum releases
//! import` on the host loading releases from install media.

use std::time::Duration;

use serde_json::{json, Value};

use crate::binary::*;

/// Release `version` running and one active node, `n-1`, that applied the
/// generation: what an upgrade can be planned on.
async fn one_node_running(version: &str, server: &Server) {
    server.set_running_release(version).await;
    server.admit("n-1", "192.0.2.11").await;
    server.member_post("n-1", "join-complete", json!({})).await;
    let (_, m) = server.get("/v1/admin/cluster/membership").await;
    server
        .member_post(
            "n-1",
            "applied-generation",
            json!({"generation": m["generation"]}),
        )
        .await;
}

/// The settings an upgrade is planned with, and releases imported from
/// media by the host CLI while the server runs.
#[tokio::test]
async fn upgrades_plan_with_the_configured_backup_target_settling_and_media_releases() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let keys = stratum_domain::testing::release_keys_spec();
    let server = start(
        d,
        &[
            ("STRATUM_RELEASE_KEYS", keys.clone()),
            (
                "STRATUM_BACKUP_TARGET",
                "s3://backups.example/stratum".to_owned(),
            ),
            (
                "STRATUM_BACKUP_RECIPIENT",
                "age1qyqszqgpqyqszqgpqyqszqgpqyqszqgp".to_owned(),
            ),
            ("STRATUM_UPGRADE_SETTLE", "2s".to_owned()),
        ],
    )
    .await;
    // `stratum releases import --file` on the host, against the server's
    // database.
    let import = |name: &str, manifest: &Value| {
        let file = d.join(name);
        std::fs::write(&file, manifest.to_string()).unwrap();
        std::process::Command::new(env!("CARGO_BIN_EXE_stratum"))
            .args(["releases", "import", "--file"])
            .arg(&file)
            .env(
                "STRATUM_DATABASE_URL",
                format!("sqlite://{}", d.join("stratum.db").display()),
            )
            .env("STRATUM_RELEASE_KEYS", &keys)
            .output()
            .unwrap()
    };
    // The host's operator loads two releases from the install media.
    for v in ["1.0.0", "1.1.0"] {
        let out = import(
            &format!("release-{v}.json"),
            &stratum_domain::testing::manifest(v, "13.1", None),
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let release: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(release["version"], v);
    }
    // A manifest whose signature does not verify is refused, naming it.
    let mut forged = stratum_domain::testing::manifest("1.2.0", "13.1", None);
    forged["cves"] = json!(["CVE-2026-9999"]);
    let out = import("forged.json", &forged);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("signature"));

    one_node_running("1.0.0", &server).await;

    let (status, u) = server
        .post("/v1/admin/upgrades", json!({"targetRelease": "1.1.0"}))
        .await;
    assert_eq!(status, 201, "{u}");
    let plan = &u["plan"];
    assert_eq!(plan["sourceKind"], "media", "{plan}");
    assert_eq!(plan["settleSeconds"], 2);
    assert_eq!(
        plan["backup"],
        json!({"location": "target", "target": "s3://backups.example/stratum", "encrypted": true})
    );
    let id = u["id"].as_str().unwrap().to_owned();
    server
        .eventually("the prechecks", || async {
            let (_, u) = server.get(&format!("/v1/admin/upgrades/{id}")).await;
            (u["state"] == "fetching").then_some(())
        })
        .await;
    let (status, _) = server
        .post(&format!("/v1/admin/upgrades/{id}/cancel"), json!({}))
        .await;
    assert_eq!(status, 200);
    // With a target configured, a node backup may still be asked for.
    let (status, u) = server
        .post(
            "/v1/admin/upgrades",
            json!({"targetRelease": "1.1.0", "backup": {"location": "node"}}),
        )
        .await;
    assert_eq!(status, 201, "{u}");
    assert_eq!(u["plan"]["backup"]["location"], "node");
    assert_eq!(u["plan"]["nodes"][0]["fetched"], false);
}

#[tokio::test]
async fn without_a_backup_target_a_target_backup_is_refused_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let server = start_trusting_releases(dir.path()).await;
    let (status, body) = server
        .post(
            "/v1/admin/upgrades",
            json!({"targetRelease": "1.1.0", "backup": {"location": "target"}}),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["fieldErrors"][0]["field"], "backup.location", "{body}");
}

#[tokio::test]
async fn serve_refuses_malformed_upgrade_settings_naming_them() {
    for (env, named) in [
        (
            vec![("STRATUM_UPGRADE_SETTLE", "soon")],
            "STRATUM_UPGRADE_SETTLE",
        ),
        (
            vec![("STRATUM_BACKUP_RECIPIENT", "age1qyqszqgp")],
            "STRATUM_BACKUP_RECIPIENT",
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let env: Vec<(&str, String)> = env.iter().map(|(k, v)| (*k, (*v).to_owned())).collect();
        let out = tokio::time::timeout(
            Duration::from_secs(20),
            serve_command(dir.path(), free_port(), &env).output(),
        )
        .await
        .expect("serve exits")
        .unwrap();
        assert!(!out.status.success());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(named), "{stderr}");
    }
}

/// `/v1/docs` serves a reference rendered from the served document, with
/// every asset from the binary itself: nothing is fetched from elsewhere.
#[tokio::test]
async fn the_api_reference_is_served_from_the_binary_alone() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), &[]).await;
    let page = server
        .http
        .get(server.url("/v1/docs/"))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    let html = page.text().await.unwrap();
    assert!(html.contains("swagger-ui"), "{html}");
    assert!(
        !html.contains("https://") && !html.contains("http://"),
        "no CDN: {html}"
    );
    let init = server
        .http
        .get(server.url("/v1/docs/swagger-initializer.js"))
        .send()
        .await
        .unwrap();
    assert_eq!(init.status(), 200);
    assert!(init.text().await.unwrap().contains("/v1/openapi.json"));
    for asset in ["swagger-ui.css", "swagger-ui-bundle.js"] {
        let r = server
            .http
            .get(server.url(&format!("/v1/docs/{asset}")))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{asset}");
        assert!(r.bytes().await.unwrap().len() > 1000, "{asset} is embedded");
    }
}

/// The trusted keys may come from the file `STRATUM_RELEASE_KEYS_FILE`
/// names, one `keyId=base64-key` a line: a release signed by one of them
/// registers over the API, and a forged one is refused.
#[tokio::test]
async fn release_keys_from_a_file_verify_registrations() {
    let dir = tempfile::tempdir().unwrap();
    let keys_file = dir.path().join("release-keys");
    let keys = stratum_domain::testing::release_keys_spec();
    std::fs::write(&keys_file, keys.replace(',', "\n") + "\n").unwrap();
    let server = start(
        dir.path(),
        &[("STRATUM_RELEASE_KEYS_FILE", keys_file.display().to_string())],
    )
    .await;
    assert!(
        !server.log().contains("no trusted release keys"),
        "{}",
        server.log()
    );
    let register = |manifest: Value| {
        server
            .http
            .post(server.url("/v1/admin/releases"))
            .bearer_auth(ADMIN)
            .json(&manifest)
            .send()
    };
    let ok = register(stratum_domain::testing::manifest("1.0.0", "13.1", None))
        .await
        .unwrap();
    assert_eq!(ok.status(), 201, "{}", ok.text().await.unwrap());
    let mut forged = stratum_domain::testing::manifest("1.1.0", "13.1", None);
    forged["cves"] = json!(["CVE-2026-9999"]);
    let refused = register(forged).await.unwrap();
    assert_eq!(refused.status(), 400);
    assert!(refused.text().await.unwrap().contains("signature"));
}

/// During the write freeze of a long upgrade, an operator or node token
/// can still be made (through the API and with `stratum token create` on
/// the host) and revoked, and refused writers are told to come back when
/// the upgrade may have moved, not every 2 s.
#[tokio::test]
async fn tokens_are_made_and_revoked_during_the_write_freeze_and_retry_after_fits_the_wait() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let keys = stratum_domain::testing::release_keys_spec();
    let server = start(d, &[("STRATUM_RELEASE_KEYS", keys)]).await;
    server.register_releases(&["1.0.0", "1.1.0"]).await;
    one_node_running("1.0.0", &server).await;
    let id = server.plan_upgrade("1.1.0").await;
    let state = |want: &'static str| {
        let id = id.clone();
        let server = &server;
        async move {
            server
                .eventually(&format!("the upgrade {want}"), || async {
                    let (_, u) = server.get(&format!("/v1/admin/upgrades/{id}")).await;
                    (u["state"] == want).then_some(())
                })
                .await
        }
    };
    state("fetching").await;
    let (status, body) = server
        .post(
            &format!("/v1/admin/upgrades/{id}/nodes/n-1/report"),
            json!({"phase": "fetch", "state": "done"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    state("backing_up").await;

    // A member change waits, told to come back in a minute (the upgrade
    // waits for the backup report).
    let res = server
        .http
        .post(server.url(MEMBERS))
        .bearer_auth(ADMIN)
        .json(&json!({"nodeId": "n-2", "role": "hybrid", "mgmtIp": "192.0.2.12"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 503);
    assert_eq!(res.headers()["retry-after"], "60");
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["code"], "UPGRADE_IN_PROGRESS");
    assert!(
        body["message"].as_str().unwrap().contains("backup report"),
        "{body}"
    );

    // A node token through the API, and an operator token on the host.
    let (status, token) = server
        .post(
            "/v1/admin/iam/tokens",
            json!({"principal": "node/n-1", "policies": ["NodeAgent"]}),
        )
        .await;
    assert_eq!(status, 201, "{token}");
    let created = host_json(
        d,
        &[
            "token",
            "create",
            "--principal",
            "user/oncall",
            "--policy",
            "ClusterOperator",
        ],
    );
    let secret = created["token"].as_str().unwrap();
    let whoami = server
        .http
        .get(server.url("/v1/admin/cluster/members"))
        .bearer_auth(secret)
        .timeout(Duration::from_secs(5))
        .send()
        .await
        .unwrap();
    assert_eq!(whoami.status(), 200, "the new operator token works at once");
    let (status, body) = server
        .post(
            &format!(
                "/v1/admin/iam/tokens/{}/revoke",
                token["id"].as_str().unwrap()
            ),
            json!({}),
        )
        .await;
    assert!(status == 200 || status == 204, "{status}: {body}");
}
