//! The network edges every room shares: the guard that judges every outbound
//! address (targets, redirects, proxies), the hardened HTTP server the api
//! runs on, and the side port where a scheduler or worker serves `/health`
//! and `/metrics`, and who a request came from behind a trusted proxy.
//! Imports `domain` and `ops` only.

pub mod client_ip;
pub mod http_server;
pub mod side_port;
pub mod target_guard;
