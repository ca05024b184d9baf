//! The projection versions of read-model rows, and the rows of one
//! projection a chunk at a time: what a server of a newer projection
//! version writes while it rebuilds the rows another build's folds made.
//!
//! Every `rm_*` row carries the version of the projection that made it
//! (`projection_version`). A build compares, trusts and rewrites rows by
//! that version: `replay --check` compares its own version's rows with
//! its fold and counts the others; a server rewrites the others once no
//! live replica runs other versions (see `docs/operator-guide.md`,
//! "Upgrading stratum").

use crate::dump::{projection_of, GENERATION, JOIN_REQUEST, KINDS, MEMBER, TOKEN};
#[cfg(test)]
use crate::DOC_KINDS;
use crate::PROJECTIONS;
use crate::{doc_row, join_request_row, member_row, token_row, Changes, ReadModels};

/// This build's version of `projection`.
pub fn version_of(projection: &str) -> Option<u32> {
    PROJECTIONS
        .iter()
        .find(|p| p.name == projection)
        .map(|p| p.version)
}

/// This build's version of the projection that makes rows of `kind` (an
/// entity kind of [`KINDS`]: `member`, `join-request`, `token`, or a
/// document kind). Every kind a fold writes has one; see the test below.
pub fn version_of_kind(kind: &str) -> u32 {
    projection_of(kind).and_then(version_of).unwrap_or(0)
}

/// The kinds of row `projection` makes, in [`KINDS`]' order (the
/// generation, a number in `rm_cluster`, is not a row).
pub fn kinds_of(projection: &str) -> impl Iterator<Item = &'static str> + '_ {
    KINDS
        .iter()
        .filter(move |(k, p)| *p == projection && *k != GENERATION)
        .map(|(k, _)| *k)
}

/// This build's projection versions as the replica registry keeps them:
/// `members=1,iam=1,upgrades=1`.
pub fn this_build() -> String {
    PROJECTIONS
        .iter()
        .map(|p| format!("{}={}", p.name, p.version))
        .collect::<Vec<_>>()
        .join(",")
}

/// Whether a replica that registered `projections` folds what this build
/// folds: the same versions; an empty list (a build from before projections
/// had versions) is every projection at version 1.
pub fn same_as_this_build(projections: &str) -> bool {
    if projections.is_empty() {
        return PROJECTIONS.iter().all(|p| p.version == 1);
    }
    projections == this_build()
}

/// A place in one projection's rows: the last (kind, id) a chunk wrote.
pub type Cursor = (&'static str, String);

impl ReadModels {
    /// The last row of `projection` in (kind, id) order, `None` when it has
    /// none: where a walk of the rows this fold holds now ends.
    pub fn last_row(&self, projection: &str) -> Option<Cursor> {
        let kinds: Vec<&'static str> = kinds_of(projection).collect();
        kinds
            .into_iter()
            .rev()
            .find_map(|kind| self.last_id(kind).map(|id| (kind, id)))
    }

    /// Up to `limit` rows of `projection`, in (kind, id) order after
    /// `after` and up to `last` (its [`Self::last_row`] when the walk
    /// began), as this fold renders them, and where the next chunk starts
    /// (`None` once every row up to `last` was given). The bound keeps a
    /// walk from chasing rows made after it began, which the commits that
    /// made them wrote at this fold's versions.
    pub fn rows_through(
        &self,
        projection: &str,
        after: Option<&Cursor>,
        last: &Cursor,
        limit: usize,
    ) -> (Changes, Option<Cursor>) {
        let mut out = Changes::default();
        let mut taken = 0;
        let mut at: Option<Cursor> = None;
        let kinds: Vec<&'static str> = kinds_of(projection).collect();
        let position = |k: &str| kinds.iter().position(|x| *x == k);
        let from = after.map_or(0, |(k, _)| position(k).unwrap_or(0));
        let Some(end) = position(last.0) else {
            return (out, None);
        };
        for kind in kinds.iter().take(end + 1).skip(from) {
            let skip = after.filter(|(k, _)| k == kind).map(|(_, id)| id.as_str());
            let cap = (*kind == last.0).then_some(last.1.as_str());
            // One more than the chunk takes: whether another chunk follows.
            for id in self.ids_after(kind, skip, limit + 1 - taken) {
                if cap.is_some_and(|c| id.as_str() > c) {
                    return (out, None);
                }
                if taken == limit {
                    return (out, at);
                }
                self.push_row(&mut out, kind, &id);
                taken += 1;
                at = Some((kind, id));
            }
        }
        (out, None)
    }

    /// The rows of the given entities as this fold renders them; an entity
    /// this fold does not have is in `removed`, to be deleted.
    pub fn rows_of<'a>(&self, entities: impl IntoIterator<Item = &'a (String, String)>) -> Changes {
        let mut out = Changes::default();
        for (kind, id) in entities {
            let known = KINDS.iter().find(|(k, _)| k == kind).map(|(k, _)| *k);
            if !known.is_some_and(|k| self.push_row(&mut out, k, id)) {
                out.removed.push((kind.clone(), id.clone()));
            }
        }
        out
    }

    /// The last id of the rows of `kind` this fold holds.
    fn last_id(&self, kind: &'static str) -> Option<String> {
        let m = &self.state.membership;
        match kind {
            MEMBER => m.members.keys().next_back().cloned(),
            JOIN_REQUEST => m.join_requests.keys().next_back().cloned(),
            TOKEN => self.state.iam.tokens.keys().next_back().cloned(),
            _ => crate::doc_ids(&self.state, kind).max().map(str::to_owned),
        }
    }

    /// Up to `n` ids of the rows of `kind` after `after`, in order: a
    /// range of the fold's ordered maps, so a chunk costs what it takes.
    fn ids_after(&self, kind: &'static str, after: Option<&str>, n: usize) -> Vec<String> {
        use std::ops::Bound::{Excluded, Unbounded};
        let from = after.map_or(Unbounded, Excluded);
        let m = &self.state.membership;
        let ranged = |keys: &mut dyn Iterator<Item = &String>| keys.take(n).cloned().collect();
        match kind {
            MEMBER => ranged(&mut m.members.range::<_, str>((from, Unbounded)).map(|(k, _)| k)),
            JOIN_REQUEST => ranged(
                &mut m
                    .join_requests
                    .range::<_, str>((from, Unbounded))
                    .map(|(k, _)| k),
            ),
            TOKEN => ranged(
                &mut self
                    .state
                    .iam
                    .tokens
                    .range::<_, str>((from, Unbounded))
                    .map(|(k, _)| k),
            ),
            // Documents are few (upgrades, releases, policies, alarms).
            _ => {
                let mut ids: Vec<&str> = crate::doc_ids(&self.state, kind)
                    .filter(|id| after.is_none_or(|a| *id > a))
                    .collect();
                ids.sort_unstable();
                ids.into_iter().take(n).map(str::to_owned).collect()
            }
        }
    }

    /// Adds the row of (`kind`, `id`) to `out`; false when the fold has none.
    fn push_row(&self, out: &mut Changes, kind: &'static str, id: &str) -> bool {
        let m = &self.state.membership;
        match kind {
            MEMBER => m
                .members
                .get(id)
                .map(|x| out.members.push(member_row(x, m.record_only_shown)))
                .is_some(),
            JOIN_REQUEST => m
                .join_requests
                .get(id)
                .map(|x| out.join_requests.push(join_request_row(x)))
                .is_some(),
            TOKEN => self
                .state
                .iam
                .tokens
                .get(id)
                .map(|x| out.tokens.push(token_row(x)))
                .is_some(),
            _ => doc_row(&self.state, kind, id)
                .map(|r| out.docs.push(r))
                .is_some(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The read models of a recorded log with members, tokens, releases
    /// and an upgrade.
    fn sample() -> ReadModels {
        let text = include_str!("../../replay-tests/logs/upgrade-done.jsonl");
        let events: Vec<_> = text
            .lines()
            .enumerate()
            .filter(|(_, l)| {
                !l.trim().is_empty() && stratum_domain::export::checkpoint_of(l).is_none()
            })
            .map(|(n, l)| stratum_domain::export::parse_line(n + 1, l).unwrap())
            .collect();
        ReadModels::replay(&events).unwrap()
    }

    #[test]
    fn a_replica_of_other_projection_versions_is_told_apart() {
        assert!(same_as_this_build(&this_build()));
        assert!(
            same_as_this_build(""),
            "before versions, every projection was 1"
        );
        assert!(!same_as_this_build("members=2,iam=1,upgrades=1"));
        assert!(!same_as_this_build("members=1"));
    }

    #[test]
    fn every_kind_a_fold_writes_has_a_projection_version() {
        for kind in DOC_KINDS.into_iter().chain([MEMBER, JOIN_REQUEST, TOKEN]) {
            assert!(version_of_kind(kind) > 0, "{kind}");
        }
        assert_eq!(
            version_of_kind(crate::doc_kind::CLUSTER),
            version_of("upgrades").unwrap()
        );
        assert_eq!(version_of_kind("no-such-kind"), 0);
    }

    #[test]
    fn a_projections_rows_come_in_chunks_that_together_are_all_its_rows() {
        let rm = sample();
        for p in PROJECTIONS {
            let mut chunks = Changes::default();
            let mut at = None;
            let mut calls = 0;
            let Some(last) = rm.last_row(p.name) else {
                panic!("{}: the sample has rows of every projection", p.name)
            };
            loop {
                let (c, next) = rm.rows_through(p.name, at.as_ref(), &last, 2);
                assert!(
                    c.members.len() + c.join_requests.len() + c.tokens.len() + c.docs.len() <= 2
                );
                chunks.members.extend(c.members);
                chunks.join_requests.extend(c.join_requests);
                chunks.tokens.extend(c.tokens);
                chunks.docs.extend(c.docs);
                calls += 1;
                match next {
                    Some(n) => at = Some(n),
                    None => break,
                }
                assert!(calls < 10_000);
            }
            let all = rm.all_rows();
            let of = |kinds: &[&str]| -> Vec<String> {
                let mut v: Vec<String> = all
                    .docs
                    .iter()
                    .filter(|d| kinds.contains(&d.kind))
                    .map(|d| format!("{}/{}", d.kind, d.id))
                    .collect();
                v.sort();
                v
            };
            let kinds: Vec<&str> = kinds_of(p.name).collect();
            let mut got: Vec<String> = chunks
                .docs
                .iter()
                .map(|d| format!("{}/{}", d.kind, d.id))
                .collect();
            got.sort();
            assert_eq!(got, of(&kinds), "{}", p.name);
            if p.name == "members" {
                assert_eq!(chunks.members, all.members);
                assert_eq!(chunks.join_requests, all.join_requests);
                assert!(!chunks.members.is_empty());
            } else {
                assert!(chunks.members.is_empty());
            }
            if p.name == "iam" {
                assert_eq!(chunks.tokens, all.tokens);
                assert!(!chunks.tokens.is_empty());
            }
        }
    }

    #[test]
    fn a_walk_ends_at_the_last_row_it_began_with() {
        let mut rm = sample();
        let last = rm.last_row("members").unwrap();
        assert_eq!(last.0, MEMBER, "the sample has no open join requests");
        // Made after the walk began: a member within the walk's range, and
        // one past its last row.
        let members = &mut rm.state.membership;
        let first = members.members.keys().next().unwrap().clone();
        let within = format!("{first}~");
        let past = format!("{}~", last.1);
        assert!(within < last.1);
        for id in [&within, &past] {
            let mut member = members.members.values().next().unwrap().clone();
            member.node_id = id.clone();
            members.members.insert(id.clone(), member);
        }
        let mut ids = Vec::new();
        let mut at = None;
        loop {
            let (c, next) = rm.rows_through("members", at.as_ref(), &last, 3);
            assert!(c.members.len() <= 3);
            ids.extend(c.members.iter().map(|m| m.node_id.clone()));
            match next {
                Some(n) => at = Some(n),
                None => break,
            }
        }
        // Every member up to the bound once, the one made within the range
        // too; the one past it not.
        let mut expected: Vec<String> = rm.state.membership.members.keys().cloned().collect();
        expected.retain(|id| *id != past);
        assert_eq!(ids, expected);
    }

    #[test]
    fn the_rows_of_entities_the_fold_does_not_have_are_removed() {
        let rm = sample();
        let id = rm.state.membership.members.keys().next().unwrap().clone();
        let rows = rm.rows_of(&[
            (MEMBER.to_owned(), id.clone()),
            (MEMBER.to_owned(), "n-gone".to_owned()),
            ("a-kind-no-build-made".to_owned(), "x".to_owned()),
        ]);
        assert_eq!(rows.members.len(), 1);
        assert_eq!(rows.members[0].node_id, id);
        assert_eq!(
            rows.removed,
            vec![
                (MEMBER.to_owned(), "n-gone".to_owned()),
                ("a-kind-no-build-made".to_owned(), "x".to_owned())
            ]
        );
    }
}
