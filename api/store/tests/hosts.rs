//! libpq's host lists and `target_session_attrs` on a real PostgreSQL: the
//! hosts are probed in order, one that does not answer is passed over, and
//! a session of the wrong kind is never chosen; every host's answer is
//! named when none will do. (The failover itself, where the chosen host
//! changes under running replicas, is `api/tests/it/failover.rs`.)

use stratum_store::testing::free_port;
use stratum_store::{connect, connect_as, Access};

/// `postgres://user@H:P/db?q` as the same URL with `extra` hosts first.
fn with_hosts_before(url: &str, extra: &str, query: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap();
    let at = rest.rfind('@').map_or(0, |i| i + 1);
    let (user, hosts) = rest.split_at(at);
    let (hosts, tail) = hosts.split_at(hosts.find('/').unwrap());
    let tail = tail.split_once('?').map_or(tail, |(t, _)| t);
    format!("{scheme}://{user}{extra},{hosts}{tail}?{query}")
}

#[tokio::test]
async fn the_first_host_with_the_session_asked_for_is_chosen() {
    let Some(db) = stratum_store::testing::postgres().await else {
        return;
    };
    let dead = format!("127.0.0.1:{}", free_port());
    let url = with_hosts_before(&db.url, &dead, "target_session_attrs=read-write");
    let store = connect(&url).await.unwrap();
    assert_eq!(store.head().await.unwrap().position, 0);

    // The keyword form says the same.
    let (host, port) = {
        let rest = db.url.split_once('@').unwrap().1;
        let hp = rest.split('/').next().unwrap();
        let (h, p) = hp.rsplit_once(':').unwrap();
        (h.to_owned(), p.to_owned())
    };
    let dbname = db
        .url
        .rsplit('/')
        .next()
        .unwrap()
        .split('?')
        .next()
        .unwrap();
    let dead_port = dead.rsplit_once(':').unwrap().1;
    let keywords = format!(
        "host=127.0.0.1,{host} port={dead_port},{port} dbname={dbname} user=postgres target_session_attrs=primary connect_timeout=1"
    );
    let store = connect(&keywords).await.unwrap();
    assert_eq!(store.head().await.unwrap().position, 0);

    // The auditor's tools may ask for any session.
    let url = with_hosts_before(&db.url, &dead, "target_session_attrs=any");
    connect_as(&url, Access::ReadOnly).await.unwrap();
}

#[tokio::test]
async fn no_host_with_the_session_asked_for_names_every_hosts_answer() {
    let Some(db) = stratum_store::testing::postgres().await else {
        return;
    };
    let dead = format!("127.0.0.1:{}", free_port());
    let url = with_hosts_before(&db.url, &dead, "target_session_attrs=standby");
    // A store that writes may not ask for a standby at all.
    let err = match connect(&url).await {
        Ok(_) => panic!("a writing store was opened on a standby session"),
        Err(e) => e.to_string(),
    };
    assert!(err.contains("cannot take writes"), "{err}");
    // The auditor's read-only tools may; here there is none.
    let err = match connect_as(&url, Access::ReadOnly).await {
        Ok(_) => panic!("a primary was taken for a standby"),
        Err(e) => e.to_string(),
    };
    assert!(
        err.contains("no PostgreSQL host answers with a standby session"),
        "{err}"
    );
    assert!(err.contains(&dead), "the dead host is named: {err}");
    assert!(
        err.contains("a primary"),
        "the primary is named as one: {err}"
    );
}
