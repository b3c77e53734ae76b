//! The TLS crypto provider of the process. Dependencies compile in both of
//! rustls' providers (ring and aws-lc-rs), so rustls picks none by itself and
//! the first TLS connection (Postgres `sslmode`, `rediss://`) would panic:
//! ring is installed once, before any.

use std::sync::Once;

/// Installs ring as the process's provider (once; later calls do nothing).
pub fn use_ring_provider() {
    static INSTALLED: Once = Once::new();
    INSTALLED.call_once(|| {
        // Err only when a provider is installed already: that one stays.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}
