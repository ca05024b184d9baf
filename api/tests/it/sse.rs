//! The event stream (Server-Sent Events) delivers every event exactly once,
//! in order, across a reconnect in the middle of a burst.

use std::time::Duration;

use stratum_api::command::CommandRequest;
use stratum_domain::membership::MemberCommand;
use stratum_domain::Command;

use crate::support::{spawn_app, sqlite, ADMIN_TOKEN};

/// Reads SSE frames until `stop` says so; answers the ids seen.
async fn read_ids(
    res: &mut reqwest::Response,
    buf: &mut String,
    mut stop: impl FnMut(&[u64]) -> bool,
) -> Vec<u64> {
    let mut ids = Vec::new();
    while !stop(&ids) {
        let chunk = tokio::time::timeout(Duration::from_secs(20), res.chunk())
            .await
            .expect("the stream went quiet")
            .unwrap()
            .expect("the stream ended");
        buf.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = buf.find("\n\n") {
            let frame: String = buf.drain(..end + 2).collect();
            if let Some(id) = frame.lines().find_map(|l| l.strip_prefix("id:")) {
                ids.push(id.trim().parse().unwrap());
                if stop(&ids) {
                    return ids;
                }
            }
        }
    }
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stream_delivers_every_event_once_across_a_reconnect_mid_burst() {
    const WRITERS: usize = 10;
    const EACH: usize = 1000;
    let db = sqlite();
    let app = spawn_app(&db).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base_url = format!("http://{}", listener.local_addr().unwrap());
    let router = app.router.clone();
    let server = tokio::spawn(async move { axum::serve(listener, router).await });
    let start = app.head().await;
    let total = (WRITERS * EACH) as u64;
    let client = reqwest::Client::new();
    let connect = |last: Option<u64>| {
        let mut req = client
            .get(format!("{base_url}/v1/admin/events/stream?after={start}"))
            .bearer_auth(ADMIN_TOKEN);
        if let Some(l) = last {
            req = req.header("Last-Event-ID", l.to_string());
        }
        req.send()
    };
    let mut first = connect(None).await.unwrap();
    assert_eq!(first.status(), 200);
    assert!(first.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/event-stream"));

    let burst: Vec<_> = (0..WRITERS)
        .map(|w| {
            let bus = app.svc.state.bus.clone();
            tokio::spawn(async move {
                let node_id = format!("n-{w}");
                let admit = MemberCommand::Admit {
                    node_id: Some(node_id.clone()),
                    role: Some("compute".into()),
                    mgmt_ip: Some(format!("10.0.0.{}", w + 1)),
                    bindings: Default::default(),
                    labels: Default::default(),
                };
                bus.execute(CommandRequest::new(Command::Member(admit), "user/admin"))
                    .await
                    .unwrap();
                for k in 1..EACH {
                    let step = MemberCommand::ReportJoinProgress {
                        node_id: node_id.clone(),
                        step: Some(format!("join/s{k}")),
                    };
                    bus.execute(CommandRequest::new(Command::Member(step), "user/admin"))
                        .await
                        .unwrap();
                }
            })
        })
        .collect();

    let mut buf = String::new();
    let mut seen = read_ids(&mut first, &mut buf, |ids| ids.len() >= 3000).await;
    drop(first); // The client goes away in the middle of the burst.
    let last = *seen.last().unwrap();
    assert!(last < start + total, "the reconnect happens mid-burst");
    let mut second = connect(Some(last)).await.unwrap();
    let mut buf = String::new();
    let rest = read_ids(&mut second, &mut buf, |ids| {
        ids.last() == Some(&(start + total))
    })
    .await;
    seen.extend(rest);
    for b in burst {
        b.await.unwrap();
    }
    let expected: Vec<u64> = (start + 1..=start + total).collect();
    assert_eq!(seen.len(), expected.len(), "every event exactly once");
    assert_eq!(seen, expected, "in order, no gap, no repeat");
    server.abort();
}
