//! The console in a real headless Chromium: a chromedriver of its own
//! (supervised as a worker's is), Chrome with the worker's flags and a
//! download folder, and the steps console tests repeat: sign in, go to a
//! page, wait for what it shows.

use std::{path::PathBuf, time::Duration};

use crawlfleet::worker::browser::{chromedriver::ChromeDriver, launch, processes};
use fantoccini::{Client, ClientBuilder, Locator, elements::Element};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// How long a console test waits for what a page should show: the page asks
/// the api, which asks Postgres, on a 2-core machine that may be running the
/// rest of the suite (a few hundred ms when idle).
pub const SHOWN_WITHIN: Duration = Duration::from_secs(30);

pub struct ConsoleBrowser {
    pub client: Client,
    /// Where downloads land.
    pub downloads: PathBuf,
    base: String,
    root: PathBuf,
    chromedriver: Option<ChromeDriver>,
    stop: CancellationToken,
}

impl ConsoleBrowser {
    /// A browser on the console at `base` (`http://127.0.0.1:port`).
    pub async fn open(base: &str) -> ConsoleBrowser {
        // Short: Chrome's socket path under it must fit in 108 bytes.
        let nonce: u32 = rand::random();
        let root = std::env::temp_dir().join(format!("crawlfleet-console-{nonce:08x}"));
        let downloads = root.join("downloads");
        std::fs::create_dir_all(&downloads).expect("a download folder");
        let stop = CancellationToken::new();
        let chromedriver_path =
            std::env::var("CHROMEDRIVER_PATH").unwrap_or_else(|_| "chromedriver".into());
        let chromedriver =
            ChromeDriver::start(&chromedriver_path, root.join("profiles"), stop.clone())
                .await
                .expect("chromedriver starts");
        let profile = root.join("profiles").join("console");
        std::fs::create_dir_all(&profile).expect("a profile folder");
        let mut capabilities = launch::capabilities(&profile, None, None);
        capabilities["goog:chromeOptions"]["prefs"]["download"] = json!({
            "default_directory": downloads.display().to_string(),
            "prompt_for_download": false,
        });
        let client = ClientBuilder::new(HttpConnector::new())
            .capabilities(capabilities)
            .connect(chromedriver.url())
            .await
            .expect("a Chrome session");
        ConsoleBrowser {
            client,
            downloads,
            base: base.to_owned(),
            root,
            chromedriver: Some(chromedriver),
            stop,
        }
    }

    /// Opens the console and signs in with `token`.
    pub async fn sign_in(&self, token: &str) {
        self.client
            .goto(&format!("{}/", self.base))
            .await
            .expect("the console loads");
        let field = self.find("#token").await;
        field.send_keys(token).await.expect("typing the token");
        self.click("#sign-in-form button[type=submit]").await;
        self.wait_for("body[data-access=read], body[data-access=write]")
            .await;
    }

    /// Goes to a page of the console (`#/runs/12`) without reloading it.
    pub async fn go(&self, hash: &str) {
        self.client
            .execute("location.hash = arguments[0]", vec![json!(hash)])
            .await
            .expect("changing the page");
    }

    /// The first element matching `css`, once there is one.
    pub async fn find(&self, css: &str) -> Element {
        self.client
            .wait()
            .at_most(SHOWN_WITHIN)
            .for_element(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("{css} not shown within {SHOWN_WITHIN:?}: {e}"))
    }

    /// Waits until an element matches `css`.
    pub async fn wait_for(&self, css: &str) {
        self.find(css).await;
    }

    pub async fn click(&self, css: &str) {
        self.find(css)
            .await
            .click()
            .await
            .unwrap_or_else(|e| panic!("clicking {css}: {e}"));
    }

    /// Waits until the text of the first element matching `css` contains `text`; returns it.
    pub async fn wait_for_text(&self, css: &str, text: &str) -> String {
        let started = std::time::Instant::now();
        loop {
            let seen = match self.client.find(Locator::Css(css)).await {
                Ok(element) => element.text().await.unwrap_or_default(),
                Err(_) => String::new(),
            };
            if seen.contains(text) {
                return seen;
            }
            assert!(
                started.elapsed() < SHOWN_WITHIN,
                "{css} did not show {text:?} within {SHOWN_WITHIN:?}; it shows {seen:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Whether an element matching `css` is displayed (present and visible).
    pub async fn is_shown(&self, css: &str) -> bool {
        match self.client.find_all(Locator::Css(css)).await {
            Ok(elements) => {
                for element in elements {
                    if element.is_displayed().await.unwrap_or(false) {
                        return true;
                    }
                }
                false
            }
            Err(_) => false,
        }
    }

    /// Sets an input's value as a person would type it (clears it first).
    pub async fn type_into(&self, css: &str, text: &str) {
        let field = self.find(css).await;
        field.clear().await.expect("clearing the field");
        field.send_keys(text).await.expect("typing");
    }

    /// Ends the session, chromedriver and every Chrome it started; removes the folders.
    pub async fn close(mut self) {
        let _ = self.client.clone().close().await;
        self.stop.cancel();
        if let Some(chromedriver) = self.chromedriver.take() {
            chromedriver.stopped().await;
        }
        processes::kill_chrome_under_and_wait(&self.root, Duration::from_secs(10)).await;
    }
}

/// A test that fails midway leaves no Chrome and no folder behind either.
impl Drop for ConsoleBrowser {
    fn drop(&mut self) {
        self.stop.cancel();
        processes::kill_chrome_under(&self.root);
        let _ = std::fs::remove_dir_all(&self.root);
    }
}
