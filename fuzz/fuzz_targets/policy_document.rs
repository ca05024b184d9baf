//! Policy documents: any JSON is validated, as an identity policy and as a
//! resource policy of each type, without panicking; a valid one evaluates.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stratum_domain::iam::{Action, ResourceType};
use stratum_domain::policy::{evaluate, read_recorded, validate_document};

fuzz_target!(|data: &[u8]| {
    let Ok(doc) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    for attached in [
        None,
        Some(ResourceType::Member),
        Some(ResourceType::Upgrade),
    ] {
        match validate_document(&doc, attached) {
            Ok(valid) => {
                let _ = evaluate(
                    [&valid],
                    "node/n-1",
                    Action::ReportJoinProgress,
                    "stratum:member/n-1",
                );
            }
            Err(issues) => assert!(!issues.is_empty()),
        }
    }
    // A recorded document is read as recorded, whatever it holds.
    let _ = read_recorded(&doc);
});
