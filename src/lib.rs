//! crawlfleet: keyword crawls of many sites on a schedule, in headless Chrome,
//! on a fleet of workers. One binary; the roles are chosen at start.
//!
//! Rooms (`api`, `scheduler`, `worker`) never import one another; what they
//! share lives in `domain` (rules, no I/O), `store` (Postgres) and `queue`
//! (the job contract over Redis).

pub mod api;
pub mod app;
pub mod cloudwatch;
pub mod config;
pub mod demo;
pub mod demo_site;
pub mod domain;
pub mod events;
pub mod healthcheck;
pub mod http_server;
pub mod metrics;
pub mod ops_server;
pub mod queue;
pub mod scheduler;
pub mod sealing;
pub mod shutdown;
pub mod store;
pub mod target_guard;
pub mod telemetry;
pub mod worker;
