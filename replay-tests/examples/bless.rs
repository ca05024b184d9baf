//! Writes the golden bytes of every event type in its newest stored version
//! to `fixtures/events/<Type>.v<N>.bin`, never overwriting one that exists:
//! bytes once written are what the log holds forever.
//!
//! Then writes the golden dump of every recorded log (`dumps/NAME.jsonl`,
//! what this build's projections make of it) where there is none, or where
//! the projections whose read models changed have new versions; where one
//! changed at the version that made the golden dump, it writes nothing and
//! fails, naming what changed: that projection needs a new version first.
//! A golden dump of a log of another length (a log recorded again) is
//! made again only once deleted.
//!
//! `cargo run -p stratum-replay-tests --example bless`

use stratum_domain::stored::encode;
use stratum_replay_tests::{bless_dump, golden_dump_path, log_names, read_log, replay, root};

fn main() {
    let dir = root().join("fixtures/events");
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
    let mut refused = false;
    for name in log_names() {
        let events = read_log(&root().join("logs").join(format!("{name}.jsonl"))).unwrap();
        let now = replay(&events).dump();
        let path = golden_dump_path(&name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        match bless_dump(&name, std::fs::read_to_string(&path).ok().as_deref(), &now) {
            Ok(true) => {
                std::fs::write(&path, now.to_text()).unwrap();
                println!("written {}", path.display());
            }
            Ok(false) => println!("kept    {}", path.display()),
            Err(why) => {
                eprintln!("not written {}:\n{why}", path.display());
                refused = true;
            }
        }
    }
    if refused {
        std::process::exit(1);
    }
}
