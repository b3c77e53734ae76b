//! A process and everything it started, read from /proc: CPU time spent and
//! memory held (PSS). A worker's cost is its own and that of chromedriver and
//! every Chrome it runs (`crawlfleet_page_cpu_seconds`); the peer benchmark
//! weighs another tool's tree the same way.

use std::{
    collections::{HashMap, HashSet},
    fs,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    thread::JoinHandle,
    time::Duration,
};

/// How often [`PeakPss`] samples a tree's memory.
const PSS_SAMPLE_EVERY: Duration = Duration::from_millis(200);

/// The processes descending from `root` (itself included), plus those that
/// left it but still work for it: Chrome's crash handlers re-parent to PID 1
/// unless the root is a child subreaper, and are known by the profile folder
/// (`--user-data-dir`) of a Chrome in the tree.
pub fn members(root: i32) -> Vec<i32> {
    let parents = parents();
    let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
    for (&pid, &ppid) in &parents {
        children.entry(ppid).or_default().push(pid);
    }
    let mut tree = vec![root];
    let mut next = 0;
    while next < tree.len() {
        if let Some(kids) = children.get(&tree[next]) {
            tree.extend(kids);
        }
        next += 1;
    }
    let profiles: HashSet<String> = tree
        .iter()
        .filter_map(|&pid| command_line(pid))
        .flat_map(|args| {
            args.into_iter()
                .filter_map(|a| a.strip_prefix("--user-data-dir=").map(str::to_owned))
        })
        .collect();
    if !profiles.is_empty() {
        let known: HashSet<i32> = tree.iter().copied().collect();
        for &pid in parents.keys() {
            if known.contains(&pid) {
                continue;
            }
            let Some(args) = command_line(pid) else {
                continue;
            };
            if args
                .iter()
                .any(|a| profiles.iter().any(|p| a.contains(p.as_str())))
            {
                tree.push(pid);
            }
        }
    }
    tree
}

/// Every process's parent.
fn parents() -> HashMap<i32, i32> {
    let mut parents = HashMap::new();
    let Ok(entries) = fs::read_dir("/proc") else {
        return parents;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        if let Some(fields) = stat_fields(pid) {
            // Fields after the command name: state (0), ppid (1).
            if let Some(ppid) = fields.get(1).and_then(|f| f.parse().ok()) {
                parents.insert(pid, ppid);
            }
        }
    }
    parents
}

/// The fields of /proc/<pid>/stat after the command name (which may hold
/// spaces and parentheses).
fn stat_fields(pid: i32) -> Option<Vec<String>> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_name = &stat[stat.rfind(')')? + 2..];
    Some(after_name.split(' ').map(str::to_owned).collect())
}

fn command_line(pid: i32) -> Option<Vec<String>> {
    let raw = fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    Some(
        raw.split(|&b| b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect(),
    )
}

/// CPU seconds the tree has used so far: each process's user and system
/// time, and that of the children it already reaped (a renderer that came
/// and went during a batch still counts).
pub fn cpu_seconds(root: i32) -> f64 {
    // SAFETY: sysconf has no preconditions.
    let ticks_per_sec = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let ticks: u64 = members(root)
        .into_iter()
        .filter_map(stat_fields)
        .map(|fields| {
            // utime, stime, cutime, cstime: fields 14-17 of stat(5), 11-14 here.
            fields[11..15]
                .iter()
                .filter_map(|f| f.parse::<u64>().ok())
                .sum::<u64>()
        })
        .sum();
    ticks as f64 / ticks_per_sec
}

/// The proportional set size of the tree now, in KiB (shared pages split
/// between the processes sharing them, so the sum is what the tree costs).
pub fn pss_kib(root: i32) -> u64 {
    members(root)
        .into_iter()
        .filter_map(|pid| fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok())
        .filter_map(|rollup| {
            rollup.lines().find_map(|line| {
                line.strip_prefix("Pss:").and_then(|rest| {
                    rest.trim()
                        .trim_end_matches("kB")
                        .trim()
                        .parse::<u64>()
                        .ok()
                })
            })
        })
        .sum()
}

/// Samples a tree's PSS in the background until stopped; keeps the peak.
pub struct PeakPss {
    stop: Arc<AtomicBool>,
    peak: Arc<AtomicU64>,
    sampler: JoinHandle<()>,
}

impl PeakPss {
    pub fn start(root: i32) -> PeakPss {
        let stop = Arc::new(AtomicBool::new(false));
        let peak = Arc::new(AtomicU64::new(pss_kib(root)));
        let sampler = std::thread::spawn({
            let (stop, peak) = (stop.clone(), peak.clone());
            move || {
                while !stop.load(Ordering::Relaxed) {
                    peak.fetch_max(pss_kib(root), Ordering::Relaxed);
                    std::thread::sleep(PSS_SAMPLE_EVERY);
                }
            }
        });
        PeakPss {
            stop,
            peak,
            sampler,
        }
    }

    /// The highest PSS seen, in MiB.
    pub fn stop(self, root: i32) -> f64 {
        self.stop.store(true, Ordering::Relaxed);
        self.sampler.join().expect("the sampler does not panic");
        self.peak.fetch_max(pss_kib(root), Ordering::Relaxed);
        self.peak.load(Ordering::Relaxed) as f64 / 1024.0
    }
}
