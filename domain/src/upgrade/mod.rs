//! Upgrades (SPEC §5): releases, the running release, and the upgrade
//! aggregate with its plan, prechecks, node reports, write freeze, cancel
//! and rollback.
//!
//! The states and the only moves between them:
//!
//! ```text
//! planned → prechecking → fetching → [staged →] backing_up → rolling → verifying → done
//! prechecking ..= verifying → failed
//! planned, prechecking, fetching, staged → canceled
//! ```
//!
//! The upgrade driver (a process manager in the API crate) moves an upgrade
//! on by sending [`UpgradeCommand::Advance`]: `decide` looks at the recorded
//! facts (node reports, the backup report) and answers the one step that is
//! due, or nothing. So every step is an event, decided under the log's write
//! lock like any command, and a restarted service resumes from the log.
//!
//! The module is split along its seams: [`model`] (the record and the
//! plan), [`alarms`], [`commands`], [`events`], [`plan`] (what an upgrade will do),
//! [`prechecks`], [`parse`] (each command's fields parsed into the typed
//! value its decision takes), [`decide`] (one function per command, split
//! by family, holding only the rules), [`driver`] (the driver's next step)
//! and [`evolve`] (the fold).

mod alarms;
pub mod commands;
mod decide;
mod driver;
pub mod events;
mod evolve;
pub mod model;
mod parse;
mod plan;
pub mod prechecks;

pub use commands::{upgrade_stream, valid_upgrade_id, BackupTarget, UpgradeCommand, UpgradeConfig};
pub use events::*;
pub use evolve::upgrade_of;
pub use model::*;
pub use prechecks::{prechecks, PRECHECKS};
