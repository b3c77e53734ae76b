//! The peer: one of scripts/peers' Crawlee scripts under node, one process
//! per concurrency, fed batches of URLs on stdin and answering each with its
//! figures.

use std::{path::Path, process::Stdio, time::Duration};

use tokio::{
    io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines},
    process::{Child, ChildStdin, ChildStdout, Command},
};

use crate::Batch;

pub struct Crawlee {
    child: Child,
    stdin: ChildStdin,
    answers: Lines<BufReader<ChildStdout>>,
}

impl Crawlee {
    /// Starts `script` in `peers_dir` (where its node_modules are).
    pub fn start(peers_dir: &Path, script: &str, concurrency: usize) -> Crawlee {
        let mut child = Command::new("node")
            .arg(script)
            .arg(concurrency.to_string())
            .current_dir(peers_dir)
            // Crawlee's own logging at info costs CPU the figures should not carry.
            .env("CRAWLEE_LOG_LEVEL", "ERROR")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("node starts (scripts/bench-peers installs Crawlee)");
        let stdin = child.stdin.take().expect("piped");
        let answers = BufReader::new(child.stdout.take().expect("piped")).lines();
        Crawlee {
            child,
            stdin,
            answers,
        }
    }

    pub fn pid(&self) -> i32 {
        self.child.id().expect("running") as i32
    }

    /// Crawls `urls`; returns the script's own figures.
    pub async fn crawl(&mut self, urls: &[String]) -> Batch {
        let mut line = serde_json::to_string(urls).expect("strings serialize");
        line.push('\n');
        self.stdin.write_all(line.as_bytes()).await.unwrap();
        self.stdin.flush().await.unwrap();
        let answer = tokio::time::timeout(Duration::from_secs(600), self.answers.next_line())
            .await
            .expect("Crawlee answers within 10 minutes")
            .expect("its stdout is readable")
            .expect("it answers before exiting");
        serde_json::from_str(&answer)
            .unwrap_or_else(|e| panic!("unexpected answer from Crawlee {answer:?}: {e}"))
    }

    /// Closes its stdin (it tears its browser down and exits) and waits.
    pub async fn stop(mut self) {
        drop(self.stdin);
        if tokio::time::timeout(Duration::from_secs(30), self.child.wait())
            .await
            .is_err()
        {
            self.child.kill().await.unwrap();
        }
    }
}
