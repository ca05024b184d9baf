//! `stratum serve` as an operator runs it: the built binary, configured only
//! through the environment, against a stand-in OpenBao and recording
//! programs in place of `ovs-appctl` and `syncobj_admin`.

mod cleanup;
mod settings;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde_json::{json, Value};
use wiremock::matchers::{body_json, header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::binary::*;

/// The token the stand-in OpenBao expects; it must never reach the log.
const BAO_TOKEN: &str = "s.raft-serve-openbao-root-token-5f1c";
const REMOVE_PEER: &str = "/v1/sys/storage/raft/remove-peer";
const CONFIGURATION: &str = "/v1/sys/storage/raft/configuration";

/// The stand-in OpenBao's raft configuration names `ids` (`times` times,
/// or always), the first as its leader; a lower `priority` answers first.
async fn bao_lists(bao: &MockServer, ids: &[&str], times: Option<u64>, priority: u8) {
    let servers: Vec<Value> = ids
        .iter()
        .enumerate()
        .map(|(i, id)| json!({"node_id": id, "address": format!("{id}:8201"), "leader": i == 0, "voter": true}))
        .collect();
    let mock = Mock::given(method("GET"))
        .and(path(CONFIGURATION))
        .and(header("X-Vault-Token", BAO_TOKEN))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"data": {"config": {"index": 0, "servers": servers}}})),
        )
        .with_priority(priority);
    match times {
        Some(n) => mock.up_to_n_times(n).mount(bao).await,
        None => mock.mount(bao).await,
    }
}
