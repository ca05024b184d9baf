//! An export (`stratum events export`, one JSON line per event): a line
//! written from a recorded event, and offline a line parsed and held to its
//! stored bytes, and a whole export verified against its chain and a
//! recorded head. Pure: the caller reads and writes the lines.

use crate::log::{ChainVerifier, LogLine, Recorded, RecordedHead, Verification};

/// The export line of a recorded event, newline included: every envelope
/// field, the stored bytes, and the payload decoded for people.
pub fn line(e: &Recorded) -> Result<Vec<u8>, String> {
    let payload = crate::stored::decode(&e.event_type, e.schema_version, &e.payload)
        .map_err(|err| format!("position {}: {err}", e.position))?;
    let line = LogLine::new(e, serde_json::to_value(payload).expect("events serialize"));
    let mut out = serde_json::to_vec(&line).expect("export lines serialize");
    out.push(b'\n');
    Ok(out)
}

/// Parses one export line (`n` counts from 0) and checks that its decoded
/// payload is what its stored bytes say: the chain covers the bytes,
/// people read the JSON.
pub fn parse_line(n: usize, line: &str) -> Result<Recorded, String> {
    let parsed: LogLine = serde_json::from_str(line).map_err(|e| format!("line {}: {e}", n + 1))?;
    let e = parsed
        .to_recorded()
        .map_err(|e| format!("line {}: {e}", n + 1))?;
    let decoded = crate::stored::decode(&e.event_type, e.schema_version, &e.payload)
        .map_err(|err| format!("line {}: {err}", n + 1))?;
    // The export shows the payload as the service decoded it then: today's
    // shape, or, for an export made before an upcast, the shape of the
    // version it was stored at, read through the same upcasters.
    let decoded = serde_json::to_value(&decoded).ok();
    let then =
        crate::stored::upcast::decode_exported(&e.event_type, e.schema_version, &parsed.payload)
            .and_then(|d| serde_json::to_value(d).ok());
    if decoded.as_ref() != Some(&parsed.payload) && (then.is_none() || then != decoded) {
        return Err(format!(
            "line {}: the decoded payload is not what payloadPostcard holds",
            n + 1
        ));
    }
    Ok(e)
}

/// Verifies an export: every line parses, its payload matches its bytes,
/// the chain holds from position 1, and it reaches the recorded head if one
/// is given. An error reading a line is answered as it is.
pub fn verify<E>(
    lines: impl IntoIterator<Item = Result<String, E>>,
    recorded: Option<RecordedHead>,
) -> Result<Verification, E> {
    let mut v = ChainVerifier::expecting(recorded);
    for (n, line) in lines.into_iter().enumerate() {
        let line = line?;
        let e = match parse_line(n, &line) {
            Ok(e) => e,
            Err(reason) => {
                return Ok(Verification::Broken {
                    position: v.position + 1,
                    reason,
                })
            }
        };
        if let Err(b) = v.check(&e) {
            return Ok(Verification::Broken {
                position: b.position(),
                reason: format!("line {}: {b}", n + 1),
            });
        }
    }
    Ok(v.verdict())
}
