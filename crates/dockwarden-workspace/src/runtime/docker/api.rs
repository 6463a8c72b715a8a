//! A minimal Docker Engine API client on a Unix socket for the runtime's own calls
//! (`/_ping`, listing and stopping containers): one HTTP/1.0 request per connection.

use std::path::Path;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

/// Sends one request and returns the status and body.
pub async fn call(
    socket: &Path,
    method: &str,
    path: &str,
    timeout: Duration,
) -> std::io::Result<(u16, Vec<u8>)> {
    let io = async {
        let mut s = UnixStream::connect(socket).await?;
        let head = format!("{method} {path} HTTP/1.0\r\nHost: docker\r\nContent-Length: 0\r\n\r\n");
        s.write_all(head.as_bytes()).await?;
        let mut resp = Vec::new();
        s.read_to_end(&mut resp).await?;
        Ok::<_, std::io::Error>(resp)
    };
    let resp = tokio::time::timeout(timeout, io).await.map_err(|_| {
        std::io::Error::new(std::io::ErrorKind::TimedOut, "docker API call timed out")
    })??;
    let split = resp
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| std::io::Error::other("no HTTP header end"))?;
    let status = String::from_utf8_lossy(&resp[..split])
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    Ok((status, resp[split + 4..].to_vec()))
}

/// `POST /images/load` with the tar at `tar` as the body, streamed.
pub async fn load_image(socket: &Path, tar: &Path) -> std::io::Result<()> {
    let mut file = tokio::fs::File::open(tar).await?;
    let len = file.metadata().await?.len();
    let mut s = UnixStream::connect(socket).await?;
    let head = format!(
        "POST /images/load?quiet=1 HTTP/1.0\r\nHost: docker\r\nContent-Type: application/x-tar\r\nContent-Length: {len}\r\n\r\n"
    );
    s.write_all(head.as_bytes()).await?;
    tokio::io::copy(&mut file, &mut s).await?;
    let mut resp = Vec::new();
    tokio::time::timeout(Duration::from_secs(600), s.read_to_end(&mut resp))
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "image load timed out"))??;
    let text = String::from_utf8_lossy(&resp);
    let ok = text.split_whitespace().nth(1) == Some("200") && !text.contains("\"errorDetail\"");
    if ok {
        Ok(())
    } else {
        Err(std::io::Error::other(format!(
            "image load refused: {}",
            text.lines().last().unwrap_or_default()
        )))
    }
}

/// True when the socket answers `/_ping` with 200.
pub async fn ping(socket: &Path) -> bool {
    matches!(
        call(socket, "GET", "/_ping", Duration::from_secs(2)).await,
        Ok((200, _))
    )
}

/// Waits until `/_ping` answers, checking `alive` between tries; false on timeout or death.
pub async fn wait_ping(socket: &Path, within: Duration, mut alive: impl FnMut() -> bool) -> bool {
    use dockwarden_sys::poll::{Probe, poll_until};
    poll_until(within, Duration::from_millis(10), || {
        let dead = !alive();
        async move {
            match (ping(socket).await, dead) {
                (true, _) => Probe::Done,
                (false, true) => Probe::Stop,
                (false, false) => Probe::Retry,
            }
        }
    })
    .await
    .is_done()
}

/// Ids and names of every container, running or not.
pub async fn containers(socket: &Path) -> std::io::Result<Vec<(String, String, bool)>> {
    let (status, body) = call(
        socket,
        "GET",
        "/containers/json?all=1",
        Duration::from_secs(10),
    )
    .await?;
    if status != 200 {
        return Err(std::io::Error::other(format!(
            "listing containers: HTTP {status}"
        )));
    }
    let list: serde_json::Value =
        serde_json::from_slice(&body).map_err(|e| std::io::Error::other(e.to_string()))?;
    Ok(list
        .as_array()
        .map(|a| {
            a.iter()
                .map(|c| {
                    let id = c["Id"].as_str().unwrap_or_default().to_string();
                    let name = c["Names"][0]
                        .as_str()
                        .unwrap_or_default()
                        .trim_start_matches('/')
                        .to_string();
                    (id, name, c["State"] == "running")
                })
                .collect()
        })
        .unwrap_or_default())
}
