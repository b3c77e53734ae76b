//! What the integration tests stand on, by purpose:
//!
//! - `app`: [`TestApp`], the api and the roles a test asks for, in-process on
//!   a database, a queue namespace and a fixture site of the test's own, with
//!   a method per endpoint and the steps tests repeat (sites and keywords in
//!   `app/sites.rs`, crawls and waiting for their runs in `app/runs.rs`);
//!   [`test_config`] and [`Roles`].
//! - `stores`: the Postgres and Redis a test owns ([`TestDb`], a queue name of
//!   its own), and what tests read or do there by hand ([`count_states`],
//!   [`dispatch_and_claim`], [`complete_with_one_page`], [`clear_queue`]).
//! - `processes`: crawlfleet as real OS processes ([`RoleProcess`]), the
//!   browser slots every test's Chrome shares, and what a worker killed with
//!   SIGKILL leaves behind.
//! - `faults`: outages caused for real: a Postgres link that can be cut
//!   ([`CuttableProxy`]), a Redis server of a test's own ([`OwnRedis`]).
//! - `forward_proxy`: [`TestProxy`], an HTTP and SOCKS5 proxy that sites are
//!   crawled through.
//! - `console`: [`ConsoleBrowser`], the operator's console in a real headless
//!   Chromium.
//! - `remote_chrome`: [`RemoteChrome`], a headless Chromium a worker drives
//!   over its DevTools WebSocket (`BROWSER_BACKEND=devtools`), ended with its
//!   process group; [`Backend`], and `on_each_backend!`, which runs a test
//!   once with each backend.
//! - `webdriver_endpoint`: [`WebDriverEndpoint`], chromedriver on a loopback
//!   port standing in for a Selenium Grid (`BROWSER_BACKEND=webdriver`),
//!   killed with every Chrome it started.
//! - `ports`: [`free_port`], a port a restarted process can have again.
//! - `changing_site`: [`ChangingSite`], a one-page shop a test restyles,
//!   strips of a field, or has refuse requests, between runs.
//! - `price_shop`: [`PriceShop`], a one-page shop writing prices, dates,
//!   lists and links as shops do, for the value rules; a test moves a price.
//! - `action_shop`: [`ActionShop`], a shop whose listing shows only past a
//!   cookie banner, and whose search is a form to type into and submit.
//! - `paged_shop`: [`PagedShop`], nine products paged by a next link, an
//!   offset, a "load more" button and an endless scroll, a search that
//!   repeats its page and one whose next link leads back; it counts each request.
//! - `detail_shop`: [`DetailShop`], two list pages of products each with a
//!   page of its own; a test moves a list price or breaks a product page,
//!   and it counts each request.
//! - `structured_shop`: [`StructuredShop`], a shop publishing its products
//!   as JSON-LD, microdata and OpenGraph.
//! - `request_counts`: [`RequestCounts`], every request a fixture server
//!   answered, by path and query.
//! - `polling`: [`eventually`], for what another task or process does.
//! - `webhook_receiver`: [`WebhookReceiver`], an endpoint on 127.0.0.1 that
//!   verifies messages with the Standard Webhooks reference library.
//! - `tls_servers`: Postgres and Redis speaking TLS only, with certificates of
//!   a CA the test makes ([`TestCa`], [`TlsPostgres`], [`TlsRedis`]).

mod action_shop;
mod app;
mod changing_site;
mod console;
mod detail_shop;
mod faults;
mod forward_proxy;
mod paged_shop;
mod polling;
mod ports;
mod price_shop;
mod processes;
mod remote_chrome;
mod request_counts;
mod rest;
mod stores;
mod structured_shop;
mod tls_servers;
mod webdriver_endpoint;
mod webhook_receiver;

pub use action_shop::ActionShop;
pub use app::{ON_DEMAND, Roles, TEST_SESSION_KEY, TestApp, heavy_page_fields, test_config};
pub use changing_site::{ChangingSite, Look};
pub use console::ConsoleBrowser;
pub use detail_shop::{DetailShop, Fault};
pub use faults::{CuttableProxy, OwnRedis};
pub use forward_proxy::TestProxy;
pub use paged_shop::PagedShop;
pub use polling::eventually;
pub use ports::free_port;
pub use price_shop::PriceShop;
pub use processes::{
    RoleProcess, browser_slots, chrome_of, clean_up_after_killed_worker, descendants,
    leftovers_of_worker,
};
pub(crate) use remote_chrome::on_each_backend;
pub use remote_chrome::{Backend, RemoteChrome};
pub use request_counts::RequestCounts;
pub use rest::post_ok;
pub use stores::{
    TestDb, clear_queue, complete_with_one_page, count_states, database_server, dispatch_and_claim,
    redis_url, test_queue_name,
};
pub use structured_shop::{StructuredShop, expected_list};
pub use tls_servers::{
    CaFile, DatastoreLogin, PG_USER, TestCa, TlsPostgres, TlsRedis, tls_fleet_env,
};
pub use webdriver_endpoint::WebDriverEndpoint;
pub use webhook_receiver::{Received, WebhookReceiver};
