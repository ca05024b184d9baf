//! systemd's service protocol (`sd_notify(3)`), for `Type=notify` units:
//! `READY=1` once the service is ready, `STATUS=` lines a person reads in
//! `systemctl status`, `STOPPING=1` on shutdown, and `WATCHDOG=1` while
//! `WatchdogSec=` is set. Without `NOTIFY_SOCKET` (not started by systemd)
//! nothing is sent.

use std::time::Duration;

use sd_notify::NotifyState;
use tokio_util::sync::CancellationToken;

use crate::service::AppState;

/// How often the `STATUS=` line is brought up to date.
const STATUS_EVERY: Duration = Duration::from_secs(5);

/// Set once `STOPPING=1` is sent: nothing else is sent after it (a status
/// line or a late `READY=1` would tell systemd the service runs on).
static STOPPED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

fn send(states: &[NotifyState<'_>]) {
    if std::env::var_os("NOTIFY_SOCKET").is_none() {
        return;
    }
    let stopping = states.iter().any(|s| matches!(s, NotifyState::Stopping));
    if STOPPED.load(std::sync::atomic::Ordering::Acquire) && !stopping {
        return;
    }
    static WARNED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if let Err(e) = sd_notify::notify(false, states) {
        // Once: the watchdog would repeat it several times a second.
        if !WARNED.swap(true, std::sync::atomic::Ordering::Relaxed) {
            tracing::warn!(error = %e, "cannot tell systemd (NOTIFY_SOCKET); said once");
        }
    }
}

/// Tells systemd the service is ready: called once the log is loaded, the
/// read models reach its head and every listener is bound, so whatever
/// `After=` this unit starts finds `/readyz` answering 200. Then keeps the
/// status line current, and pings the watchdog when systemd asked for one,
/// until `stop` is cancelled.
pub async fn ready(state: AppState, stop: CancellationToken) {
    let line = status(&state).await;
    send(&[NotifyState::Ready, NotifyState::Status(&line)]);
    if let Some(every) = watchdog() {
        tracing::info!(every = ?every, "pinging systemd's watchdog");
        tokio::spawn(ping(every, stop.clone()));
    }
    let mut shown = line;
    let mut tick = tokio::time::interval(STATUS_EVERY);
    tick.tick().await;
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        let line = status(&state).await;
        if line != shown {
            send(&[NotifyState::Status(&line)]);
            shown = line;
        }
    }
}

/// Tells systemd the service is stopping (requests in flight finish).
pub fn stopping() {
    STOPPED.store(true, std::sync::atomic::Ordering::Release);
    send(&[
        NotifyState::Stopping,
        NotifyState::Status("stopping: finishing requests in flight"),
    ]);
}

/// The watchdog's interval, halved as `sd_watchdog_enabled(3)` advises,
/// when systemd asked for pings (`WatchdogSec=`).
fn watchdog() -> Option<Duration> {
    let mut usec = 0;
    if std::env::var_os("NOTIFY_SOCKET").is_none() || !sd_notify::watchdog_enabled(false, &mut usec)
    {
        return None;
    }
    Some(Duration::from_micros(usec / 2).max(Duration::from_millis(10)))
}

/// Pings from the runtime's own workers: a runtime that stops scheduling
/// tasks stops the pings, and systemd restarts the service.
async fn ping(every: Duration, stop: CancellationToken) {
    let mut tick = tokio::time::interval(every);
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = tick.tick() => send(&[NotifyState::Watchdog]),
        }
    }
}

/// One line: the log's position, the replicas by state, the active alarms
/// by name.
pub async fn status(state: &AppState) -> String {
    let rm = state.bus.published();
    let mut line = format!("serving; log at position {}", rm.state.position);
    if let Ok(all) = state.store.replicas().await {
        let by = |s: crate::replicas::ReplicaState| {
            all.rows
                .iter()
                .filter(|r| crate::replicas::ReplicaState::of(r, all.now) == s)
                .count()
        };
        let live = by(crate::replicas::ReplicaState::Live);
        let silent = by(crate::replicas::ReplicaState::Silent);
        line.push_str(&format!("; {live} replica(s) live"));
        if silent > 0 {
            line.push_str(&format!(", {silent} silent"));
        }
    }
    let mut alarms: Vec<&str> = rm
        .state
        .upgrades
        .alarms
        .values()
        .filter(|a| a.cleared_at.is_none())
        .map(|a| a.name.as_str())
        .collect();
    alarms.sort_unstable();
    alarms.dedup();
    if alarms.is_empty() {
        line.push_str("; no alarms");
    } else {
        line.push_str(&format!("; alarms: {}", alarms.join(", ")));
    }
    line
}
