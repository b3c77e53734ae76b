//! crawlfleet: keyword crawls of many sites on a schedule, in headless Chrome,
//! on a fleet of workers. One binary; the roles are chosen at start.
//!
//! Rooms (`api`, `scheduler`, `worker`) never import one another; what they
//! share lives in `domain` (rules, no I/O), `store` (Postgres), `queue` (the
//! job contract over Redis), `events` (live events over Redis pub/sub), `net`
//! (the outbound-address guard and the hardened HTTP server) and `ops`
//! (metrics, logs, signals, probes). `demo` is the demo shop and its seeding;
//! `app` wires the roles together; `migrate` is `crawlfleet migrate` (the
//! schema as a deploy step); `simulate` is the fleet simulator
//! (`crawlfleet simulate`: reads infra/, needs no store). docs/architecture.md
//! walks the house.

pub mod api;
pub mod app;
pub mod config;
pub mod demo;
pub mod domain;
pub mod events;
pub mod migrate;
pub mod net;
pub mod ops;
pub mod queue;
pub mod scheduler;
pub mod simulate;
pub mod store;
pub mod worker;
