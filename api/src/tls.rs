//! HTTPS for `serve`: the certificate and key (`--tls-cert`, `--tls-key`),
//! reloaded on SIGHUP, and client certificates for node agents
//! (`--client-ca`).
//!
//! A client certificate is optional: a client without one authenticates
//! with its bearer token as before. One that is presented must chain to
//! the client CA, or the handshake fails. A verified certificate naming a
//! node (`node/<id>` as its subject's common name or a subject alternative
//! name, or the SPIFFE id `spiffe://<trust domain>/node/<id>`)
//! authenticates its requests as that node's principal with the
//! `NodeAgent` policy, when they carry no bearer token, unless the node
//! was decommissioned.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use clap::Args;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::ServerConfig;

use crate::settings::ConfigError;

/// The TLS settings of `serve`, each a flag and an environment variable.
#[derive(Args, Debug, Clone, Default)]
pub struct TlsArgs {
    /// A PEM file with the server's certificate chain: with `--tls-key`,
    /// the API is served as HTTPS. Reloaded on SIGHUP.
    #[arg(long, env = "STRATUM_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The PEM file with the private key of `--tls-cert`.
    #[arg(long, env = "STRATUM_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// A PEM file of CA certificates: a client certificate they signed that
    /// names `node/<id>` authenticates as that node, with `NodeAgent`,
    /// without a bearer token. Needs `--tls-cert`.
    #[arg(long, env = "STRATUM_CLIENT_CA", requires = "tls_cert")]
    pub client_ca: Option<PathBuf>,
}

/// The node a verified client certificate names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientNode {
    pub node_id: String,
    /// The certificate's SHA-256, in hex: what the request is recorded
    /// as having authenticated with.
    pub fingerprint: String,
}

/// A connection's verified client certificate, as a request carries it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClientCertificate {
    /// It names this node.
    Node(ClientNode),
    /// It names no node, or more than one: it authenticates nothing.
    NoNode,
}

impl ClientCertificate {
    /// What the certificates a client presented say, if it presented any.
    pub fn of(certs: Option<&[CertificateDer<'_>]>) -> Option<ClientCertificate> {
        certs.filter(|c| !c.is_empty())?;
        Some(match client_node(certs) {
            Some(node) => ClientCertificate::Node(node),
            None => ClientCertificate::NoNode,
        })
    }
}

/// The server's TLS configuration, swapped whole when the files reload.
pub struct Tls {
    args: TlsArgs,
    current: RwLock<Arc<ServerConfig>>,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls").field("args", &self.args).finish()
    }
}

impl Tls {
    /// Loads the files the settings name, or answers `None` when TLS is
    /// off.
    pub fn from_args(args: &TlsArgs) -> Result<Option<Arc<Tls>>, ConfigError> {
        if args.tls_cert.is_none() {
            return Ok(None);
        }
        let config = load(args)?;
        Ok(Some(Arc::new(Tls {
            args: args.clone(),
            current: RwLock::new(config),
        })))
    }

    /// The configuration new connections are accepted with.
    pub fn acceptor(&self) -> tokio_rustls::TlsAcceptor {
        tokio_rustls::TlsAcceptor::from(
            self.current
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
        )
    }

    /// Reads the files again; on an error the configuration in use stays.
    pub fn reload(&self) -> Result<(), ConfigError> {
        let fresh = load(&self.args)?;
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = fresh;
        Ok(())
    }

    /// Whether client certificates are asked for.
    pub fn client_certificates(&self) -> bool {
        self.args.client_ca.is_some()
    }
}

/// Answers SIGHUP until the process ends: the TLS files are read again
/// when TLS is on; without it there is nothing to reload, and the signal
/// (`systemctl reload`) must not stop the service.
pub fn on_hangup(tls: Option<Arc<Tls>>) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::hangup()) {
            Ok(mut hup) => {
                tokio::spawn(async move {
                    while hup.recv().await.is_some() {
                        match tls.as_ref().map(|t| t.reload()) {
                            None => tracing::info!("SIGHUP: nothing to reload, TLS is off"),
                            Some(Ok(())) => tracing::info!("reloaded the TLS certificate and key"),
                            Some(Err(e)) => tracing::warn!(
                                error = %e,
                                "cannot reload the TLS files; the ones loaded before stay in use"
                            ),
                        }
                    }
                });
            }
            Err(e) => tracing::warn!(error = %e, "cannot listen for SIGHUP"),
        }
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn certificates(var: &str, path: &Path) -> Result<Vec<CertificateDer<'static>>, ConfigError> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| ConfigError(format!("{var} {}: {e}", path.display())))?;
    if certs.is_empty() {
        return Err(ConfigError(format!(
            "{var} {}: no PEM certificate in it",
            path.display()
        )));
    }
    Ok(certs)
}

fn load(args: &TlsArgs) -> Result<Arc<ServerConfig>, ConfigError> {
    let (Some(cert), Some(key)) = (&args.tls_cert, &args.tls_key) else {
        return Err(ConfigError(
            "STRATUM_TLS_CERT and STRATUM_TLS_KEY are set together".into(),
        ));
    };
    let chain = certificates("STRATUM_TLS_CERT", cert)?;
    let key = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| ConfigError(format!("STRATUM_TLS_KEY {}: {e}", key.display())))?;
    let builder = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| ConfigError(format!("TLS: {e}")))?;
    let builder = match &args.client_ca {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let mut roots = rustls::RootCertStore::empty();
            for c in certificates("STRATUM_CLIENT_CA", ca)? {
                roots
                    .add(c)
                    .map_err(|e| ConfigError(format!("STRATUM_CLIENT_CA {}: {e}", ca.display())))?;
            }
            // A client without a certificate still gets in, with its
            // bearer token; one with a certificate of another CA does not.
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
                .allow_unauthenticated()
                .build()
                .map_err(|e| ConfigError(format!("STRATUM_CLIENT_CA {}: {e}", ca.display())))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder
        .with_single_cert(chain, key)
        .map_err(|e| ConfigError(format!("STRATUM_TLS_CERT and STRATUM_TLS_KEY: {e}")))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// The node a verified client certificate names, if it names exactly one.
pub fn client_node(certs: Option<&[CertificateDer<'_>]>) -> Option<ClientNode> {
    use sha2::Digest;
    let der = certs?.first()?;
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let mut names: Vec<String> = cert
        .subject()
        .iter_common_name()
        .filter_map(|cn| cn.as_str().ok().map(str::to_owned))
        .collect();
    // A SAN extension that does not parse names no one: the common name
    // alone must not decide then.
    if let Some(san) = cert.subject_alternative_name().ok()? {
        use x509_parser::extensions::GeneralName;
        for name in &san.value.general_names {
            match name {
                GeneralName::URI(s) | GeneralName::DNSName(s) | GeneralName::RFC822Name(s) => {
                    names.push((*s).to_owned())
                }
                _ => {}
            }
        }
    }
    let mut nodes: Vec<String> = names.iter().filter_map(|n| node_named(n)).collect();
    nodes.sort();
    nodes.dedup();
    match nodes.as_slice() {
        [one] => Some(ClientNode {
            node_id: one.clone(),
            fingerprint: hex::encode(sha2::Sha256::digest(der.as_ref())),
        }),
        // None, or two different nodes: the certificate names no one node.
        _ => None,
    }
}

/// `node/<id>`, or a SPIFFE id whose path is `/node/<id>`
/// (`spiffe://<trust domain>/node/<id>`); the id has the shape of a node
/// id.
fn node_named(name: &str) -> Option<String> {
    let id = match name.strip_prefix("spiffe://") {
        Some(rest) => rest.split_once('/')?.1.strip_prefix("node/")?,
        None => name.strip_prefix("node/")?,
    };
    stratum_domain::membership::valid_node_id(id).then(|| id.to_owned())
}

#[cfg(test)]
mod tests {
    use super::node_named;

    #[test]
    fn a_node_is_named_by_its_principal_or_a_uri_ending_in_it() {
        assert_eq!(node_named("node/n-1").as_deref(), Some("n-1"));
        assert_eq!(
            node_named("spiffe://cloud.example/node/n-2").as_deref(),
            Some("n-2")
        );
        assert_eq!(node_named("user/alice"), None);
        assert_eq!(node_named("node/"), None);
        assert_eq!(node_named("node/a/b"), None);
        assert_eq!(node_named("node/.."), None);
        assert_eq!(node_named("node/N-1"), None);
        assert_eq!(node_named("n-1.example"), None);
        assert_eq!(node_named("x/node/n-1"), None);
        assert_eq!(node_named("https://evil.example/node/n-1"), None);
        assert_eq!(node_named("spiffe://cloud.example/a/node/n-1"), None);
    }
}
