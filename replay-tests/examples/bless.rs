//! Writes the golden bytes of every event type in its newest stored version
//! to `fixtures/events/<Type>.v<N>.bin`, never overwriting one that exists:
//! bytes once written are what the log holds forever.
//!
//! `cargo run -p stratum-replay-tests --example bless`

use stratum_domain::stored::encode;

fn main() {
    let dir = stratum_replay_tests::root().join("fixtures/events");
    std::fs::create_dir_all(&dir).unwrap();
    for event in stratum_domain::testing::one_of_each() {
        let enc = encode(&event);
        let path = dir.join(format!("{}.v{}.bin", enc.event_type, enc.schema_version));
        if path.exists() {
            println!("kept    {}", path.display());
        } else {
            std::fs::write(&path, &enc.payload).unwrap();
            println!("written {}", path.display());
        }
    }
}
