//! A real browser for the dashboard's browser tier: Debian's Chromium, headless, driven over
//! WebDriver by chromedriver through fantoccini.
//!
//! `scripts/test` starts one chromedriver for the whole tier and names it in `WEBDRIVER_URL`;
//! every test opens its own browser session on it, each with a fresh profile directory.
//! Without `WEBDRIVER_URL` (a test run by hand) each browser starts its own chromedriver.
//! Chromium's background networking is switched off: this network refuses its connections.

use std::{
    path::PathBuf,
    process::{Child, Command, Stdio},
    time::Duration,
};

use fantoccini::{elements::Element, Client, ClientBuilder, Locator};

use crate::{eventually, unused_port};

/// A headless Chromium session; its profile directory and any chromedriver it started go
/// with it.
pub struct Browser {
    /// The WebDriver client.
    pub client: Client,
    profile: PathBuf,
    driver: Option<Child>,
}

impl Drop for Browser {
    fn drop(&mut self) {
        if let Some(driver) = &mut self.driver {
            let _ = driver.kill();
            let _ = driver.wait();
        }
        let _ = std::fs::remove_dir_all(&self.profile);
    }
}

/// The Chromium binary (`CHROMIUM`, default `/usr/bin/chromium`).
fn chromium() -> String {
    std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".to_owned())
}

/// The chromedriver binary (`CHROMEDRIVER`, default `/usr/bin/chromedriver`).
fn chromedriver() -> String {
    std::env::var("CHROMEDRIVER").unwrap_or_else(|_| "/usr/bin/chromedriver".to_owned())
}

/// Opens a browser, 1280×900.
pub async fn open_browser() -> Browser {
    // Two rustls providers are linked in (ring and aws-lc-rs): name the one for the process,
    // as the test receiver does, whichever of them runs first.
    let _ = tokio_rustls::rustls::crypto::ring::default_provider().install_default();
    let (url, driver) = match std::env::var("WEBDRIVER_URL") {
        Ok(url) => (url, None),
        Err(_) => {
            let port = unused_port();
            let child = Command::new(chromedriver())
                .arg(format!("--port={port}"))
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("start chromedriver (apt-get install chromium chromium-driver)");
            (format!("http://127.0.0.1:{port}"), Some(child))
        }
    };
    let profile = std::env::temp_dir().join(format!("dashboard-browser-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&profile).expect("profile directory");
    let mut capabilities = serde_json::Map::new();
    capabilities.insert(
        "goog:chromeOptions".to_owned(),
        serde_json::json!({
            "binary": chromium(),
            "args": [
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--disable-dev-shm-usage",
                "--window-size=1280,900",
                format!("--user-data-dir={}", profile.display()),
            ],
        }),
    );
    let client = eventually(Duration::from_secs(20), "chromedriver to answer", || {
        let capabilities = capabilities.clone();
        let url = url.clone();
        async move {
            ClientBuilder::rustls()
                .ok()?
                .capabilities(capabilities)
                .connect(&url)
                .await
                .ok()
        }
    })
    .await;
    Browser {
        client,
        profile,
        driver,
    }
}

impl Browser {
    /// Opens `url`.
    pub async fn goto(&self, url: &str) {
        self.client.goto(url).await.expect("navigate");
    }

    /// The element matching the CSS `selector`.
    pub async fn css(&self, selector: &str) -> Element {
        self.client
            .find(Locator::Css(selector))
            .await
            .unwrap_or_else(|e| panic!("no element {selector}: {e}"))
    }

    /// Every element matching the CSS `selector`.
    pub async fn all(&self, selector: &str) -> Vec<Element> {
        self.client
            .find_all(Locator::Css(selector))
            .await
            .expect("find elements")
    }

    /// The input labelled `label` (by the label's `for`).
    pub async fn input_labelled(&self, label: &str) -> Element {
        let xpath = format!("//*[@id=//label[normalize-space()='{label}']/@for]");
        self.client
            .find(Locator::XPath(&xpath))
            .await
            .unwrap_or_else(|e| panic!("no input labelled {label}: {e}"))
    }

    /// Clicks the button reading `text` (every button posts a form) and waits until the
    /// page it leads to has replaced this one.
    pub async fn click_button(&self, text: &str) {
        let before = self.css("html").await;
        let xpath = format!("//button[normalize-space()='{text}']");
        self.client
            .find(Locator::XPath(&xpath))
            .await
            .unwrap_or_else(|e| panic!("no button {text}: {e}"))
            .click()
            .await
            .expect("click");
        // The old document's element goes stale once the new document is loaded.
        eventually(Duration::from_secs(20), "the next page", || async {
            before.tag_name().await.is_err().then_some(())
        })
        .await;
    }

    /// The page's HTML.
    pub async fn source(&self) -> String {
        self.client.source().await.expect("page source")
    }

    /// The path of the page shown.
    pub async fn path(&self) -> String {
        self.client
            .current_url()
            .await
            .expect("url")
            .path()
            .to_owned()
    }

    /// Writes a screenshot of the page to `target/screenshots/<name>.png`.
    pub async fn screenshot(&self, name: &str) {
        let png = self.client.screenshot().await.expect("screenshot");
        let dir = screenshots_dir();
        std::fs::create_dir_all(&dir).expect("screenshot directory");
        std::fs::write(dir.join(format!("{name}.png")), png).expect("write screenshot");
    }

    /// Resizes the window to a phone's, `width`×`height`.
    pub async fn resize(&self, width: u32, height: u32) {
        self.client
            .set_window_size(width, height)
            .await
            .expect("resize");
    }
}

/// `target/screenshots`, beside the test executable's profile directory.
pub fn screenshots_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    // target/<profile>/deps/it-<hash> -> target/screenshots
    exe.ancestors()
        .nth(3)
        .map(|target| target.join("screenshots"))
        .expect("target directory")
}
