//! Harness for the site's end-to-end tests and budget measurements: a static file server for
//! the release build (with the index.html fallback deep links need), a chromedriver process,
//! and a small blocking WebDriver client. Every process and thread it starts is owned and
//! stopped in `Drop`.

pub mod server;
pub mod webdriver;

use std::path::PathBuf;

/// The repository root (two levels above this crate).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The release build of the site, which `scripts/test.sh` makes with Trunk before these tests.
pub fn dist_dir() -> PathBuf {
    std::env::var_os("HEADROOM_DIST").map_or_else(|| repo_root().join("dist"), PathBuf::from)
}

/// A server of the release build in `dist/`; panics with the command to run when there is none.
pub fn site_server() -> server::StaticServer {
    let dist = dist_dir();
    assert!(
        dist.join("index.html").is_file() && dist.join("content/guides").is_dir(),
        "no site build at {}: run `trunk build --release` (scripts/test.sh does)",
        dist.display()
    );
    server::StaticServer::start(&dist).expect("a local server")
}

/// The release build served, and a browser driver for it: what nearly every test starts with.
#[derive(Debug)]
pub struct Site {
    pub server: server::StaticServer,
    pub driver: webdriver::Driver,
}

impl Site {
    /// Serves `dist/` and starts chromedriver.
    pub fn start() -> Site {
        Site {
            server: site_server(),
            driver: webdriver::Driver::start(),
        }
    }

    /// The URL of a site path (`/s/x`).
    pub fn url(&self, path: &str) -> String {
        self.server.url(path)
    }

    /// A desktop-sized window (1280 x 900).
    pub fn desktop(&self) -> webdriver::Session<'_> {
        self.driver.session(1280, 900)
    }

    /// A desktop window on `path`, once the app is interactive.
    pub fn open(&self, path: &str) -> webdriver::Session<'_> {
        let s = self.desktop();
        s.goto(&self.url(path));
        s.wait_ready();
        s
    }
}

/// A release build made for the sub-path `/headroom/` (`trunk build --release --public-url
/// /headroom/ --dist target/dist-sub`, which `scripts/test.sh` runs).
pub fn dist_sub_dir() -> PathBuf {
    std::env::var_os("HEADROOM_DIST_SUB")
        .map_or_else(|| repo_root().join("target/dist-sub"), PathBuf::from)
}

/// The `headroom` CLI the page's numbers are compared with.
pub fn cli_path() -> PathBuf {
    std::env::var_os("HEADROOM_BIN")
        .map_or_else(|| repo_root().join("target/debug/headroom"), PathBuf::from)
}

/// Runs the CLI with `args` and parses its JSON output. With `--no-replay`: the page's reserved
/// and device levels come from the slack fraction (its download leaves the allocator replay
/// out), and the comparison is with the same computation.
pub fn cli_json(args: &[&str]) -> serde_json::Value {
    let out = std::process::Command::new(cli_path())
        .args(args)
        .args(["--format", "json", "--no-replay"])
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", cli_path().display()));
    assert!(
        out.status.success(),
        "headroom {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("the CLI prints JSON")
}
