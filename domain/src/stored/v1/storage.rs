//! The log's storage version (storage level 2).

use serde::{Deserialize, Serialize};

use crate::storage::StorageVersionFinalized;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StorageVersionFinalizedV1 {
    pub level: u16,
    pub writes: Vec<String>,
    pub settings: String,
    pub replicas: Vec<String>,
}

impl From<&StorageVersionFinalized> for StorageVersionFinalizedV1 {
    fn from(e: &StorageVersionFinalized) -> Self {
        Self {
            level: e.level,
            writes: e.writes.clone(),
            settings: e.settings.clone(),
            replicas: e.replicas.clone(),
        }
    }
}

impl From<StorageVersionFinalizedV1> for StorageVersionFinalized {
    fn from(e: StorageVersionFinalizedV1) -> Self {
        Self {
            level: e.level,
            writes: e.writes,
            settings: e.settings,
            replicas: e.replicas,
        }
    }
}
