//! Rebuilds the crate when a migration is added to `migrations/`: `embed_migrations!` reads the
//! directory at compile time, and Cargo does not watch it by itself.

fn main() {
    println!("cargo:rerun-if-changed=../migrations");
}
