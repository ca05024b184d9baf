//! The stored versions a storage level lets a build write: the levels of
//! [`crate::storage`] applied to [`super::STORED_VERSIONS`], each version
//! at the level the event table marks it with ([`super::FIRST_WRITTEN_AT`]).

use std::collections::BTreeMap;

use crate::storage::{BASE_LEVEL, FINALIZED_TYPE, NEWEST_LEVEL};

use super::{FIRST_WRITTEN_AT, STORED_VERSIONS};

/// The level that first writes `event_type` at `version`: the one the
/// event table marks it with, or the first.
pub fn level_of(event_type: &str, version: u16) -> u16 {
    FIRST_WRITTEN_AT
        .iter()
        .find(|(t, v, _)| (*t, *v) == (event_type, version))
        .map_or(BASE_LEVEL, |(_, _, level)| *level)
}

/// The (event type, stored version) pairs first written at `level`, by
/// type name.
pub fn adds(level: u16) -> Vec<(&'static str, u16)> {
    let mut out: Vec<(&'static str, u16)> = FIRST_WRITTEN_AT
        .iter()
        .filter(|(_, _, l)| *l == level)
        .map(|(t, v, _)| (*t, *v))
        .collect();
    out.sort_unstable();
    out
}

/// The levels this build finalizes: from the one that brought the
/// finalization (level 1 is what a log without one is at) to its newest.
pub fn finalizable() -> std::ops::RangeInclusive<u16> {
    level_of(FINALIZED_TYPE, 1)..=NEWEST_LEVEL
}

/// The newest stored version of each event type a build may write at
/// `level`: the versions of every level up to it.
pub fn writes_at(level: u16) -> BTreeMap<&'static str, u16> {
    let mut out = BTreeMap::new();
    for (t, v) in STORED_VERSIONS {
        if level_of(t, *v) <= level {
            let newest = out.entry(*t).or_insert(*v);
            *newest = (*newest).max(*v);
        }
    }
    out
}

/// The version of `event_type` written at `level`; `None` when the type
/// is newer than the level.
pub fn version_at(event_type: &str, level: u16) -> Option<u16> {
    STORED_VERSIONS
        .iter()
        .filter(|(t, v)| *t == event_type && level_of(t, *v) <= level)
        .map(|(_, v)| *v)
        .max()
}
