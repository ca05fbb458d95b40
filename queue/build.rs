//! `sqlx::migrate!` embeds `migrations/` at compile time; on stable Rust it cannot tell cargo to
//! watch the folder, so a new migration would be missed until something else changed here.
fn main() {
    println!("cargo:rerun-if-changed=../migrations");
}
