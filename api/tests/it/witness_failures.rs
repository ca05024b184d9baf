//! Witnesses that fail, through the built binaries: witnesses down, slow
//! or answering garbage delay no commit, are counted and named by the
//! alarm, and cosign once back; a witness killed with SIGKILL never
//! cosigns a smaller size after its restart; a start refuses a policy it
//! cannot use.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::binary::{free_port, start};
use crate::transparency::keygen;
use crate::witnesses::*;

/// A witness stand-in in front of a real one: it forwards, answers
/// garbage, or waits 10 s before forwarding.
#[derive(Clone)]
struct Proxy(Arc<AtomicU8>);

const FORWARD: u8 = 0;
const GARBAGE: u8 = 1;
const SLOW: u8 = 2;

impl Proxy {
    async fn start(port: u16, to: u16, mode: u8) -> Self {
        let p = Proxy(Arc::new(AtomicU8::new(mode)));
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .unwrap();
        let me = p.clone();
        tokio::spawn(async move {
            loop {
                let Ok((mut client, _)) = listener.accept().await else {
                    return;
                };
                let me = me.clone();
                tokio::spawn(async move {
                    match me.0.load(Ordering::SeqCst) {
                        GARBAGE => {
                            let mut buf = vec![0; 65536];
                            let _ = client.read(&mut buf).await;
                            let _ = client
                                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 24\r\nconnection: close\r\n\r\n\xe2\x80\x94 not a cosignature!!\n")
                                .await;
                        }
                        mode => {
                            if mode == SLOW {
                                tokio::time::sleep(Duration::from_secs(10)).await;
                            }
                            if let Ok(mut server) =
                                tokio::net::TcpStream::connect(("127.0.0.1", to)).await
                            {
                                let _ =
                                    tokio::io::copy_bidirectional(&mut client, &mut server).await;
                            }
                        }
                    }
                });
            }
        });
        p
    }

    fn set(&self, mode: u8) {
        self.0.store(mode, Ordering::SeqCst);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn witnesses_down_slow_or_garbled_delay_no_commit_and_cosign_once_back() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (log_key, log_public) = keygen(d, ORIGIN);
    let good = StratumWitness::start(d, "good.test/w", &log_public, free_port()).await;
    // "down": nothing listens on its port until it comes back.
    let down_port = free_port();
    let (down_key, down_public) = witness_keygen(d, "down.test/w");
    // "slow" and "garbage": real witnesses behind a stand-in.
    let slow = StratumWitness::start(d, "slow.test/w", &log_public, free_port()).await;
    let slow_port = free_port();
    let slow_proxy = Proxy::start(slow_port, slow.port, SLOW).await;
    let garbled = StratumWitness::start(d, "garbage.test/w", &log_public, free_port()).await;
    let garbage_port = free_port();
    let garbage_proxy = Proxy::start(garbage_port, garbled.port, GARBAGE).await;
    let down_vkey = std::fs::read_to_string(&down_public)
        .unwrap()
        .trim()
        .to_owned();
    let p = policy(
        d,
        "log.policy",
        &[
            ("good", good.vkey(), good.url()),
            ("down", down_vkey, format!("http://127.0.0.1:{down_port}")),
            ("slow", slow.vkey(), format!("http://127.0.0.1:{slow_port}")),
            (
                "garbage",
                garbled.vkey(),
                format!("http://127.0.0.1:{garbage_port}"),
            ),
        ],
        1,
    );
    let metrics_port = free_port();
    let mut env = witnessed(d, &log_key, &p);
    env.push((
        "STRATUM_METRICS_LISTEN",
        format!("127.0.0.1:{metrics_port}"),
    ));
    let s = start(d, &env).await;

    // Commits go on at their own pace while three witnesses fail.
    let mut slowest = Duration::ZERO;
    for i in 0..20 {
        let t = Instant::now();
        s.admit(&format!("n-{i}"), &format!("10.7.0.{}", i + 1))
            .await;
        slowest = slowest.max(t.elapsed());
    }
    assert!(
        slowest < Duration::from_secs(1),
        "a commit took {slowest:?}"
    );
    let (_, took) = cosigned_at_head(&s, &["good.test/w"], Duration::from_secs(10)).await;
    assert!(took < Duration::from_secs(2), "{took:?}");

    // The metric and the alarm say which witness.
    let alarm = s
        .eventually(
            "the log-witness-failing alarm naming down, slow and garbage",
            || async {
                let a = witness_alarm(&s).await?;
                let m = a["message"].as_str()?.to_owned();
                (a["clearedAt"].is_null()
                    && m.contains("down")
                    && m.contains("slow")
                    && m.contains("garbage"))
                .then_some(a)
            },
        )
        .await;
    assert!(
        !alarm["message"].as_str().unwrap().contains("good"),
        "{alarm}"
    );
    let m = metrics(metrics_port).await;
    for (w, reason) in [
        ("down", "unreachable"),
        ("slow", "timeout"),
        ("garbage", "garbage"),
    ] {
        let series =
            format!("stratum_witness_failures_total{{reason=\"{reason}\",witness=\"{w}\"}}");
        assert!(metric(&m, &series) >= 1.0, "{series} in\n{m}");
    }
    assert!(
        metric(&m, "stratum_witness_cosigned_size{witness=\"good\"}") >= 20.0,
        "{m}"
    );
    assert!(
        m.lines()
            .any(|l| l == "stratum_witness_cosigned_size{witness=\"down\"} 0"),
        "{m}"
    );

    // They come back: each cosignature arrives, and the alarm clears.
    let _down =
        StratumWitness::spawn(&down_key, &d.join("down-state"), &log_public, down_port).await;
    slow_proxy.set(FORWARD);
    garbage_proxy.set(FORWARD);
    s.admit("n-back", "10.7.1.1").await;
    let all = [
        "down.test/w",
        "garbage.test/w",
        "good.test/w",
        "slow.test/w",
    ];
    cosigned_at_head(&s, &all, Duration::from_secs(60)).await;
    s.eventually("the alarm cleared", || async {
        witness_alarm(&s)
            .await
            .filter(|a| !a["clearedAt"].is_null())
            .map(|_| ())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_witness_killed_between_submissions_never_cosigns_a_smaller_size() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (log_key, log_public) = keygen(d, ORIGIN);
    let mut w = StratumWitness::start(d, "w.test/w", &log_public, free_port()).await;
    let p = policy(d, "log.policy", &[("w", w.vkey(), w.url())], 1);
    let s = start(d, &witnessed(d, &log_key, &p)).await;
    let mut largest = 0;
    let mut notes = Vec::new();
    for round in 0..6u32 {
        for i in 0..3 {
            s.admit(
                &format!("n-{round}-{i}"),
                &format!("10.6.{round}.{}", i + 1),
            )
            .await;
        }
        let (note, _) = cosigned_at_head(&s, &["w.test/w"], Duration::from_secs(30)).await;
        let (size, _) = size_and_cosigners(&note);
        largest = largest.max(size);
        notes.push(note);
        // Killed while the log may be submitting again.
        s.admit(&format!("n-{round}-x"), &format!("10.6.{round}.100"))
            .await;
        w.kill_and_restart().await;
        let kept = w
            .kept_size()
            .await
            .expect("the witness keeps what it cosigned");
        assert!(
            kept >= largest,
            "after a SIGKILL it keeps {kept}, but it cosigned {largest}"
        );
    }
    // Any older checkpoint submitted again, from any old size, is refused
    // (once the log is quiet and its head cosigned).
    let (newest, _) = cosigned_at_head(&s, &["w.test/w"], Duration::from_secs(30)).await;
    let kept = w.kept_size().await.unwrap();
    assert_eq!(kept, size_and_cosigners(&newest).0);
    for note in &notes {
        let (size, _) = size_and_cosigners(note);
        if size < kept {
            let (status, body) = submit(&s, &w.url(), size, note).await;
            assert_eq!(status, 409, "{body}");
            assert_eq!(body.trim().parse::<u64>().unwrap(), kept);
        }
    }
    assert_eq!(w.kept_size().await, Some(kept));
}

#[tokio::test]
async fn a_start_refuses_a_witness_policy_it_cannot_use() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (log_key, log_public) = keygen(d, ORIGIN);
    let (_, w_public) = witness_keygen(d, "w.test/w");
    let vkey = std::fs::read_to_string(&w_public)
        .unwrap()
        .trim()
        .to_owned();
    let log_vkey = std::fs::read_to_string(&log_public)
        .unwrap()
        .trim()
        .to_owned();
    for (policy_text, says) in [
        (
            format!("witness w {vkey}\nquorum 1\n"),
            "the witness w has no URL",
        ),
        (
            format!("witness w {vkey} http://127.0.0.1:1\nquorum 2\n"),
            "quorum 2 of 1 witnesses",
        ),
        (
            format!("witness w {log_vkey} http://127.0.0.1:1\nquorum 1\n"),
            "not a cosignature/v1 key",
        ),
        ("quorum 1\n".to_owned(), "quorum 1 of 0 witnesses"),
    ] {
        let p = d.join("bad.policy");
        std::fs::write(&p, &policy_text).unwrap();
        let o = crate::binary::serve_command(d, free_port(), &witnessed(d, &log_key, &p))
            .output()
            .await
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{policy_text}: {}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("STRATUM_LOG_WITNESS_POLICY") && err.contains(says),
            "{policy_text}: {err}"
        );
    }
    // A policy without the key it cosigns.
    let p = d.join("good.policy");
    std::fs::write(
        &p,
        format!("witness w {vkey} http://127.0.0.1:1\nquorum 1\n"),
    )
    .unwrap();
    let o = crate::binary::serve_command(
        d,
        free_port(),
        &[("STRATUM_LOG_WITNESS_POLICY", p.display().to_string())],
    )
    .output()
    .await
    .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("without STRATUM_LOG_SIGNING_KEY_FILE"));
}
