//! Integration tests: real Postgres, Redis, headless Chromium and a fixture
//! site on loopback. One binary (faster to link); modules by subject.

mod support;

mod api_contract;
mod cloudwatch;
mod console;
mod crawl;
mod dispatch;
mod faults;
mod fleet;
mod hostile_clients;
mod hostile_input;
mod identity;
mod incremental;
mod live;
mod loopback;
mod openapi;
mod operations;
mod operator_views;
mod politeness;
mod preview;
mod render_modes;
mod results_export;
mod scheduling;
mod sessions;
mod ssrf;
mod worker_faults;
