//! Crawls a test asks for, the runs they queue, waiting for those runs and
//! reading their results.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::{ON_DEMAND, TestApp};

/// The states a run ends in, one way or the other.
const ENDED: [&str; 2] = ["completed", "failed"];

impl TestApp {
    /// Asks for a crawl of a keyword; returns the ids of the runs queued.
    pub async fn crawl(&self, keyword_id: i64) -> Vec<i64> {
        let (status, body) = self
            .post(&format!("/api/keywords/{keyword_id}/crawl"), json!({}))
            .await;
        assert_eq!(status, StatusCode::ACCEPTED, "{body}");
        body["queued"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["id"].as_i64().unwrap())
            .collect()
    }

    /// A new keyword on one site, crawled now; returns its run.
    pub async fn crawl_once(&self, keyword: &str, site: i64) -> i64 {
        let kw = self.create_keyword(keyword, &[site], ON_DEMAND).await;
        self.crawl(kw).await[0]
    }

    /// `n` new keywords on one site (`{prefix}0`, `{prefix}1`...), each
    /// crawled now; their runs, in that order.
    pub async fn queue_crawls(&self, site: i64, prefix: &str, n: usize) -> Vec<i64> {
        let mut runs = Vec::new();
        for i in 0..n {
            runs.push(self.crawl_once(&format!("{prefix}{i}"), site).await);
        }
        runs
    }

    /// A new keyword on one site, crawled until a page request of its run is
    /// in flight (`url_call`); returns the run.
    pub async fn crawl_in_flight(&self, keyword: &str, site: i64, limit: Duration) -> i64 {
        let run = self.crawl_once(keyword, site).await;
        self.wait_for_run(run, &["url_call"], limit).await;
        run
    }

    /// A new keyword on one site, crawled until its run ends; returns the run.
    pub async fn crawl_to_end(&self, keyword: &str, site: i64, limit: Duration) -> Value {
        let run = self.crawl_once(keyword, site).await;
        self.wait_for_run(run, &ENDED, limit).await
    }

    /// Like [`Self::crawl_to_end`], for a crawl that must complete: panics
    /// with the run if it failed.
    pub async fn crawl_to_completion(&self, keyword: &str, site: i64, limit: Duration) -> Value {
        let run = self.crawl_to_end(keyword, site, limit).await;
        assert_eq!(run["state"], "completed", "{keyword}: {run}");
        run
    }

    /// A site named `name` of three slow pages (1.5 s each; 5 attempts, room
    /// for a retry that meets a browser still starting on a loaded machine),
    /// crawled until page 1 is stored and page 2 is loading; returns the run.
    pub async fn slow_crawl_on_its_second_page(&self, name: &str, limit: Duration) -> i64 {
        let mut body = self.site_body(name, "/slow");
        body["search_url"] = json!(format!(
            "{}/slow?ms=1500&q={{keyword}}&page={{page}}",
            self.site.base_url()
        ));
        body["max_pages"] = json!(3);
        body["max_attempts"] = json!(5);
        let site = self.create_site(body).await;
        let run = self.crawl_once("lamp", site).await;
        crate::support::eventually(limit, "the second page requested", || async {
            (self.site.hits("/slow") >= 2).then_some(())
        })
        .await;
        run
    }

    /// Waits until the run reaches one of `states`; panics after `limit`.
    pub async fn wait_for_run(&self, run_id: i64, states: &[&str], limit: Duration) -> Value {
        let start = Instant::now();
        loop {
            let (status, run) = self.get(&format!("/api/runs/{run_id}")).await;
            assert_eq!(status, StatusCode::OK, "{run}");
            if states.contains(&run["state"].as_str().unwrap()) {
                return run;
            }
            assert!(
                start.elapsed() < limit,
                "run {run_id} did not reach {states:?} within {limit:?}: {run}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits until the run ends and returns it; panics with the run if it
    /// failed, or after `limit`.
    pub async fn wait_until_completed(&self, run_id: i64, limit: Duration) -> Value {
        let run = self.wait_for_run(run_id, &ENDED, limit).await;
        assert_eq!(run["state"], "completed", "{run}");
        run
    }

    /// Every result of a run, following the cursor.
    pub async fn results_of_run(&self, run_id: i64) -> Vec<Value> {
        self.results(&format!("run_id={run_id}")).await
    }

    /// The `title` field of every result of `run`, in stored order.
    pub async fn titles_of_run(&self, run: &Value) -> Vec<String> {
        let results = self.results_of_run(run["id"].as_i64().unwrap()).await;
        results
            .iter()
            .map(|r| r["fields"]["title"].as_str().unwrap().to_owned())
            .collect()
    }

    /// Every result `/api/results?{query}` lists, following the cursor a
    /// few at a time.
    pub async fn results(&self, query: &str) -> Vec<Value> {
        let mut all = Vec::new();
        let mut cursor = String::new();
        loop {
            let (status, page) = self
                .get(&format!("/api/results?{query}&limit=7{cursor}"))
                .await;
            assert_eq!(status, StatusCode::OK, "{page}");
            all.extend(page["items"].as_array().unwrap().iter().cloned());
            match page["next_cursor"].as_str() {
                Some(next) => cursor = format!("&cursor={next}"),
                None => return all,
            }
        }
    }
}
