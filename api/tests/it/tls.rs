//! `stratum serve --tls-cert --tls-key --client-ca`: HTTPS with
//! certificates made at test time, node agents authenticated by their
//! client certificates, bearer tokens still working, and the server's
//! certificate reloaded on SIGHUP.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair, SanType,
};
use serde_json::{json, Value};

use super::binary::{free_port, serve_command_with, Server, ADMIN, MEMBERS};

/// A certificate authority made for the test.
struct Ca {
    cert: rcgen::Certificate,
    key: KeyPair,
}

impl Ca {
    fn new(name: &str) -> Ca {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        Ca {
            cert: params.self_signed(&key).unwrap(),
            key,
        }
    }

    /// A leaf certificate and its key, both PEM.
    fn issue(&self, params: CertificateParams) -> (String, String) {
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.cert, &self.key).unwrap();
        (cert.pem(), key.serialize_pem())
    }

    fn server(&self) -> (String, String) {
        let mut p =
            CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()]).unwrap();
        p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        self.issue(p)
    }

    /// A node agent's certificate: `node/<id>` as its common name and as a
    /// URI subject alternative name.
    fn node(&self, node_id: &str) -> (String, String) {
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        let name = format!("node/{node_id}");
        p.distinguished_name.push(DnType::CommonName, name.clone());
        p.subject_alt_names = vec![SanType::URI(name.try_into().unwrap())];
        p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        self.issue(p)
    }

    fn pem(&self) -> String {
        self.cert.pem()
    }
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// Sends the server SIGHUP, as `systemctl reload` does.
fn hangup(server: &Server) {
    let pid = server.child.id().unwrap().to_string();
    let sent = std::process::Command::new("kill")
        .args(["-HUP", &pid])
        .status()
        .unwrap();
    assert!(sent.success());
}

/// A client trusting `ca`, presenting `identity` (cert, key) if given.
fn client(ca: &str, identity: Option<&(String, String)>) -> reqwest::Client {
    let mut b = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .add_root_certificate(reqwest::Certificate::from_pem(ca.as_bytes()).unwrap());
    if let Some((cert, key)) = identity {
        b = b.identity(reqwest::Identity::from_pem(format!("{cert}\n{key}").as_bytes()).unwrap());
    }
    b.build().unwrap()
}

#[tokio::test]
async fn https_with_client_certificates_for_node_agents_and_a_reload_on_sighup() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let server_ca = Ca::new("stratum test server CA");
    let agents_ca = Ca::new("stratum test node-agent CA");
    let (cert, key) = server_ca.server();
    let cert_file = write(d, "server.pem", &cert);
    let key_file = write(d, "server.key", &key);
    let agents_file = write(d, "agents-ca.pem", &agents_ca.pem());
    let port = free_port();
    let child = serve_command_with(
        d,
        port,
        &["--client-ca".into(), agents_file.display().to_string()],
        &[
            ("STRATUM_TLS_CERT", cert_file.display().to_string()),
            ("STRATUM_TLS_KEY", key_file.display().to_string()),
        ],
    )
    .stdout(Stdio::null())
    .stderr(std::fs::File::create(d.join("stderr.log")).unwrap())
    .spawn()
    .unwrap();
    let mut server = Server {
        child,
        base: format!("https://localhost:{port}"),
        stderr: d.join("stderr.log"),
        http: client(&server_ca.pem(), None),
    };
    server.wait_healthy().await;

    // Bearer tokens keep working over HTTPS.
    let (status, body) = server
        .post(
            MEMBERS,
            json!({"nodeId": "n-1", "role": "hybrid", "mgmtIp": "192.0.2.11"}),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    server.admit("n-2", "192.0.2.12").await;
    // Plain HTTP on the port is no answer.
    let plain = reqwest::Client::new()
        .get(format!("http://127.0.0.1:{port}/healthz"))
        .send()
        .await;
    assert!(plain.is_err() || !plain.unwrap().status().is_success());

    // A node agent's certificate from the client CA authenticates as
    // node/n-1 with NodeAgent, without a token.
    let n1 = agents_ca.node("n-1");
    let agent = client(&server_ca.pem(), Some(&n1));
    let progress = |node: &str| {
        agent
            .post(server.url(&format!("{MEMBERS}/{node}/join-progress")))
            .json(&json!({"step": "join/raft-openbao"}))
            .send()
    };
    let res = progress("n-1").await.unwrap();
    assert_eq!(res.status(), 200, "{:?}", res.text().await);
    let history = server.history("n-1").await;
    let reported = history
        .iter()
        .find(|e| e["type"] == "JoinProgressReported")
        .unwrap_or_else(|| panic!("{history:?}"));
    assert_eq!(reported["principal"], "node/n-1");
    // ... and only as n-1: NodeAgent may not report for another node.
    let res = progress("n-2").await.unwrap();
    assert_eq!(res.status(), 403);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["code"], "ACCESS_DENIED", "{body}");
    // The refused request's line says who was refused.
    let log = server.log();
    assert!(
        log.lines().any(|l| l
            .contains("route=\"/v1/admin/cluster/members/{nodeId}/join-progress\"")
            && l.contains("status=403")
            && l.contains("principal=\"node/n-1\"")),
        "{log}"
    );
    // Nor more than NodeAgent allows.
    let res = agent.get(server.url(MEMBERS)).send().await.unwrap();
    assert_eq!(res.status(), 403);
    // A token wins over the certificate when both are given.
    let res = agent
        .get(server.url(MEMBERS))
        .bearer_auth(ADMIN)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let log = std::fs::read_to_string(d.join("stderr.log")).unwrap();
    assert!(log.contains("principal=\"node/n-1\""), "{log}");

    // A certificate from another CA is refused in the handshake.
    let rogue_ca = Ca::new("someone else's CA");
    let rogue = client(&server_ca.pem(), Some(&rogue_ca.node("n-1")));
    let res = rogue
        .get(server.url("/v1/admin/cluster/peers"))
        .send()
        .await;
    assert!(res.is_err(), "a certificate of another CA got in: {res:?}");
    // A certificate of the client CA that names no node, or two, is no
    // node agent's.
    let named = |names: &[&str]| {
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.distinguished_name.push(DnType::CommonName, names[0]);
        p.subject_alt_names = names
            .iter()
            .map(|n| SanType::URI((*n).to_owned().try_into().unwrap()))
            .collect();
        p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        agents_ca.issue(p)
    };
    for names in [&["user/alice"][..], &["node/n-1", "node/n-2"][..]] {
        let res = client(&server_ca.pem(), Some(&named(names)))
            .get(server.url("/v1/admin/cluster/peers"))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 401, "{names:?}");
    }
    assert!(server
        .log()
        .contains("the client certificate names no node"));
    // A SPIFFE id names the node too.
    let res = client(
        &server_ca.pem(),
        Some(&named(&["spiffe://cloud.example/node/n-2"])),
    )
    .post(server.url(&format!("{MEMBERS}/n-2/join-progress")))
    .json(&json!({"step": "join/raft-openbao"}))
    .send()
    .await
    .unwrap();
    assert_eq!(res.status(), 200);
    // Without a certificate and without a token: 401.
    let res = server
        .http
        .get(server.url("/v1/admin/cluster/peers"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 401);

    // The remote CLI over HTTPS: the CA to trust, a token or a client
    // certificate.
    let ca_file = write(d, "server-ca.pem", &server_ca.pem());
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_stratum"))
        .args(["--server", &server.base])
        .args(["members", "list", "-o", "json"])
        .env("STRATUM_CA_CERT", &ca_file)
        .env("STRATUM_TOKEN", ADMIN)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
    // A CA file with no certificate in it is a usage error.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_stratum"))
        .args(["--server", &server.base, "--ca-cert"])
        .arg(&key_file)
        .args(["members", "list"])
        .env("STRATUM_TOKEN", ADMIN)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("no PEM certificate"));
    assert_eq!(listed.as_array().unwrap().len(), 2);
    let agent_cert = write(d, "n-1.pem", &n1.0);
    let agent_key = write(d, "n-1.key", &n1.1);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_stratum"))
        .args(["--server", &server.base, "--ca-cert"])
        .arg(&ca_file)
        .arg("--client-cert")
        .arg(&agent_cert)
        .arg("--client-key")
        .arg(&agent_key)
        .args(["peers", "-o", "json"])
        .env_remove("STRATUM_TOKEN")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");

    // Once n-2 is decommissioned, its certificate authenticates nothing.
    let n2 = agents_ca.node("n-2");
    let (status, body) = server
        .post(
            &format!("{MEMBERS}/n-2/decommission"),
            json!({"reason": "retired"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let res = client(&server_ca.pem(), Some(&n2))
        .get(server.url("/v1/admin/cluster/peers"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 401);
    assert!(server
        .log()
        .contains("certificate of a decommissioned node"));

    // SIGHUP reloads the certificate: one from a new CA replaces it.
    let next_ca = Ca::new("stratum test server CA, renewed");
    let (cert, key) = next_ca.server();
    std::fs::write(&cert_file, cert).unwrap();
    std::fs::write(&key_file, key).unwrap();
    hangup(&server);
    let renewed = client(&next_ca.pem(), None);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let r = renewed.get(server.url("/healthz")).send().await;
        if r.is_ok_and(|r| r.status() == 200) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the renewed certificate was not served after SIGHUP:\n{}",
            server.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let old = client(&server_ca.pem(), None)
        .get(server.url("/healthz"))
        .send()
        .await;
    assert!(old.is_err(), "the old certificate is still served");
    assert!(server
        .log()
        .contains("reloaded the TLS certificate and key"));
    // A broken file on SIGHUP keeps the loaded certificate in use.
    std::fs::write(&cert_file, "not a certificate").unwrap();
    hangup(&server);
    server.logs("cannot reload the TLS files").await;
    let r = renewed.get(server.url("/healthz")).send().await.unwrap();
    assert_eq!(r.status(), 200);
}

/// `systemctl reload` sends SIGHUP: without TLS there is nothing to
/// reload, and the service goes on.
#[tokio::test]
async fn sighup_without_tls_reloads_nothing_and_stops_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let server = super::binary::start(dir.path(), &[]).await;
    hangup(&server);
    server.logs("SIGHUP: nothing to reload").await;
    let (status, _) = server.get("/v1/admin/cluster/members").await;
    assert_eq!(status, 200, "still serving after SIGHUP");
}

#[test]
fn a_missing_key_or_an_unreadable_certificate_stops_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_stratum"))
        .args(["serve", "--tls-cert", "/nonexistent/cert.pem"])
        .env(
            "STRATUM_DATABASE_URL",
            format!("sqlite://{}/s.db", d.display()),
        )
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--tls-key"));
    let junk = write(d, "junk.pem", "junk");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_stratum"))
        .args(["serve", "--tls-cert"])
        .arg(&junk)
        .arg("--tls-key")
        .arg(&junk)
        .env(
            "STRATUM_DATABASE_URL",
            format!("sqlite://{}/s.db", d.display()),
        )
        .env("STRATUM_LISTEN", format!("127.0.0.1:{}", free_port()))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("STRATUM_TLS_CERT"), "{err}");
    assert!(
        !d.join("s.db").exists(),
        "nothing started: no database made"
    );
}
