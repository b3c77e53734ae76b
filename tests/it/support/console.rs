//! The console in a real headless Chromium, driven as a person would use it
//! (clicks, typing) over WebDriver: a chromedriver of its own, Chrome with the
//! worker's flags and a download folder, and the steps console tests repeat:
//! sign in, go to a page, wait for what it shows.

use std::{path::PathBuf, process::Stdio, time::Duration};

use crawlfleet::worker::browser::{launch, processes};
use fantoccini::{Client, ClientBuilder, Locator, elements::Element};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::{Value, json};
use tokio::process::{Child, Command};

/// How long a console test waits for what a page should show: the page asks
/// the api, which asks Postgres, on a 2-core machine that may be running the
/// rest of the suite (a few hundred ms when idle).
pub const SHOWN_WITHIN: Duration = Duration::from_secs(30);

pub struct ConsoleBrowser {
    pub client: Client,
    /// Where downloads land.
    pub downloads: PathBuf,
    base: String,
    root: Root,
    chromedriver: Child,
}

/// The folder a console browser's chromedriver and Chrome run under. When
/// it goes, so does every Chrome started under it, and the folder: also
/// when opening the browser fails midway (no chromedriver, no Chrome).
struct Root(PathBuf);

impl Drop for Root {
    fn drop(&mut self) {
        processes::kill_chrome_under(&self.0);
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl ConsoleBrowser {
    /// A browser on the console at `base` (`http://127.0.0.1:port`).
    pub async fn open(base: &str) -> ConsoleBrowser {
        Self::open_with(base, &[]).await
    }

    /// One whose system is in dark mode (`prefers-color-scheme: dark`).
    pub async fn open_dark(base: &str) -> ConsoleBrowser {
        Self::open_with(
            base,
            &[
                "--force-dark-mode",
                "--blink-settings=preferredColorScheme=0",
            ],
        )
        .await
    }

    async fn open_with(base: &str, extra_args: &[&str]) -> ConsoleBrowser {
        // Short: Chrome's socket path under it must fit in 108 bytes.
        let nonce: u32 = rand::random();
        let root = Root(std::env::temp_dir().join(format!("crawlfleet-console-{nonce:08x}")));
        let downloads = root.0.join("downloads");
        std::fs::create_dir_all(&downloads).expect("a download folder");
        let chromedriver_path =
            std::env::var("CHROMEDRIVER_PATH").unwrap_or_else(|_| "chromedriver".into());
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        // Chrome's temporary and configuration folders under the root too, so
        // that every process it starts names the root (how it is killed).
        for dir in ["tmp", "config"] {
            std::fs::create_dir_all(root.0.join(dir)).expect("a folder for Chrome");
        }
        let mut chromedriver = Command::new(&chromedriver_path)
            .arg(format!("--port={port}"))
            .env("TMPDIR", root.0.join("tmp"))
            .env("XDG_CONFIG_HOME", root.0.join("config"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("chromedriver starts (install chromium-driver)");
        let url = format!("http://127.0.0.1:{port}");
        // chromedriver listens within a fraction of a second; 10 s on a loaded machine.
        for _ in 0..400 {
            if tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
            {
                break;
            }
            if let Ok(Some(status)) = chromedriver.try_wait() {
                panic!("chromedriver exited at start: {status}");
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        let profile = root.0.join("profiles").join("console");
        std::fs::create_dir_all(&profile).expect("a profile folder");
        let mut args = launch::chrome_args(&profile, None, false);
        args.extend(extra_args.iter().map(|a| a.to_string()));
        let capabilities = json!({
            "browserName": "chrome",
            "goog:chromeOptions": {
                "args": args,
                "binary": std::env::var("CHROME_PATH").unwrap_or_else(|_| "/usr/bin/chromium".into()),
                "prefs": {"download": {
                    "default_directory": downloads.display().to_string(),
                    "prompt_for_download": false,
                }},
            },
        });
        let serde_json::Value::Object(capabilities) = capabilities else {
            unreachable!("built as an object")
        };
        let client = ClientBuilder::new(HttpConnector::new())
            .capabilities(capabilities)
            .connect(&url)
            .await
            .expect("a Chrome session");
        ConsoleBrowser {
            client,
            downloads,
            base: base.to_owned(),
            root,
            chromedriver,
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

    /// What script `code` returns in the page; panics naming it when it throws.
    pub async fn script(&self, code: &str) -> Value {
        self.client
            .execute(code, vec![])
            .await
            .unwrap_or_else(|e| panic!("running {code}: {e}"))
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

    /// Accepts the page's `confirm()` once it is shown (a click's handler may
    /// take a moment on a loaded machine).
    pub async fn answer_the_question(&self) {
        let started = std::time::Instant::now();
        while self.client.accept_alert().await.is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "no question asked"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The page fits a 390 px wide phone: nothing scrolls sideways.
    pub async fn assert_fits_a_phone(&self, page: &str) {
        let sizes = self
            .script(
                "return [document.documentElement.scrollWidth, document.documentElement.clientWidth]",
            )
            .await;
        let (scroll, width) = (sizes[0].as_i64().unwrap(), sizes[1].as_i64().unwrap());
        assert!(width <= 390, "a phone's width: {width}");
        assert!(
            scroll <= width,
            "{page} scrolls sideways: {scroll} > {width}"
        );
    }

    /// Sets an input's value as a person would type it (clears it first).
    pub async fn type_into(&self, css: &str, text: &str) {
        let field = self.find(css).await;
        field.clear().await.expect("clearing the field");
        field.send_keys(text).await.expect("typing");
    }

    /// What axe-core finds against WCAG 2.1 A and AA on the page as it is
    /// now: one line per broken rule, with the elements it names. axe is
    /// injected here (`scripts/axe-core` fetches it); the console never serves it.
    pub async fn accessibility_violations(&self) -> Vec<String> {
        let path = std::env::var("AXE_CORE_JS").unwrap_or_else(|_| {
            concat!(env!("CARGO_MANIFEST_DIR"), "/target/axe-core/axe.min.js").into()
        });
        let axe = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("axe-core at {path} ({e}): run scripts/axe-core"));
        self.client
            .execute(&format!("{axe}\nreturn true;"), vec![])
            .await
            .expect("injecting axe-core");
        let found = self
            .client
            .execute_async(
                r#"const done = arguments[arguments.length - 1];
                   axe.run(document, {runOnly: {type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]}})
                     .then((r) => done(r.violations.map((v) =>
                       `${v.id} (${v.impact}): ${v.help} at ${v.nodes.slice(0, 3).map((n) => n.target.join(" ")).join(", ")}`)))
                     .catch((e) => done([`axe failed: ${e}`]));"#,
                vec![],
            )
            .await
            .expect("running axe-core");
        serde_json::from_value(found).expect("a list of violations")
    }

    /// Ends the session, chromedriver and every Chrome it started; removes the folders.
    pub async fn close(mut self) {
        let _ = self.client.clone().close().await;
        let _ = self.chromedriver.kill().await;
        processes::kill_chrome_under_and_wait(&self.root.0, Duration::from_secs(10)).await;
    }
}

/// A test that fails midway leaves no Chrome and no folder behind either:
/// chromedriver goes first, then `Root` takes its Chromes and the folder.
impl Drop for ConsoleBrowser {
    fn drop(&mut self) {
        let _ = self.chromedriver.start_kill();
    }
}
