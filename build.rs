//! `sqlx::migrate!` embeds the files of migrations/ when the crate compiles,
//! and cargo does not know it reads them: without this, a new migration file
//! alone would leave a build that ships the schema before it.
fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
