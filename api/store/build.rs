//! `sqlx::migrate!` embeds the migrations at compile time; a new migration
//! file must rebuild the crate that embeds them.
fn main() {
    println!("cargo:rerun-if-changed=../../migrations");
}
