//! Integration tests: real Postgres, Redis, headless Chromium and a fixture
//! site on loopback. One binary (faster to link); modules by subject.

mod support;

mod answer_budget;
mod api_contract;
mod changes;
mod client_limits;
mod cloudwatch;
mod confinement;
mod console;
mod console_schedules;
mod costly_selectors;
mod crawl;
mod crawl_bounds;
mod crawl_logging;
mod dispatch;
mod faults;
mod fleet;
mod hostile_clients;
mod hostile_input;
mod identity;
mod incremental;
mod isolation;
mod listing_filters;
mod live;
mod loopback;
mod masked_secrets;
mod openapi;
mod operations;
mod operator_views;
mod politeness;
mod preview;
mod render_modes;
mod results_export;
mod robots;
mod rotation;
mod scheduling;
mod scheduling_local;
mod sessions;
mod site_health;
mod spot;
mod ssrf;
mod startup_failures;
mod tls;
mod webhooks;
mod worker_faults;
