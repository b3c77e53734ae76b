//! The test support as `benches/render_modes.rs` loads it, by this path
//! (`#[path = "../tests/it/helpers.rs"]`). The tests use `support` directly;
//! this file can go once the bench loads `support/mod.rs` itself.

// The bench uses a few of the items `support` re-exports for the tests.
#[allow(unused_imports)]
mod support;

pub use support::*;
