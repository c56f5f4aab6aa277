//! Headless Chromium (Debian's `chromium`) driven over its remote debugging
//! protocol: load a page, evaluate JavaScript in it, take a screenshot, all
//! in the same page instance (so a test sees live updates without a
//! reload). Chromium runs in a process group of its own with a temp
//! `--user-data-dir` and `--no-sandbox` (tests run as root); dropping the
//! handle kills the group.
#![allow(dead_code)]

use serde_json::{json, Value};
use std::net::TcpStream;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tungstenite::{Message, WebSocket};

/// Where Chromium is expected (`scripts/test` installs Debian's package).
pub fn chromium_binary() -> PathBuf {
    for p in ["/usr/bin/chromium", "/usr/bin/chromium-browser"] {
        if Path::new(p).exists() {
            return PathBuf::from(p);
        }
    }
    panic!(
        "chromium is not installed: the web page test needs Debian's `chromium` package \
         (scripts/test installs it; by hand: apt-get install -y chromium)"
    )
}

/// One headless Chromium with one page.
pub struct Chromium {
    child: Child,
    ws: WebSocket<TcpStream>,
    next_id: u64,
}

impl Chromium {
    /// Starts Chromium on `url` with its profile in `profile` (a fresh
    /// directory), a 1280×1000 window, and connects to the page.
    pub fn launch(url: &str, profile: &Path, stderr: &Path) -> Chromium {
        let bin = chromium_binary();
        std::fs::create_dir_all(profile).expect("create the profile dir");
        let child = Command::new(&bin)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                "--no-default-browser-check",
                "--disable-extensions",
                "--hide-scrollbars",
                "--window-size=1280,1000",
                "--remote-debugging-address=127.0.0.1",
                "--remote-debugging-port=0",
            ])
            .arg(format!("--user-data-dir={}", profile.display()))
            .arg(url)
            .current_dir(profile)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(stderr).expect("create chromium's stderr"))
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()));
        let mut this = Chromium { child, ws: connect_later(), next_id: 1 };
        // The port Chromium picked is written to DevToolsActivePort.
        let port_file = profile.join("DevToolsActivePort");
        let deadline = Instant::now() + Duration::from_secs(60);
        let port: u16 = loop {
            if let Some(p) = std::fs::read_to_string(&port_file)
                .ok()
                .and_then(|s| s.lines().next().and_then(|l| l.trim().parse().ok()))
            {
                break p;
            }
            assert!(Instant::now() < deadline, "chromium wrote no DevToolsActivePort within 60 s");
            if let Ok(Some(st)) = this.child.try_wait() {
                panic!("chromium exited at start ({st}): see {}", stderr.display());
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        let addr = format!("127.0.0.1:{port}");
        // The page target's WebSocket.
        let ws_url = loop {
            let list =
                get11(&addr, "/json/list").and_then(|b| serde_json::from_str::<Value>(&b).ok());
            let found = list.as_ref().and_then(|l| l.as_array()).and_then(|targets| {
                targets
                    .iter()
                    .find(|t| t["type"] == "page")
                    .and_then(|t| t["webSocketDebuggerUrl"].as_str().map(str::to_owned))
            });
            if let Some(u) = found {
                break u;
            }
            assert!(Instant::now() < deadline, "chromium listed no page target within 60 s");
            std::thread::sleep(Duration::from_millis(100));
        };
        let stream = TcpStream::connect(&addr).expect("connect to chromium's debugging port");
        stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let (ws, _) = tungstenite::client::client(ws_url.as_str(), stream)
            .unwrap_or_else(|e| panic!("WebSocket to {ws_url}: {e}"));
        this.ws = ws;
        this
    }

    /// Sends one protocol command and returns its `result`.
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        let msg = json!({"id": id, "method": method, "params": params});
        self.ws.send(Message::text(msg.to_string())).expect("send to chromium");
        loop {
            let reply = self.ws.read().unwrap_or_else(|e| panic!("{method}: no answer: {e}"));
            let Message::Text(text) = reply else { continue };
            let v: Value = serde_json::from_str(&text).expect("chromium sends JSON");
            if v["id"] == id {
                if !v["error"].is_null() {
                    panic!("{method} failed: {}", v["error"]);
                }
                return v["result"].clone();
            }
        }
    }

    /// Evaluates `expr` in the page and returns its value (JSON).
    pub fn eval(&mut self, expr: &str) -> Value {
        let r = self.call(
            "Runtime.evaluate",
            json!({"expression": expr, "returnByValue": true, "awaitPromise": true}),
        );
        if !r["exceptionDetails"].is_null() {
            panic!("{expr}: {}", r["exceptionDetails"]);
        }
        r["result"]["value"].clone()
    }

    /// Saves a PNG of the whole page to `path`.
    pub fn screenshot(&mut self, path: &Path) {
        use base64::Engine as _;
        let r = self.call(
            "Page.captureScreenshot",
            json!({"format": "png", "captureBeyondViewport": true}),
        );
        let data = r["data"].as_str().expect("screenshot data");
        let png = base64::engine::general_purpose::STANDARD.decode(data).expect("base64 PNG");
        std::fs::write(path, png).expect("write the screenshot");
    }
}

/// `GET path` in HTTP/1.1 (Chromium's debugging server refuses 1.0): the
/// body.
fn get11(addr: &str, path: &str) -> Option<String> {
    use std::io::{Read, Write};
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(s, "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").ok()?;
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw).into_owned();
    text.split_once("\r\n\r\n").map(|(_, b)| b.to_owned())
}

/// A placeholder socket until the real one is connected (never used).
fn connect_later() -> WebSocket<TcpStream> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let s = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    WebSocket::from_raw_socket(s, tungstenite::protocol::Role::Client, None)
}

impl Drop for Chromium {
    fn drop(&mut self) {
        let _ = self.ws.close(None);
        // The whole group: the browser and its helper processes.
        let pgid = self.child.id();
        let _ = Command::new("kill").args(["-KILL", "--", &format!("-{pgid}")]).status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
