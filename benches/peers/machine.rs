//! What a figure was measured on: the machine, its load and every version
//! involved.

use std::{path::Path, process::Command};

fn first_line(program: &str, args: &[&str]) -> String {
    Command::new(program)
        .args(args)
        .output()
        .ok()
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .and_then(|text| text.lines().next().map(str::to_owned))
        .unwrap_or_else(|| format!("({program} not found)"))
}

fn package_version(peers_dir: &Path, package: &str) -> String {
    let manifest = peers_dir
        .join("node_modules")
        .join(package)
        .join("package.json");
    std::fs::read_to_string(&manifest)
        .ok()
        .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
        .and_then(|json| json["version"].as_str().map(str::to_owned))
        .unwrap_or_else(|| "(not installed)".into())
}

/// The 1, 5 and 15 minute load averages.
pub fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split(' ').take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

pub fn print(peers_dir: &Path) {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .map(|m| m.trim_start_matches([' ', '\t', ':']).to_owned())
        .unwrap_or_default();
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let memory = meminfo.lines().next().unwrap_or_default().to_owned();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let commit = first_line("git", &["describe", "--always", "--dirty"]);
    println!(
        "date        {}",
        chrono::Utc::now().format("%Y-%m-%d %H:%M UTC")
    );
    println!("machine     {cores} cores, {model}; {memory}");
    println!(
        "load        {} (1, 5, 15 min) before the first round",
        load()
    );
    println!("crawlfleet  {commit} (release build)");
    println!("chromium    {}", first_line("chromium", &["--version"]));
    println!("node        {}", first_line("node", &["--version"]));
    println!(
        "peer        @crawlee/puppeteer {}, puppeteer-core {}",
        package_version(peers_dir, "@crawlee/puppeteer"),
        package_version(peers_dir, "puppeteer-core")
    );
}
