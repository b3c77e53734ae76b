//! The demo shop: a tiny shop website (`site`), which is also the fixture
//! site of the tests and benchmarks, and `crawlfleet-demo`, the program
//! `crawlfleet --demo` runs as its child: it serves the shop on loopback and,
//! when the fleet has no site yet, registers the shop with a keyword and
//! queues a first crawl (`register`). `serve` is that program's life: start,
//! say ready, serve until stopped.
//!
//! A crate of its own so the worker image carries none of it: the fleet
//! finds `crawlfleet-demo` next to its own executable (src/tools.rs).

pub mod register;
pub mod serve;
pub mod site;
