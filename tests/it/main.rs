//! Integration tests: real Postgres, Redis, headless Chromium and a fixture
//! site on loopback. One binary (faster to link); modules by subject.

mod helpers;

mod api_contract;
mod crawl;
mod dispatch;
mod faults;
mod fleet;
mod live;
mod openapi;
mod operations;
mod scheduling;
mod worker_faults;
