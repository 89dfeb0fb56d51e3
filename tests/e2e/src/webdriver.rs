//! A minimal blocking WebDriver client for chromedriver and headless Chromium.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// A chromedriver process on a free port, killed on drop.
#[derive(Debug)]
pub struct Driver {
    child: Child,
    pub base: String,
    agent: ureq::Agent,
}

fn agent() -> ureq::Agent {
    ureq::Agent::new_with_config(
        ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(60)))
            .build(),
    )
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free local port")
}

impl Driver {
    /// Starts `$CHROMEDRIVER` (default `/usr/bin/chromedriver`) and waits until it is ready.
    pub fn start() -> Driver {
        let bin = std::env::var("CHROMEDRIVER").unwrap_or_else(|_| "/usr/bin/chromedriver".into());
        let port = free_port();
        let child = Command::new(&bin)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {bin} (scripts/setup.sh installs it): {e}"));
        let driver = Driver {
            child,
            base: format!("http://127.0.0.1:{port}"),
            agent: agent(),
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let ready = driver
                .agent
                .get(&format!("{}/status", driver.base))
                .call()
                .ok()
                .and_then(|mut r| r.body_mut().read_json::<Value>().ok())
                .is_some_and(|v| v["value"]["ready"] == json!(true));
            if ready {
                return driver;
            }
            assert!(
                Instant::now() < deadline,
                "chromedriver did not become ready"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// A new browser session with a fresh profile and the given window size.
    pub fn session(&self, width: u32, height: u32) -> Session<'_> {
        self.session_with(width, height, None)
    }

    /// A session that emulates a phone screen (headless windows cannot be narrower than
    /// 500 px; emulation sets the real viewport width and pixel ratio).
    pub fn phone_session(&self, width: u32, height: u32) -> Session<'_> {
        self.session_with(
            width,
            height,
            Some(json!({"deviceMetrics": {"width": width, "height": height, "pixelRatio": 2.0, "mobile": true, "touch": true}})),
        )
    }

    fn session_with(&self, width: u32, height: u32, mobile: Option<Value>) -> Session<'_> {
        let profile = std::env::temp_dir().join(format!(
            "headroom-e2e-{}-{}",
            std::process::id(),
            free_port()
        ));
        let args = [
            "--headless=new".to_string(),
            "--no-sandbox".into(),
            "--disable-gpu".into(),
            "--disable-dev-shm-usage".into(),
            "--disable-background-networking".into(),
            "--disable-component-update".into(),
            "--disable-sync".into(),
            "--disable-quic".into(),
            "--no-first-run".into(),
            "--hide-scrollbars".into(),
            format!("--window-size={width},{height}"),
            format!("--user-data-dir={}", profile.display()),
        ];
        let mut options = json!({
            "args": args,
            "binary": std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into()),
        });
        if let Some(m) = mobile {
            options["mobileEmulation"] = m;
        }
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": options,
        }}});
        let v = self.post("/session", caps);
        let id = v["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {v}"))
            .to_string();
        Session {
            driver: self,
            id,
            profile,
        }
    }

    fn post(&self, path: &str, body: Value) -> Value {
        self.agent
            .post(&format!("{}{path}", self.base))
            .send_json(body)
            .and_then(|mut r| r.body_mut().read_json::<Value>())
            .unwrap_or_else(|e| panic!("WebDriver POST {path}: {e}"))
    }

    fn get(&self, path: &str) -> Value {
        self.agent
            .get(&format!("{}{path}", self.base))
            .call()
            .and_then(|mut r| r.body_mut().read_json::<Value>())
            .unwrap_or_else(|e| panic!("WebDriver GET {path}: {e}"))
    }

    fn delete(&self, path: &str) {
        let _ = self.agent.delete(&format!("{}{path}", self.base)).call();
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One browser window.
#[derive(Debug)]
pub struct Session<'d> {
    driver: &'d Driver,
    id: String,
    profile: std::path::PathBuf,
}

/// A WebDriver element reference.
#[derive(Debug, Clone)]
pub struct Element(String);

const ELEMENT_KEY: &str = "element-6066-11e4-a52e-4f735466cecf";

fn ok(v: Value, what: &str) -> Value {
    if let Some(err) = v["value"]["error"].as_str() {
        panic!("{what}: {err}: {}", v["value"]["message"]);
    }
    v["value"].clone()
}

impl Session<'_> {
    fn path(&self, rest: &str) -> String {
        format!("/session/{}{rest}", self.id)
    }

    pub fn goto(&self, url: &str) {
        ok(
            self.driver.post(&self.path("/url"), json!({ "url": url })),
            url,
        );
    }

    /// Sends a Chrome DevTools Protocol command (chromedriver's `goog/cdp/execute`), such as
    /// `Network.emulateNetworkConditions`, and returns its result.
    pub fn cdp(&self, cmd: &str, params: Value) -> Value {
        ok(
            self.driver.post(
                &self.path("/goog/cdp/execute"),
                json!({ "cmd": cmd, "params": params }),
            ),
            cmd,
        )
    }

    /// Runs a script (a function body; `arguments` holds `args`) and returns its value.
    pub fn js(&self, script: &str, args: Value) -> Value {
        ok(
            self.driver.post(
                &self.path("/execute/sync"),
                json!({ "script": script, "args": args }),
            ),
            script,
        )
    }

    /// Polls `predicate` (a script returning a truthy value) until it holds; panics with
    /// `what` after `timeout`. Never a fixed sleep.
    pub fn wait_for(&self, predicate: &str, timeout: Duration, what: &str) -> Value {
        let deadline = Instant::now() + timeout;
        loop {
            let v = self.js(predicate, json!([]));
            if !(v.is_null() || v == json!(false) || v == json!("") || v == json!(0)) {
                return v;
            }
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// Waits until the app has drawn its first frame (it sets `data-ready-ms` on `<body>`).
    pub fn wait_ready(&self) -> f64 {
        self.wait_for(
            "return document.body.getAttribute('data-ready-ms')",
            Duration::from_secs(30),
            "the app to be ready",
        )
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or(f64::NAN)
    }

    pub fn find(&self, css: &str) -> Element {
        let v = ok(
            self.driver.post(
                &self.path("/element"),
                json!({ "using": "css selector", "value": css }),
            ),
            css,
        );
        Element(v[ELEMENT_KEY].as_str().unwrap_or_default().to_string())
    }

    pub fn clear(&self, el: &Element) {
        ok(
            self.driver
                .post(&self.path(&format!("/element/{}/clear", el.0)), json!({})),
            "clear",
        );
    }

    pub fn type_text(&self, el: &Element, text: &str) {
        ok(
            self.driver.post(
                &self.path(&format!("/element/{}/value", el.0)),
                json!({ "text": text }),
            ),
            "send keys",
        );
    }

    pub fn click(&self, el: &Element) {
        ok(
            self.driver
                .post(&self.path(&format!("/element/{}/click", el.0)), json!({})),
            "click",
        );
    }

    /// Chooses `value` in the `<select>` with this id, as a person would (a change event).
    pub fn select(&self, id: &str, value: &str) {
        let found = self.js(
            "const e = document.getElementById(arguments[0]); if (!e) return false; e.value = arguments[1]; e.dispatchEvent(new Event('change', {bubbles: true})); return e.value === arguments[1];",
            json!([id, value]),
        );
        assert_eq!(found, json!(true), "no option {value} in #{id}");
    }

    /// `data-bytes` of the element with this id, as a number.
    pub fn bytes_of(&self, id: &str) -> u64 {
        self.js(
            "const e = document.getElementById(arguments[0]); return e ? e.getAttribute('data-bytes') : null;",
            json!([id]),
        )
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no number with id {id} on the page"))
    }

    /// The current URL.
    pub fn url(&self) -> String {
        ok(self.driver.get(&self.path("/url")), "url")
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// A PNG screenshot of the window.
    pub fn screenshot(&self, path: &std::path::Path) {
        use base64::Engine as _;
        let v = ok(self.driver.get(&self.path("/screenshot")), "screenshot");
        let png = base64::engine::general_purpose::STANDARD
            .decode(v.as_str().unwrap_or_default())
            .expect("a base64 PNG");
        if let Some(dir) = path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        std::fs::write(path, png).expect("writing the screenshot");
    }
}

impl Drop for Session<'_> {
    fn drop(&mut self) {
        self.driver.delete(&self.path(""));
        let _ = std::fs::remove_dir_all(&self.profile);
    }
}
