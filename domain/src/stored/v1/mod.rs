//! Version 1 of every stored type, frozen: each mirrors, field for field and
//! variant for variant, the bytes version 1 was written with.
//!
//! Postcard writes a struct's fields in definition order without names and
//! an enum's variant as its index. So nothing here is ever changed: not a
//! field, not its type, not a variant, not their order. A new shape is a
//! `V2` type in [`super::v2`] with an upcaster in [`super::upcast`]. The
//! domain types are free to change; only the conversions here follow them.
//!
//! The serde names on some of these types (camelCase fields, lowercase
//! variants) do not touch the bytes: they are the JSON an export of that
//! version showed, so an export made before an upcast can be read back
//! through the same upcasters (see [`super::decode_exported`]).
//!
//! A variant may only ever be appended to a stored enum, never inserted or
//! reordered: inserting one renumbers every variant after it, and old bytes
//! would silently decode as another variant. The golden bytes of every
//! variant in `replay-tests/fixtures/enums` catch a change that forgets it.
//!
//! The types are kept by family, each family's in its own file; they are
//! all read as `v1::*`.

mod facts;
mod iam;
mod membership;
mod storage;
mod upgrade;

pub use facts::*;
pub use iam::*;
pub use membership::*;
pub use storage::*;
pub use upgrade::*;
pub(super) use upgrade::{micros, time};
