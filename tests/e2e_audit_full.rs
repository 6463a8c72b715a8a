//! A full audit destination never lets a request through unaudited: with the audit log on a
//! tiny tmpfs filled to the last byte, an allowed request is refused with 503 and never reaches
//! the real dockerd, a denied one is still refused, and once space is back requests are served
//! and audited again.

mod common;
use common::*;

use std::path::{Path, PathBuf};
use std::process::Command;

/// A tmpfs mounted for the test; unmounted on drop.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(at: &Path, size: &str) -> Result<Tmpfs, String> {
        std::fs::create_dir_all(at).map_err(|e| e.to_string())?;
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(at)
            .output()
            .map_err(|e| e.to_string())?;
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).trim().to_owned());
        }
        Ok(Tmpfs(at.to_owned()))
    }

    /// Writes a filler file until the filesystem is full, then pads `audit.log` to the end of
    /// its last page (tmpfs allocates whole pages, so a short record would still fit there).
    fn fill(&self) {
        use std::io::Write;
        let mut f = std::fs::File::create(self.0.join("filler")).expect("filler");
        let block = [0u8; 512];
        while f.write_all(&block).is_ok() {}
        while f.write_all(&[0]).is_ok() {}
        let mut log = std::fs::OpenOptions::new()
            .append(true)
            .open(self.0.join("audit.log"))
            .expect("audit log");
        while log.write_all(b"\n").is_ok() {}
    }

    fn free(&self) {
        std::fs::remove_file(self.0.join("filler")).expect("remove filler");
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

fn status_of(resp: &str) -> u16 {
    resp.split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

#[test]
fn a_full_audit_log_refuses_requests_instead_of_dropping_records() {
    let dir = tempfile::Builder::new()
        .prefix("dwtest")
        .tempdir_in("/tmp")
        .expect("tempdir");
    let root = dir.path().canonicalize().expect("canonical tempdir");
    let workspace = root.join("ws");
    std::fs::create_dir_all(&workspace).expect("workspace");
    let fs = match Tmpfs::mount(&root.join("auditfs"), "64k") {
        Ok(fs) => fs,
        Err(e) => {
            println!("skipped: cannot mount a tmpfs for the audit log: {e}");
            return;
        }
    };
    // The proxy opens `<dir>/audit.log`; point it at the tiny filesystem.
    std::os::unix::fs::symlink(fs.0.join("audit.log"), root.join("audit.log")).expect("symlink");
    let p = Proxy::start_in(dir, workspace, &[]);

    let ok_ping = p.raw(b"GET /_ping HTTP/1.1\r\nHost: docker\r\nConnection: close\r\n\r\n");
    assert_eq!(status_of(&ok_ping), 200, "with space left: {ok_ping}");
    assert!(
        p.audit_log().contains("\"path\":\"/_ping\""),
        "audited: {}",
        p.audit_log()
    );

    fs.fill();
    let before = p.audit_log();

    // An allowed request is refused, loudly, and not forwarded.
    let ping = p.raw(b"GET /_ping HTTP/1.1\r\nHost: docker\r\nConnection: close\r\n\r\n");
    assert_eq!(status_of(&ping), 503, "full audit log: {ping}");
    assert!(
        ping.contains("cannot write the audit record"),
        "the message says why: {ping}"
    );
    let name = unique("auditfull");
    let create = p.docker(&["create", "--name", &name, IMAGE, "true"]);
    assert!(
        !create.status.success(),
        "create through a full audit log must fail"
    );
    let err = String::from_utf8_lossy(&create.stderr);
    assert!(
        err.contains("cannot write the audit record"),
        "the CLI shows why: {err}"
    );
    let direct = p.daemon(&["inspect", &name]);
    assert!(
        !direct.status.success(),
        "the daemon never saw the create of `{name}`"
    );

    // A denied request stays denied (raw: the CLI's first `/_ping` would already fail).
    let body = format!(r#"{{"Image":"{IMAGE}","HostConfig":{{"Privileged":true}}}}"#);
    let req = format!(
        "POST /v1.41/containers/create HTTP/1.1\r\nHost: docker\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let denied = p.raw(req.as_bytes());
    assert_eq!(
        status_of(&denied),
        403,
        "a privileged create is refused: {denied}"
    );
    assert!(denied.contains("privileged"), "{denied}");
    assert_eq!(
        p.audit_log(),
        before,
        "nothing was written while the disk was full"
    );
    assert!(
        p.log().contains("audit log write failed"),
        "the proxy log says it: {}",
        p.log()
    );

    // Space is back: served and audited again.
    fs.free();
    let again = p.raw(b"GET /_ping HTTP/1.1\r\nHost: docker\r\nConnection: close\r\n\r\n");
    assert_eq!(status_of(&again), 200, "after freeing space: {again}");
    assert!(
        p.audit_log().len() > before.len(),
        "the record after freeing space is written"
    );
    drop(p);
}
