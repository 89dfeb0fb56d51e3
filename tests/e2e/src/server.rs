//! A static file server on 127.0.0.1 for the site's build folder. Paths without a file behind
//! them get index.html (as a static host configured for a single-page app would answer); a
//! browser that accepts gzip gets every file gzipped, as static hosts send them.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

#[derive(Debug)]
pub struct StaticServer {
    pub port: u16,
    prefix: String,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl StaticServer {
    /// Serves `root` on a free port until dropped.
    pub fn start(root: &Path) -> std::io::Result<Self> {
        Self::start_at(root, "/")
    }

    /// Serves `root` under a path prefix such as `/headroom/` (a site built for a sub-path);
    /// requests outside the prefix get 404.
    pub fn start_at(root: &Path, prefix: &str) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let port = listener.local_addr()?.port();
        listener.set_nonblocking(true)?;
        let stop = Arc::new(AtomicBool::new(false));
        let root = root.to_path_buf();
        let flag = stop.clone();
        let served_prefix = prefix.to_string();
        let thread = std::thread::spawn(move || {
            while !flag.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        let (root, prefix) = (root.clone(), served_prefix.clone());
                        std::thread::spawn(move || {
                            let _ = serve(stream, &root, &prefix);
                        });
                    }
                    Err(_) => std::thread::sleep(std::time::Duration::from_millis(5)),
                }
            }
        });
        Ok(StaticServer {
            port,
            prefix: prefix.to_string(),
            stop,
            thread: Some(thread),
        })
    }

    /// The URL of a site path (`/s/x`), under the served prefix.
    pub fn url(&self, path: &str) -> String {
        format!(
            "http://127.0.0.1:{}{}{}",
            self.port,
            self.prefix.trim_end_matches('/'),
            path
        )
    }
}

impl Drop for StaticServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn content_type(path: &Path) -> &'static str {
    match path.extension().and_then(|e| e.to_str()) {
        Some("html") => "text/html; charset=utf-8",
        Some("js") => "text/javascript",
        Some("wasm") => "application/wasm",
        Some("css") => "text/css",
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        Some("json") => "application/json",
        Some("md") => "text/markdown; charset=utf-8",
        _ => "application/octet-stream",
    }
}

/// The file for a request path, never outside `root`.
fn resolve(root: &Path, url_path: &str) -> PathBuf {
    let path = url_path.split(['?', '#']).next().unwrap_or("/");
    let mut out = root.to_path_buf();
    for c in Path::new(path.trim_start_matches('/')).components() {
        if let Component::Normal(part) = c {
            out.push(part);
        }
    }
    if out.is_file() {
        out
    } else if out.join("index.html").is_file() {
        // A folder's own index.html, as static hosts serve it (the per-page copies).
        out.join("index.html")
    } else {
        root.join("index.html")
    }
}

fn serve(stream: TcpStream, root: &Path, prefix: &str) -> std::io::Result<()> {
    stream.set_nonblocking(false)?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    // Read the headers for one: whether the browser takes gzip.
    let mut line = String::new();
    let mut gzip = false;
    while reader.read_line(&mut line)? > 2 {
        let lower = line.to_ascii_lowercase();
        gzip |= lower.starts_with("accept-encoding:") && lower.contains("gzip");
        line.clear();
    }
    let target = request_line.split_whitespace().nth(1).unwrap_or("/");
    let inside = target
        .strip_prefix(prefix.trim_end_matches('/'))
        .filter(|rest| rest.is_empty() || rest.starts_with(['/', '?']));
    let file = inside.map_or_else(|| root.join("missing"), |rest| resolve(root, rest));
    let (status, body) = match inside.and_then(|_| std::fs::read(&file).ok()) {
        Some(b) => ("200 OK", b),
        None => ("404 Not Found", b"not found".to_vec()),
    };
    // Compressed as static hosts serve it, so that a throttled network carries what it would.
    let (body, encoding) = if gzip && status.starts_with("200") {
        (gzipped(&file, &body)?, "Content-Encoding: gzip\r\n")
    } else {
        (body, "")
    };
    let mut stream = stream;
    write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: {}\r\n{encoding}Content-Length: {}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n",
        content_type(&file),
        body.len()
    )?;
    stream.write_all(&body)?;
    stream.flush()
}

/// `body` (the file at `path`) gzipped at the level the budgets measure, compressed once per
/// file and process: the build does not change while the tests run.
fn gzipped(path: &Path, body: &[u8]) -> std::io::Result<Vec<u8>> {
    static CACHE: std::sync::OnceLock<Mutex<HashMap<PathBuf, Vec<u8>>>> =
        std::sync::OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    if let Some(hit) = cache.lock().ok().and_then(|c| c.get(path).cloned()) {
        return Ok(hit);
    }
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    enc.write_all(body)?;
    let out = enc.finish()?;
    if let Ok(mut c) = cache.lock() {
        c.insert(path.to_path_buf(), out.clone());
    }
    Ok(out)
}
