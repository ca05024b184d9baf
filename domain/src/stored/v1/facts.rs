//! Version 1 of the stored node facts and alarms. Frozen: see [`super`].

use serde::{Deserialize, Serialize};

use crate::release::{Component, ComponentKind};
use crate::upgrade::{
    AlarmCleared, AlarmRaised, CheckpointForkAcknowledged, CheckpointForkFound, EventsLost,
    LostEvent, NodeFacts, NodeFactsReported,
};

// ------------------------------------------- node facts and alarms (v1)

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ComponentKindV1 {
    Image,
    Package,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ComponentV1 {
    pub kind: ComponentKindV1,
    pub name: String,
    pub version: String,
    pub digest: String,
    pub epoch: u32,
    pub release: String,
    pub arch: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeFactsV1 {
    pub images: Vec<ComponentV1>,
    pub packages: Vec<ComponentV1>,
    pub bundle_free_bytes: Option<u64>,
    pub backup_free_bytes: Option<u64>,
    pub backup_bytes: Option<u64>,
    pub schema_version: Option<u32>,
    pub ready: Option<bool>,
    pub shut_down: Option<bool>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeFactsReportedV1 {
    pub node_id: String,
    pub facts: NodeFactsV1,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AlarmRaisedV1 {
    pub name: String,
    pub node_id: Option<String>,
    pub upgrade_id: Option<String>,
    pub message: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventsLostV1 {
    pub first: u64,
    pub last: u64,
    pub database_position: u64,
    pub database_hash: String,
    pub lost: Vec<LostEventV1>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LostEventV1 {
    pub position: u64,
    pub hash: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointForkFoundV1 {
    pub signed_size: u64,
    pub signed_root: String,
    pub log_size: u64,
    pub log_root: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointForkAcknowledgedV1 {
    pub signed_size: u64,
    pub signed_root: String,
    pub reason: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AlarmClearedV1 {
    pub name: String,
    pub node_id: Option<String>,
    pub upgrade_id: Option<String>,
}

impl From<ComponentKind> for ComponentKindV1 {
    fn from(k: ComponentKind) -> Self {
        match k {
            ComponentKind::Image => ComponentKindV1::Image,
            ComponentKind::Package => ComponentKindV1::Package,
        }
    }
}

impl From<ComponentKindV1> for ComponentKind {
    fn from(k: ComponentKindV1) -> Self {
        match k {
            ComponentKindV1::Image => ComponentKind::Image,
            ComponentKindV1::Package => ComponentKind::Package,
        }
    }
}

impl From<&Component> for ComponentV1 {
    fn from(c: &Component) -> Self {
        ComponentV1 {
            kind: c.kind.into(),
            name: c.name.clone(),
            version: c.version.clone(),
            digest: c.digest.clone(),
            epoch: c.epoch,
            release: c.release.clone(),
            arch: c.arch.clone(),
        }
    }
}

impl From<ComponentV1> for Component {
    fn from(c: ComponentV1) -> Self {
        Component {
            kind: c.kind.into(),
            name: c.name,
            version: c.version,
            digest: c.digest,
            epoch: c.epoch,
            release: c.release,
            arch: c.arch,
        }
    }
}

impl From<&NodeFactsReported> for NodeFactsReportedV1 {
    fn from(e: &NodeFactsReported) -> Self {
        let f = &e.facts;
        NodeFactsReportedV1 {
            node_id: e.node_id.clone(),
            facts: NodeFactsV1 {
                images: f.images.iter().map(Into::into).collect(),
                packages: f.packages.iter().map(Into::into).collect(),
                bundle_free_bytes: f.bundle_free_bytes,
                backup_free_bytes: f.backup_free_bytes,
                backup_bytes: f.backup_bytes,
                schema_version: f.schema_version,
                ready: f.ready,
                shut_down: f.shut_down,
            },
        }
    }
}

impl From<NodeFactsReportedV1> for NodeFactsReported {
    fn from(e: NodeFactsReportedV1) -> Self {
        let f = e.facts;
        NodeFactsReported {
            node_id: e.node_id,
            facts: NodeFacts {
                images: f.images.into_iter().map(Into::into).collect(),
                packages: f.packages.into_iter().map(Into::into).collect(),
                bundle_free_bytes: f.bundle_free_bytes,
                backup_free_bytes: f.backup_free_bytes,
                backup_bytes: f.backup_bytes,
                schema_version: f.schema_version,
                ready: f.ready,
                shut_down: f.shut_down,
            },
        }
    }
}

impl From<&AlarmRaised> for AlarmRaisedV1 {
    fn from(e: &AlarmRaised) -> Self {
        AlarmRaisedV1 {
            name: e.name.clone(),
            node_id: e.node_id.clone(),
            upgrade_id: e.upgrade_id.clone(),
            message: e.message.clone(),
        }
    }
}

impl From<AlarmRaisedV1> for AlarmRaised {
    fn from(e: AlarmRaisedV1) -> Self {
        AlarmRaised {
            name: e.name,
            node_id: e.node_id,
            upgrade_id: e.upgrade_id,
            message: e.message,
        }
    }
}

impl From<&AlarmCleared> for AlarmClearedV1 {
    fn from(e: &AlarmCleared) -> Self {
        AlarmClearedV1 {
            name: e.name.clone(),
            node_id: e.node_id.clone(),
            upgrade_id: e.upgrade_id.clone(),
        }
    }
}

impl From<AlarmClearedV1> for AlarmCleared {
    fn from(e: AlarmClearedV1) -> Self {
        AlarmCleared {
            name: e.name,
            node_id: e.node_id,
            upgrade_id: e.upgrade_id,
        }
    }
}

impl From<&EventsLost> for EventsLostV1 {
    fn from(e: &EventsLost) -> Self {
        EventsLostV1 {
            first: e.first,
            last: e.last,
            database_position: e.database_position,
            database_hash: e.database_hash.clone(),
            lost: e
                .lost
                .iter()
                .map(|l| LostEventV1 {
                    position: l.position,
                    hash: l.hash.clone(),
                })
                .collect(),
        }
    }
}

impl From<EventsLostV1> for EventsLost {
    fn from(e: EventsLostV1) -> Self {
        EventsLost {
            first: e.first,
            last: e.last,
            database_position: e.database_position,
            database_hash: e.database_hash,
            lost: e
                .lost
                .into_iter()
                .map(|l| LostEvent {
                    position: l.position,
                    hash: l.hash,
                })
                .collect(),
        }
    }
}

impl From<&CheckpointForkFound> for CheckpointForkFoundV1 {
    fn from(e: &CheckpointForkFound) -> Self {
        CheckpointForkFoundV1 {
            signed_size: e.signed_size,
            signed_root: e.signed_root.clone(),
            log_size: e.log_size,
            log_root: e.log_root.clone(),
        }
    }
}

impl From<CheckpointForkFoundV1> for CheckpointForkFound {
    fn from(e: CheckpointForkFoundV1) -> Self {
        CheckpointForkFound {
            signed_size: e.signed_size,
            signed_root: e.signed_root,
            log_size: e.log_size,
            log_root: e.log_root,
        }
    }
}

impl From<&CheckpointForkAcknowledged> for CheckpointForkAcknowledgedV1 {
    fn from(e: &CheckpointForkAcknowledged) -> Self {
        CheckpointForkAcknowledgedV1 {
            signed_size: e.signed_size,
            signed_root: e.signed_root.clone(),
            reason: e.reason.clone(),
        }
    }
}

impl From<CheckpointForkAcknowledgedV1> for CheckpointForkAcknowledged {
    fn from(e: CheckpointForkAcknowledgedV1) -> Self {
        CheckpointForkAcknowledged {
            signed_size: e.signed_size,
            signed_root: e.signed_root,
            reason: e.reason,
        }
    }
}
