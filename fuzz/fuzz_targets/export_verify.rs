//! Offline verify of an export (`stratum events verify --file`): any text
//! is parsed line by line and held to its chain without panicking, and a
//! verdict names a position.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stratum_domain::log::Verification;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let lines = text.lines().map(|l| Ok::<_, ()>(l.to_owned()));
    match stratum_domain::export::verify(lines, None, None).unwrap().verification {
        Verification::Intact { position, .. } => assert!(position <= text.lines().count() as u64),
        Verification::Broken { position, reason } => {
            assert!(position >= 1);
            assert!(!reason.is_empty());
        }
    }
});
