//! What a page costs the machine: the CPU time of the worker's whole process
//! tree (itself, chromedriver, every Chrome process) over the pages it
//! fetched meanwhile, sampled on the worker's housekeeping tick.

use crate::ops::{metrics::metrics, process_tree};

pub struct PageCpu {
    cpu_secs: f64,
    pages: u64,
}

impl PageCpu {
    pub fn start() -> PageCpu {
        PageCpu {
            cpu_secs: tree_cpu_secs(),
            pages: metrics().pages_fetched.get(),
        }
    }

    /// Adds the CPU time since the last sample to
    /// `crawlfleet_worker_tree_cpu_seconds_total`; when pages were fetched
    /// meanwhile, sets `crawlfleet_page_cpu_seconds` to the time per page.
    pub fn sample(&mut self) {
        let (cpu_secs, pages) = (tree_cpu_secs(), metrics().pages_fetched.get());
        // A process that left the tree before its parent reaped it takes its
        // time with it: never count backwards.
        let spent = (cpu_secs - self.cpu_secs).max(0.0);
        metrics().worker_tree_cpu.inc_by(spent);
        if pages > self.pages {
            metrics().page_cpu.set(spent / (pages - self.pages) as f64);
        }
        (self.cpu_secs, self.pages) = (cpu_secs, pages);
    }
}

fn tree_cpu_secs() -> f64 {
    process_tree::cpu_seconds(std::process::id() as i32)
}
