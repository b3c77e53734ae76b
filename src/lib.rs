//! crawlfleet: keyword crawls of many sites on a schedule, in headless Chrome,
//! on a fleet of workers. One binary; the roles are chosen at start.
//!
//! Rooms (`api`, `scheduler`, `worker`) never import one another; what they
//! share lives in `domain` (rules, no I/O), `store` (Postgres), `queue` (the
//! job contract over Redis), `events` (live events over Redis pub/sub), `net`
//! (the outbound-address guard and the hardened HTTP server) and `ops`
//! (metrics, logs, signals, probes). `app` wires the roles together;
//! `migrate` is `crawlfleet migrate` (the schema as a deploy step), `smoke`
//! `crawlfleet smoke` (whether a worker of a release can work); `tools`
//! runs the programs that ship apart from the fleet (the simulator behind
//! `crawlfleet simulate`, the demo shop behind `--demo`: the workspace's
//! crates/). docs/architecture.md walks the house.

pub mod api;
pub mod app;
pub mod config;
pub mod domain;
pub mod events;
pub mod migrate;
pub mod net;
pub mod ops;
pub mod queue;
pub mod scheduler;
pub mod smoke;
pub mod store;
pub mod tools;
pub mod worker;
