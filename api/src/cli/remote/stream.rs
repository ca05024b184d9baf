//! What the remote CLI follows as it happens: the peer lists, the event
//! stream, and a whole export, each resuming after a dropped connection.

use std::time::Duration;

use futures::StreamExt;
use reqwest::Method;
use serde_json::Value;

use super::super::output::{self, Shape};
use super::client::{chain, say, Client, Failure, Reply, Result};

/// Waits before trying a server again.
pub(super) async fn pause(what: &str, why: &str) {
    eprintln!("stratum: {what} ({why}); trying again");
    tokio::time::sleep(Duration::from_secs(1)).await;
}

/// `peers --watch`: the lists, then again each time the generation moves
/// (the API's long-poll), through server restarts.
pub(super) async fn watch_peers(c: &Client) -> Result<i32> {
    let mut after: Option<u64> = None;
    loop {
        let mut q = Vec::new();
        if let Some(g) = after {
            q.push(("after", g.to_string()));
            q.push(("waitSeconds", "60".to_owned()));
        }
        match c.get("/v1/admin/cluster/peers", &q).await {
            Ok(Reply::Ok(v)) => {
                let generation = v["generation"].as_u64();
                if generation != after {
                    say(&output::render(&v, Shape::Peers, c.format))?;
                }
                after = generation.or(after);
            }
            Ok(Reply::Failed(5)) => pause("the server is unavailable", "5xx").await,
            Ok(Reply::Failed(code)) => return Ok(code),
            Err(Failure::Unreachable(e)) => pause("the server cannot be reached", &e).await,
            Err(f) => return Err(f),
        }
    }
}

/// `events tail`: follows the event stream from `after` (default: the
/// head), resuming from the last event id seen when the stream breaks.
pub(super) async fn tail(c: &Client, after: Option<u64>) -> Result<i32> {
    use eventsource_stream::Eventsource;
    let mut last = match after {
        Some(a) => a,
        None => loop {
            // Only what comes next: the head, as `/readyz` tells it.
            match c.get("/readyz", &[]).await {
                Ok(Reply::Ok(v)) => break v["position"].as_u64().unwrap_or(0),
                Ok(Reply::Failed(5)) => pause("the server is not ready", "5xx").await,
                Ok(Reply::Failed(code)) => return Ok(code),
                Err(Failure::Unreachable(e)) => pause("the server cannot be reached", &e).await,
                Err(f) => return Err(f),
            }
        },
    };
    loop {
        let req = c
            .request(
                Method::GET,
                "/v1/admin/events/stream",
                &[("after", last.to_string())],
            )
            .header("Last-Event-ID", last.to_string());
        let res = match c.send(req).await {
            Ok(Ok(res)) => res,
            Ok(Err(5)) => {
                pause("the stream is unavailable", "5xx").await;
                continue;
            }
            Ok(Err(code)) => return Ok(code),
            Err(Failure::Unreachable(e)) => {
                pause("the server cannot be reached", &e).await;
                continue;
            }
            Err(f) => return Err(f),
        };
        let mut events = res.bytes_stream().eventsource();
        while let Some(ev) = events.next().await {
            match ev {
                Ok(ev) => {
                    // The id is the event's position: where to resume.
                    let Ok(position) = ev.id.parse::<u64>() else {
                        continue;
                    };
                    if position <= last {
                        continue;
                    }
                    let Ok(doc) = serde_json::from_str::<Value>(&ev.data) else {
                        continue;
                    };
                    last = position;
                    say(&output::event_line(&doc, c.format))?;
                }
                Err(e) => {
                    pause("the stream broke", &e.to_string()).await;
                    break;
                }
            }
        }
    }
}

/// `events export --server`: the lines the host's export writes, from the
/// server's `GET /v1/admin/events/export`.
pub(super) async fn export(c: &Client, after: u64, until: Option<u64>) -> Result<i32> {
    use std::io::Write;
    let mut q = vec![("after", after.to_string())];
    if let Some(u) = until {
        q.push(("until", u.to_string()));
    }
    let res = match c
        .send(c.request(Method::GET, "/v1/admin/events/export", &q))
        .await?
    {
        Ok(res) => res,
        Err(code) => return Ok(code),
    };
    let mut out = std::io::stdout().lock();
    let mut body = res.bytes_stream();
    while let Some(chunk) = body.next().await {
        let chunk = chunk
            .map_err(|e| Failure::Unreachable(format!("the export broke off: {}", chain(&e))))?;
        out.write_all(&chunk)?;
    }
    out.flush()?;
    Ok(0)
}
