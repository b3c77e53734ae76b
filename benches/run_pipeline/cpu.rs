//! CPU time of the processes (and one thread) the pipeline runs on, from
//! /proc: user + system, in seconds.

fn ticks_per_sec() -> f64 {
    // SAFETY: sysconf has no preconditions.
    (unsafe { libc::sysconf(libc::_SC_CLK_TCK) }) as f64
}

/// The fields of a /proc/.../stat line after the command name (which may hold spaces).
fn stat_fields(path: &str) -> Option<Vec<u64>> {
    let text = std::fs::read_to_string(path).ok()?;
    let after = &text[text.rfind(')')? + 2..];
    Some(
        after
            .split_whitespace()
            .map(|f| f.parse::<i64>().unwrap_or(0) as u64)
            .collect(),
    )
}

/// utime + stime of one process (or thread) at `path`; with `children`,
/// also the CPU of its reaped children (Postgres backends that exited).
fn cpu_of(path: &str, children: bool) -> f64 {
    // After the name: state(0) ppid(1) ... utime(11) stime(12) cutime(13) cstime(14).
    let Some(f) = stat_fields(path) else {
        return 0.0;
    };
    let mut ticks = f[11] + f[12];
    if children {
        ticks += f[13] + f[14];
    }
    ticks as f64 / ticks_per_sec()
}

pub fn process(pid: i32) -> f64 {
    cpu_of(&format!("/proc/{pid}/stat"), false)
}

pub fn thread(tid: i32) -> f64 {
    cpu_of(&format!("/proc/self/task/{tid}/stat"), false)
}

/// A process and every process it started (a postmaster and its backends,
/// the exited ones included).
pub fn tree(root: i32) -> f64 {
    let mut total = cpu_of(&format!("/proc/{root}/stat"), true);
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        if pid == root {
            continue;
        }
        let path = format!("/proc/{pid}/stat");
        if stat_fields(&path).is_some_and(|f| f[1] as i32 == root) {
            total += cpu_of(&path, false);
        }
    }
    total
}

/// Busy and total CPU seconds of the whole machine (every process, anyone's).
pub fn machine() -> (f64, f64) {
    let text = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let line = text.lines().next().unwrap_or_default();
    let f: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|v| v.parse().unwrap_or(0))
        .collect();
    if f.len() < 5 {
        return (0.0, 0.0);
    }
    let total: u64 = f.iter().take(8).sum();
    let idle = f[3] + f[4];
    let hz = ticks_per_sec();
    ((total - idle) as f64 / hz, total as f64 / hz)
}

/// The processes' CPU at one moment.
#[derive(Debug, Clone, Copy, Default)]
pub struct Sample {
    pub worker: f64,
    /// The bench process: api, scheduler (dispatcher) and the page server.
    pub bench: f64,
    pub page_server: f64,
    pub postgres: f64,
    pub redis: f64,
    pub machine_busy: f64,
    pub machine_total: f64,
}

impl Sample {
    pub fn take(worker: i32, page_server_tid: i32, postmaster: i32, redis: i32) -> Sample {
        let (machine_busy, machine_total) = machine();
        Sample {
            worker: process(worker),
            bench: process(std::process::id() as i32),
            page_server: thread(page_server_tid),
            postgres: tree(postmaster),
            redis: process(redis),
            machine_busy,
            machine_total,
        }
    }

    pub fn since(&self, before: &Sample) -> Sample {
        Sample {
            worker: self.worker - before.worker,
            bench: self.bench - before.bench,
            page_server: self.page_server - before.page_server,
            postgres: self.postgres - before.postgres,
            redis: self.redis - before.redis,
            machine_busy: self.machine_busy - before.machine_busy,
            machine_total: self.machine_total - before.machine_total,
        }
    }
}
