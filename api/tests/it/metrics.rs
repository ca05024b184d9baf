//! `/metrics` on `STRATUM_METRICS_LISTEN`, as Prometheus scrapes it: it
//! passes `promtool check metrics` (when promtool is installed; CI installs
//! it and sets `STRATUM_REQUIRE_PROMTOOL=1`), and its counters and gauges
//! move with a join failure, its raft cleanup and an upgrade.

use serde_json::json;

use crate::binary::{free_port, start, MEMBERS};

/// The value of the first sample of `name` whose labels include `labels`.
fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    text.lines().filter(|l| !l.starts_with('#')).find_map(|l| {
        let (series, value) = l.rsplit_once(' ')?;
        let (n, rest) = series.split_once('{').unwrap_or((series, "}"));
        let all = labels
            .iter()
            .all(|(k, v)| rest.contains(&format!("{k}=\"{v}\"")));
        (n == name && all).then(|| value.parse().ok()).flatten()
    })
}

#[tokio::test]
async fn metrics_pass_promtool_and_move_with_a_join_failure_its_cleanup_and_an_upgrade() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let server = start(
        dir.path(),
        &[
            (
                "STRATUM_RELEASE_KEYS",
                stratum_domain::testing::release_keys_spec(),
            ),
            ("STRATUM_METRICS_LISTEN", format!("127.0.0.1:{port}")),
        ],
    )
    .await;
    let scrape = || async move {
        let res = reqwest::get(format!("http://127.0.0.1:{port}/metrics"))
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
        res.text().await.unwrap()
    };
    let before = scrape().await;
    stratum_api::testing::promtool_check(&before);
    assert_eq!(
        sample(
            &before,
            "stratum_build_info",
            &[("version", env!("CARGO_PKG_VERSION"))]
        ),
        Some(1.0)
    );
    let generation_before = sample(&before, "stratum_membership_generation", &[]).unwrap();
    // The API's own port has no /metrics.
    assert_eq!(server.get("/metrics").await.0, 404);

    // A join failure, and the raft cleanup it asks for.
    server.admit_three().await;
    server.progress("n-3", "join/raft-patroni").await;
    server
        .join_failed("n-3", "join/raft-openbao", "timed out")
        .await;
    server.cleaned("n-3").await;
    assert_eq!(
        sample(&scrape().await, "stratum_members", &[("state", "failed")]),
        Some(1.0)
    );
    // Decommissioned (its rafts are clean), so an upgrade's readiness holds.
    server
        .member_post("n-3", "decommission", json!({"reason": "disk failed"}))
        .await;
    server
        .eventually("n-3 decommissioned", || async {
            (server.member("n-3").await["state"] == "decommissioned").then_some(())
        })
        .await;

    // An upgrade, planned and under way.
    server.register_releases(&["1.0.0", "1.1.0"]).await;
    server.set_running_release("1.0.0").await;
    server.caught_up(&["n-1", "n-2"]).await;
    let id = server.plan_upgrade("1.1.0").await;
    // Whatever state the driver has moved it to, the gauge says the same.
    let (after, upgrade_state) = server
        .eventually("the upgrade's state in the metrics", || async {
            let (_, u) = server.get(&format!("/v1/admin/upgrades/{id}")).await;
            let state = u["state"].as_str().unwrap_or_default().to_owned();
            let text = scrape().await;
            let shown = sample(
                &text,
                "stratum_upgrade_active",
                &[("upgrade", id.as_str()), ("state", state.as_str())],
            );
            (state != "planned" && shown == Some(1.0)).then_some((text, state))
        })
        .await;
    eprintln!("the upgrade is {upgrade_state}");

    stratum_api::testing::promtool_check(&after);
    assert_eq!(
        sample(&after, "stratum_members", &[("state", "failed")]),
        Some(0.0)
    );
    assert_eq!(
        sample(&after, "stratum_members", &[("state", "decommissioned")]),
        Some(1.0)
    );
    assert_eq!(
        sample(&after, "stratum_members", &[("state", "active")]),
        Some(2.0)
    );
    assert!(sample(&after, "stratum_membership_generation", &[]).unwrap() > generation_before);
    assert!(
        sample(&after, "stratum_log_head_position", &[]).unwrap()
            >= sample(&after, "stratum_membership_generation", &[]).unwrap()
    );
    assert_eq!(
        sample(
            &after,
            "stratum_raft_removals_total",
            &[("raft", "patroni")]
        ),
        Some(1.0),
        "the cleanup took n-3 out of the raft it reached"
    );
    assert_eq!(
        sample(
            &after,
            "stratum_raft_cleanup_pending",
            &[("raft", "patroni")]
        ),
        Some(0.0)
    );
    assert_eq!(
        sample(
            &after,
            "stratum_http_requests_total",
            &[
                ("method", "POST"),
                ("route", "/v1/admin/cluster/members/{nodeId}/join-failed"),
                ("status", "200"),
            ],
        ),
        Some(1.0)
    );
    assert!(
        sample(
            &after,
            "stratum_http_request_duration_seconds_count",
            &[("route", MEMBERS)]
        )
        .unwrap()
            >= 3.0
    );
    assert!(
        sample(&after, "stratum_write_batch_commands_count", &[]).unwrap()
            > sample(&before, "stratum_write_batch_commands_count", &[]).unwrap_or(0.0)
    );
    assert!(sample(&after, "stratum_write_commit_duration_seconds_count", &[]).unwrap() > 0.0);
    assert_eq!(sample(&after, "stratum_alarms_active", &[]), Some(0.0));
    assert!(sample(&after, "stratum_db_pool_connections", &[("state", "idle")]).is_some());
    assert_eq!(sample(&after, "stratum_watchers", &[]), Some(0.0));
}
