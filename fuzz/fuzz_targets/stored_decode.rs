//! Stored-event decoding, every type and version: the first byte picks a
//! (type, version) ever written, the rest is its payload. Decoding never
//! panics, and what decodes encodes to bytes that decode to it again.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stratum_domain::stored::{decode, encode, STORED_VERSIONS};

fuzz_target!(|data: &[u8]| {
    let Some((&pick, payload)) = data.split_first() else {
        return;
    };
    let (event_type, version) = STORED_VERSIONS[pick as usize % STORED_VERSIONS.len()];
    if let Ok(event) = decode(event_type, version, payload) {
        let again = encode(&event);
        assert_eq!(again.event_type, event_type);
        let back = decode(again.event_type, again.schema_version, &again.payload)
            .expect("what encode writes decodes");
        assert_eq!(back, event);
    }
});
