//! The macro behind the event table in [`super`]: one entry per event type
//! declares its stored versions, their upcasters, the storage level that
//! first writes a version, and the conversions of its newest stored type;
//! [`stored_events!`] generates from the entries everything that must agree
//! with them: `encode`, `decode`, `decode_exported`, `encode_previous`,
//! `STORED_VERSIONS`, `FIRST_WRITTEN_AT` and `schema_version`.
//!
//! An entry reads:
//!
//! ```text
//! RaftPeerRemoved {
//!     upcast: [
//!         1: RaftPeerRemovedV1 => upcast::raft_peer_removed_v1_to_v2,
//!         2: RaftPeerRemovedV2 => upcast::raft_peer_removed_v2_to_v3,
//!         3: RaftPeerRemovedV3 => upcast::raft_peer_removed_v3_to_v4,
//!     ],
//!     newest: 4 @ 2: RaftPeerRemovedV4,
//!     encode: DomainEvent::RaftPeerRemoved { .. } => RaftPeerRemovedV4 { .. },
//!     decode: |e| e.into(),
//!     older: [3 => upcast::raft_peer_removed_v4_to_v3,],
//! }
//! ```
//!
//! - `upcast` lists the older versions, oldest first, each with its stored
//!   type and the upcaster to the next version: bytes of version `k` are
//!   read as its type and brought through every upcaster from `k` on.
//! - `newest` is the version `encode` writes, with its stored type; `@ L`
//!   after a version number names the storage level that first writes it
//!   (none: level 1, everything written before levels existed).
//! - `encode` is the event's pattern and the newest stored value made from
//!   its bindings; `decode` makes the event back from the newest stored
//!   value `e`, and may use `?` on a `Result<_, String>` (a payload that
//!   does not decode, said in the error).
//! - `older`, optional, lists the older versions a build still writes
//!   while the log is not finalized at the newest's level, each with the
//!   function that makes it from the newest stored value.

/// Applies the upcasters in order: `upcasts!(x; f, g)` is `g(f(x))`.
macro_rules! upcasts {
    ($x:expr;) => { $x };
    ($x:expr; $up:path $(, $rest:path)*) => { upcasts!($up($x); $($rest),*) };
}

/// Reads version `$v` from `$src` as its stored type and brings it to the
/// newest: an `if` per older version, oldest first, then the newest.
macro_rules! read_version {
    (@newest read, $src:ident, $nty:ty) => { $src.read::<$nty>()? };
    (@newest none, $src:ident, $nty:ty) => { return None };
    ($src:ident, $v:ident, $unknown:expr; []; $n:literal: $nty:ty; $newest:ident) => {
        if $v == $n {
            read_version!(@newest $newest, $src, $nty)
        } else {
            return $unknown;
        }
    };
    (
        $src:ident, $v:ident, $unknown:expr;
        [$k:literal: $ty:ty => $up:path, $($rk:literal: $rty:ty => $rup:path,)*];
        $n:literal: $nty:ty; $newest:ident
    ) => {
        if $v == $k {
            let old: $ty = $src.read()?;
            upcasts!(old; $up $(, $rup)*)
        } else {
            read_version!($src, $v, $unknown; [$($rk: $rty => $rup,)*]; $n: $nty; $newest)
        }
    };
}

macro_rules! stored_events {
    ($(
        $name:ident {
            $(upcast: [$($k:literal $(@ $kl:literal)?: $kty:ty => $up:path,)*],)?
            newest: $n:literal $(@ $nl:literal)?: $nty:ty,
            encode: $pat:pat => $enc:expr,
            decode: |$e:ident| $dec:expr,
            $(older: [$($w:literal => $down:path,)*],)?
        }
    )*) => {
        /// Every (event type, schema version) ever written: what [`decode`]
        /// reads. A test holds it to the golden bytes in
        /// `replay-tests/fixtures/events`.
        pub const STORED_VERSIONS: &[(&str, u16)] = &[
            $($($((stringify!($name), $k),)*)? (stringify!($name), $n),)*
        ];

        /// The (event type, version, storage level) of every version first
        /// written at a level above the first: `stored::levels` reads the
        /// levels from here.
        pub const FIRST_WRITTEN_AT: &[(&str, u16, u16)] = &[
            $(
                $($($((stringify!($name), $k, $kl),)?)*)?
                $((stringify!($name), $n, $nl),)?
            )*
        ];

        /// The version `encode` writes of an event's type: the newest.
        #[allow(unused_variables)]
        pub fn schema_version(event: &DomainEvent) -> u16 {
            match event {
                $($pat => $n,)*
            }
        }

        /// Encodes a domain event in its newest stored version.
        pub fn encode(event: &DomainEvent) -> Encoded {
            let (event_type, schema_version, payload) = match event {
                $($pat => (stringify!($name), $n, bytes(&$enc)),)*
            };
            Encoded {
                event_type,
                schema_version,
                payload,
            }
        }

        /// An event in an older stored version, for a log not yet
        /// finalized at the level of its newest: what the older version
        /// cannot say is left out, as the build that wrote that version
        /// left it.
        #[allow(unused_variables, unreachable_patterns)]
        fn encode_previous(event: &DomainEvent, version: u16) -> Option<Encoded> {
            let (event_type, payload) = match (event, version) {
                $($($(($pat, $w) => (stringify!($name), bytes(&$down($enc))),)*)?)*
                _ => return None,
            };
            Some(Encoded {
                event_type,
                schema_version: version,
                payload,
            })
        }

        /// Decodes any version ever written of any event type.
        pub fn decode(
            event_type: &str,
            schema_version: u16,
            payload: &[u8],
        ) -> Result<DomainEvent, DecodeError> {
            let (t, v) = (event_type, schema_version);
            let src = Postcard { t, v, payload };
            match t {
                $(stringify!($name) => {
                    let newest: $nty = read_version!(
                        src, v, Err(DecodeError::UnknownVersion(t.to_owned(), v)); [$($($k: $kty => $up,)*)?]; $n: $nty; read
                    );
                    let made = |$e: $nty| -> Result<DomainEvent, String> { Ok($dec) };
                    made(newest).map_err(|why| DecodeError::Payload(t.to_owned(), v, why))
                })*
                _ => Err(DecodeError::UnknownType(t.to_owned())),
            }
        }

        /// An export keeps each payload as JSON, as the service decoded it
        /// on the day of the export. An export made before an upcast shows
        /// the older shape. This reads such a payload as the version it was
        /// stored at (the stored types carry that version's JSON names) and
        /// brings it through the same upcasters as the bytes, so an old
        /// export and a new one of the same bytes read as the same event.
        /// `None` when the payload is not that version's shape, or the
        /// version is the newest (never upcast).
        // A type never upcast reads nothing here: its arm returns before it
        // makes an event.
        #[allow(unreachable_code, unused_variables)]
        pub fn decode_exported(
            event_type: &str,
            schema_version: u16,
            payload: &serde_json::Value,
        ) -> Option<DomainEvent> {
            let v = schema_version;
            let src = Json(payload);
            match event_type {
                $(stringify!($name) => {
                    let newest: $nty = read_version!(
                        src, v, None; [$($($k: $kty => $up,)*)?]; $n: $nty; none
                    );
                    let made = |$e: $nty| -> Result<DomainEvent, String> { Ok($dec) };
                    made(newest).ok()
                })*
                _ => None,
            }
        }
    };
}
