//! The membership digest, kept between calls: each member's stored
//! document is kept with the record it was rendered from, and a digest
//! renders again only the members whose record changed since.
//!
//! At 5,000 members a digest rendered whole serializes 5,000 documents;
//! while node agents report their applied generations, every position
//! is a new digest, yet each report changes one member. Kept documents
//! leave the SHA-256 over them and one comparison per member.

use std::collections::BTreeMap;

use stratum_domain::membership::Member;

use crate::{member_doc, members, ReadModels};

/// Each member's stored document, with the member record and the
/// `record_only_shown` it was rendered from. A document is used again
/// only where both are equal to what it would be rendered from now, so
/// the digest is [`ReadModels::membership_digest`]'s, byte for byte,
/// whatever read models it is asked about and in whatever order.
#[derive(Default)]
pub struct MemberDocs {
    kept: BTreeMap<String, Kept>,
    /// How many documents it rendered, in all.
    #[cfg(test)]
    renders: u64,
}

struct Kept {
    member: Member,
    record_only_shown: bool,
    doc: String,
}

impl MemberDocs {
    /// [`ReadModels::membership_digest`] of `rm`, rendering only the
    /// documents of members whose record is not the one kept.
    pub fn membership_digest(&mut self, rm: &ReadModels) -> String {
        let m = &rm.state.membership;
        let shown = m.record_only_shown;
        for (id, member) in &m.members {
            let fresh = self
                .kept
                .get(id)
                .is_some_and(|k| k.record_only_shown == shown && k.member == *member);
            if !fresh {
                #[cfg(test)]
                {
                    self.renders += 1;
                }
                let kept = Kept {
                    member: member.clone(),
                    record_only_shown: shown,
                    doc: member_doc(member, shown),
                };
                self.kept.insert(id.clone(), kept);
            }
        }
        // Every member of these read models is kept now: any more is one
        // they do not hold (other read models, of a log taken back).
        if self.kept.len() > m.members.len() {
            self.kept.retain(|id, _| m.members.contains_key(id));
        }
        members::membership_digest(
            m.generation,
            self.kept
                .values()
                .map(|k| (k.member.node_id.as_str(), k.doc.as_str())),
        )
    }

    /// How many documents it rendered, in all.
    #[cfg(test)]
    fn renders(&self) -> u64 {
        self.renders
    }

    /// How many documents are kept.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.kept.len()
    }
}

#[cfg(test)]
mod tests {
    use super::MemberDocs;
    use crate::ReadModels;
    use stratum_domain::membership::{Raft, Role};
    use stratum_domain::testing::{admitted, given};

    fn models(members: &[(&str, u64)]) -> ReadModels {
        let events: Vec<_> = members
            .iter()
            .map(|(id, _)| admitted(id, Role::Compute, 1))
            .collect();
        let mut rm = ReadModels {
            state: given(&events),
            ..ReadModels::default()
        };
        for (id, applied) in members {
            rm.state
                .membership
                .members
                .get_mut(*id)
                .unwrap()
                .applied_generation = *applied;
        }
        rm
    }

    /// Kept documents give the digest rendered whole, as members change,
    /// come and go, and as read models older than the kept ones are asked
    /// about.
    #[test]
    fn kept_documents_give_the_digest_rendered_whole() {
        let mut docs = MemberDocs::default();
        let a = models(&[("n-1", 0), ("n-2", 0), ("n-3", 0)]);
        assert_eq!(docs.membership_digest(&a), a.membership_digest());
        assert_eq!((docs.len(), docs.renders()), (3, 3));
        // Asked again, nothing is rendered.
        assert_eq!(docs.membership_digest(&a), a.membership_digest());
        assert_eq!(docs.renders(), 3);

        // One member's record changes: its document is rendered again.
        let b = models(&[("n-1", 0), ("n-2", 7), ("n-3", 0)]);
        assert_ne!(a.membership_digest(), b.membership_digest());
        assert_eq!(docs.membership_digest(&b), b.membership_digest());
        assert_eq!(docs.renders(), 4, "only n-2 is rendered again");
        // Back to the older read models: the kept document is not theirs.
        assert_eq!(docs.membership_digest(&a), a.membership_digest());
        assert_eq!(docs.renders(), 5);

        // Members gone from the read models are not kept.
        let c = models(&[("n-1", 0)]);
        assert_eq!(docs.membership_digest(&c), c.membership_digest());
        assert_eq!(docs.len(), 1);

        // Whether record-only removals are shown (from a storage level
        // on) changes a document's rendering, not the member's record.
        let mut d = models(&[("n-1", 0), ("n-2", 7)]);
        d.state
            .membership
            .members
            .get_mut("n-2")
            .unwrap()
            .rafts_recorded_only
            .insert(Raft::Openbao);
        let hidden = docs.membership_digest(&d);
        assert_eq!(hidden, d.membership_digest());
        d.state.membership.record_only_shown = !d.state.membership.record_only_shown;
        let before = docs.renders();
        let shown = docs.membership_digest(&d);
        assert_eq!(shown, d.membership_digest());
        assert_ne!(shown, hidden);
        assert_eq!(
            docs.renders(),
            before + 2,
            "every document, no record changed"
        );
    }
}
