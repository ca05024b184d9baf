//! Release manifests: any JSON is parsed and its signature checked without
//! panicking; a parsed release reads back from its canonical text.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stratum_domain::release::{
    canonical, parse_manifest, read_recorded, verify_signature, TrustedKeys,
};

fuzz_target!(|data: &[u8]| {
    let Ok(manifest) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    let keys = TrustedKeys::parse(&stratum_domain::testing::release_keys_spec()).unwrap();
    let _ = verify_signature(&manifest, &keys);
    if let Ok(release) = parse_manifest(&manifest) {
        let text = canonical(&manifest);
        let again = read_recorded(&text);
        assert_eq!(again.version, release.version);
    }
});
