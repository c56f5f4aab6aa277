//! A static HTTP file server on a free loopback port (tiny_http on a
//! thread), for artifacts: `GET /<name>` answers the file's bytes, anything
//! else 404; it counts the requests and stops when dropped.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// The running server.
pub struct FileServer {
    server: Arc<tiny_http::Server>,
    /// Requests answered so far.
    pub hits: Arc<AtomicUsize>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl FileServer {
    /// Serves `files` (name, bytes) on `127.0.0.1`, a free port.
    pub fn start(files: Vec<(String, Vec<u8>)>) -> FileServer {
        let server =
            Arc::new(tiny_http::Server::http("127.0.0.1:0").expect("bind a loopback port"));
        let hits = Arc::new(AtomicUsize::new(0));
        let (s, h) = (server.clone(), hits.clone());
        let thread = std::thread::spawn(move || {
            for req in s.incoming_requests() {
                h.fetch_add(1, Ordering::SeqCst);
                let name = req.url().trim_start_matches('/').split('?').next().unwrap_or("");
                let reply = match files.iter().find(|(n, _)| n == name) {
                    Some((_, body)) => tiny_http::Response::from_data(body.clone()),
                    None => tiny_http::Response::from_data(Vec::new()).with_status_code(404),
                };
                let _ = req.respond(reply);
            }
        });
        FileServer { server, hits, thread: Some(thread) }
    }

    /// The URL of `name`.
    pub fn url(&self, name: &str) -> String {
        format!("http://{}/{name}", self.server.server_addr().to_ip().expect("an IP listener"))
    }
}

impl Drop for FileServer {
    fn drop(&mut self) {
        self.server.unblock();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
