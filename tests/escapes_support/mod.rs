//! Helpers of the escape and inspect tests around the shared engine list (`common::Engine`):
//! cleanup of what a test made on an engine, and the attach requests.
#![allow(dead_code, reason = "each test binary uses a different subset")]

use super::common::{Engine, Proxy};

/// Removes containers (and networks) on one engine when dropped, even if the test panics.
pub struct Cleanup {
    pub engine: Engine,
    pub containers: Vec<String>,
    pub networks: Vec<String>,
}

impl Cleanup {
    pub fn new(engine: &Engine) -> Self {
        Cleanup {
            engine: engine.clone(),
            containers: Vec::new(),
            networks: Vec::new(),
        }
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        for c in &self.containers {
            let _ = self.engine.daemon(&["rm", "-f", "-v", c]);
        }
        for n in &self.networks {
            let _ = self.engine.daemon(&["network", "rm", n]);
        }
    }
}

/// Raw HTTP on the proxy socket: `(status, body)`.
pub fn request(p: &Proxy, method: &str, path: &str, body: Option<&str>) -> (u16, String) {
    super::common::request(&p.socket, method, path, body)
}

/// `POST /containers/{id}/attach` with `Upgrade: tcp`, as the CLI sends it.
pub fn attach_request(id: &str) -> String {
    format!(
        "POST /v1.41/containers/{id}/attach?stream=1&stdout=1&stderr=1 HTTP/1.1\r\nHost: docker\r\nConnection: Upgrade\r\nUpgrade: tcp\r\nContent-Length: 0\r\n\r\n"
    )
}

/// The websocket attach handshake.
pub fn attach_ws_request(id: &str) -> String {
    format!(
        "GET /v1.41/containers/{id}/attach/ws?stream=1&stdout=1 HTTP/1.1\r\nHost: localhost\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nOrigin: http://localhost\r\n\r\n"
    )
}
