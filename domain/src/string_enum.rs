//! `string_enum!`: the one way the domain names a field-less enum on the
//! wire.
//!
//! ```text
//! string_enum! {
//!     /// Docs and any other attributes of the enum.
//!     pub enum Phase {
//!         Fetch = "fetch",
//!         Roll = "roll",
//!         Verify = "verify",
//!     }
//! }
//! ```
//!
//! declares the enum with `Clone, Copy, Debug, PartialEq, Eq, PartialOrd,
//! Ord, Hash, Serialize, Deserialize`, each variant renamed for serde to
//! its text, and from the same list:
//!
//! - `ALL`: every variant, an array in declaration order;
//! - `NAMES`: their texts, in the same order;
//! - `as_str` (a `const fn`) and `parse`, the text and back;
//! - `one_of`: the texts joined by `, `, for error messages.
//!
//! So the serde name, `as_str` and `parse` cannot disagree. The variants
//! keep the order they are written in: compact binary snapshots encode an
//! enum by its index, so a variant may only ever be appended.

macro_rules! string_enum {
    (
        $(#[$m:meta])*
        $vis:vis enum $name:ident {
            $($(#[$vm:meta])* $variant:ident = $text:literal),+ $(,)?
        }
    ) => {
        $(#[$m])*
        #[derive(
            Clone,
            Copy,
            Debug,
            PartialEq,
            Eq,
            PartialOrd,
            Ord,
            Hash,
            ::serde::Serialize,
            ::serde::Deserialize,
        )]
        $vis enum $name {
            $($(#[$vm])* #[serde(rename = $text)] $variant),+
        }

        impl $name {
            /// Every variant, in declaration order.
            pub const ALL: [$name; [$($name::$variant),+].len()] = [$($name::$variant),+];

            /// The names of `ALL`, in the same order, as the wire spells
            /// them.
            pub const NAMES: [&'static str; [$($text),+].len()] = [$($text),+];

            /// The name on the wire.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text),+
                }
            }

            /// The variant a wire name names, if any.
            pub fn parse(s: &str) -> Option<Self> {
                match s {
                    $($text => Some($name::$variant),)+
                    _ => None,
                }
            }

            /// The accepted values, for error messages.
            pub fn one_of() -> String {
                $name::NAMES.join(", ")
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use std::fmt::Debug;

    use serde::de::DeserializeOwned;
    use serde::Serialize;

    use crate::error::ErrorCode;
    use crate::iam::ResourceType;
    use crate::membership::{JoinRequestStatus, MemberState, Raft, Role};
    use crate::policy::Effect;
    use crate::release::ComponentKind;
    use crate::upgrade::{
        BackupLocation, NodeKind, NodeStatus, Phase, ReleaseSource, StepKind, UpgradeMode,
        UpgradeState,
    };

    /// `ALL`, `NAMES`, `as_str`, `parse` and the serde forms of one enum
    /// agree, and each variant is its index in the compact binary form.
    fn agrees<T>(
        all: &[T],
        names: &[&str],
        as_str: fn(T) -> &'static str,
        parse: fn(&str) -> Option<T>,
    ) where
        T: Copy + PartialEq + Debug + Serialize + DeserializeOwned,
    {
        assert_eq!(all.len(), names.len());
        for (i, (&v, &name)) in all.iter().zip(names).enumerate() {
            assert_eq!(as_str(v), name);
            assert_eq!(parse(name), Some(v));
            assert_eq!(serde_json::to_value(v).unwrap(), name);
            assert_eq!(serde_json::from_value::<T>(name.into()).unwrap(), v);
            assert_eq!(
                postcard::to_allocvec(&v).unwrap(),
                postcard::to_allocvec(&(i as u32)).unwrap(),
                "{v:?}"
            );
        }
        assert_eq!(parse(""), None);
        assert_eq!(parse(&format!("{}!", names[0])), None);
    }

    macro_rules! check {
        ($($t:ty),+ $(,)?) => {
            $(agrees::<$t>(&<$t>::ALL, &<$t>::NAMES, <$t>::as_str, <$t>::parse);)+
        };
    }

    #[test]
    fn every_string_enum_names_each_variant_one_way() {
        check!(
            Role,
            MemberState,
            Raft,
            JoinRequestStatus,
            ResourceType,
            ErrorCode,
            Effect,
            ComponentKind,
            UpgradeState,
            UpgradeMode,
            NodeKind,
            BackupLocation,
            Phase,
            NodeStatus,
            ReleaseSource,
            StepKind,
        );
        assert_eq!(Phase::one_of(), "fetch, roll, verify");
        assert_eq!(Role::NAMES, ["control", "compute", "storage", "hybrid"]);
    }
}
