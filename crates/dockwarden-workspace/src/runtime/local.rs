//! Runs workspace commands as real processes: own uid/gid, own process group, umask 022,
//! a clean environment, and the worktree as cwd.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::mpsc;

use super::{BoxFut, Chunk, RunSpec, Runtime, Stream, procs};
use crate::error::{WsError, WsResult};
use crate::model::ExecResult;

/// Exit code of a timed-out command, as `timeout(1)` uses.
pub const TIMEOUT_EXIT: i32 = 124;
/// Output kept per stream in a buffered result.
const MAX_CAPTURE: usize = 16 * 1024 * 1024;
/// How long to keep reading after the shell exits (background children may hold the pipe).
const DRAIN_GRACE: Duration = Duration::from_millis(300);

/// Processes on this machine.
pub struct LocalRuntime {
    /// Run as the workspace uid; only possible as root.
    setuid: bool,
    groups: Mutex<HashMap<String, HashSet<i32>>>,
    /// The cgroup hierarchy workspace cgroups live on (root only).
    cgroup: Option<crate::resources::cgroup::Hierarchy>,
    /// Each workspace's namespaces (`workspace::sandbox`); `None` runs commands on the host
    /// with only `no_new_privs` and nosuid mounts (not root, or unit tests).
    sandbox: Option<crate::sandbox::Sandboxes>,
}

impl LocalRuntime {
    pub fn new() -> Self {
        LocalRuntime {
            setuid: nix::unistd::geteuid().is_root(),
            groups: Mutex::new(HashMap::new()),
            cgroup: nix::unistd::geteuid()
                .is_root()
                .then(crate::resources::cgroup::Hierarchy::detect)
                .flatten(),
            sandbox: None,
        }
    }

    /// Runs every command inside its workspace's sandbox, whose init is `exe sandbox-init`.
    pub fn with_sandbox(mut self, exe: std::path::PathBuf) -> Self {
        self.sandbox = Some(crate::sandbox::Sandboxes::new(exe));
        self
    }

    fn track(&self, ws: &str, pgid: i32, add: bool) {
        if let Ok(mut g) = self.groups.lock() {
            let set = g.entry(ws.to_string()).or_default();
            if add {
                set.insert(pgid);
            } else {
                set.remove(&pgid);
            }
        }
    }

    fn command(&self, spec: &RunSpec, command: &str) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new("/bin/sh");
        // `$0` carries the user's command verbatim; the outer shell only sets the umask.
        cmd.arg("-c")
            .arg("umask 022; exec /bin/sh -c \"$0\"")
            .arg(command);
        cmd.env_clear()
            .env(
                "PATH",
                "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            )
            .env("HOME", &spec.home)
            .env("USER", format!("ws-{}", spec.workspace_id))
            .env("LANG", "C.UTF-8")
            .env("DOCKWARDEN_WORKSPACE", &spec.workspace_id)
            .envs(&spec.env)
            .current_dir(&spec.worktree)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        if self.setuid {
            cmd.uid(spec.uid).gid(spec.gid);
        }
        cmd
    }

    async fn run(
        &self,
        spec: &RunSpec,
        command: &str,
        timeout: Option<Duration>,
        sink: Option<mpsc::Sender<Chunk>>,
    ) -> WsResult<ExecResult> {
        let started = Instant::now();
        let mut cmd = self.command(spec, command);
        let spawned = self.spawn(spec, &mut cmd);
        let mut child = spawned.map_err(|e| WsError::io(&spec.worktree, e))?;
        let pgid = child.id().map(|p| p as i32).unwrap_or(0);
        self.track(&spec.workspace_id, pgid, true);
        let out = Arc::new(Mutex::new(Vec::new()));
        let err = Arc::new(Mutex::new(Vec::new()));
        let readers = [
            child
                .stdout
                .take()
                .map(|s| tokio::spawn(pump(s, Stream::Stdout, out.clone(), sink.clone()))),
            child
                .stderr
                .take()
                .map(|s| tokio::spawn(pump(s, Stream::Stderr, err.clone(), sink))),
        ];
        let (exit_code, timed_out) = wait_or_kill(&mut child, pgid, timeout)
            .await
            .map_err(|e| WsError::io(&spec.worktree, e))?;
        for r in readers.into_iter().flatten() {
            let abort = r.abort_handle();
            if tokio::time::timeout(DRAIN_GRACE, r).await.is_err() {
                abort.abort();
            }
        }
        self.track(&spec.workspace_id, pgid, false);
        Ok(ExecResult {
            exit_code,
            stdout: take_text(&out),
            stderr: take_text(&err),
            timed_out,
            duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            disk: None,
            notes: Vec::new(),
        })
    }
}

impl LocalRuntime {
    /// Spawns in the workspace's network namespace (if any) and inside its cgroup (if it
    /// has one), so the process is in both before it runs anything.
    fn spawn(
        &self,
        spec: &RunSpec,
        cmd: &mut tokio::process::Command,
    ) -> std::io::Result<tokio::process::Child> {
        use crate::resources::cgroup;
        let name = cgroup::name_of(spec.uid);
        let cg = self.cgroup.as_ref().filter(|h| cgroup::exists(h, &name));
        let init = match &self.sandbox {
            Some(sb) => {
                let ro = match spec.kind {
                    super::RuntimeKind::DockerCompose => {
                        vec![spec.ws_dir.join("docker.sock"), spec.ws_dir.join("bin")]
                    }
                    _ => Vec::new(),
                };
                let s = crate::sandbox::Spec {
                    id: &spec.workspace_id,
                    uid: spec.uid,
                    gid: spec.gid,
                    worktree: &spec.worktree,
                    home: &spec.home,
                    ws_dir: &spec.ws_dir,
                    netns: spec.netns.as_deref(),
                    ro,
                };
                Some(sb.ensure(&s, |spawn| match cg {
                    Some(h) => cgroup::spawn_joined(h, &name, spawn, |c: &std::process::Child| {
                        Some(c.id())
                    }),
                    None => spawn(),
                })?)
            }
            None => None,
        };
        // Without a sandbox: the host's view, with nosuid,nodev where the workspace writes.
        // The wide ones first: a later bind above the worktree would otherwise hide its own.
        let writable = [
            Path::new("/tmp"),
            Path::new("/var/tmp"),
            Path::new("/dev/shm"),
            spec.worktree.as_path(),
            spec.home.as_path(),
        ];
        let nosuid: &[&Path] = if self.setuid && init.is_none() {
            &writable
        } else {
            &[]
        };
        let netns = if init.is_some() {
            None
        } else {
            spec.netns.as_deref()
        };
        let mut go = move || spawn_unprivileged(init, netns, nosuid, || cmd.spawn());
        match cg {
            Some(h) => cgroup::spawn_joined(h, &name, go, |c: &tokio::process::Child| c.id()),
            None => go(),
        }
    }
}

/// Runs `spawn` on a fresh thread that set `PR_SET_NO_NEW_PRIVS` (and joined the network
/// namespace `ns`, if any) first, keeping the tokio runtime context. The flag is inherited
/// by the child and everything it runs and cannot be cleared: no setuid or setgid file, and
/// no file capability, raises the privileges of a workspace process, whatever made it
/// (issue 23).
///
/// With `nosuid` paths, the thread first enters a mount namespace of its own (a copy of the
/// host's, every mount a slave so nothing propagates back) in which each of those paths is
/// a `nosuid,nodev` mount: the workspace's processes see the worktree, its HOME and the
/// temporary directories without set-id or device semantics, with or without disk images.
/// The namespace goes with the last process in it; the host's mounts are not touched.
///
/// INVARIANT: every process the service starts for a workspace (exec, the setup, run,
/// archive and inspect scripts, and with them the `sudo` shim) is spawned here. The flag and
/// the namespace are set on a thread of their own, never on a runtime worker, so the
/// service's other children (dockerd, containerd, the proxy) inherit neither.
pub(crate) fn spawn_unprivileged<T: Send>(
    init: Option<i32>,
    ns: Option<&Path>,
    nosuid: &[&Path],
    spawn: impl FnOnce() -> std::io::Result<T> + Send,
) -> std::io::Result<T> {
    let handle = tokio::runtime::Handle::try_current().ok();
    let ns = ns.map(std::fs::File::open).transpose()?;
    std::thread::scope(|s| {
        s.spawn(move || {
            let _ctx = handle.as_ref().map(|h| h.enter());
            if let Some(pid) = init {
                crate::sandbox::enter(pid)?;
            }
            if !nosuid.is_empty() {
                nosuid_namespace(nosuid)?;
            }
            nix::sys::prctl::set_no_new_privs().map_err(std::io::Error::from)?;
            if let Some(f) = &ns {
                nix::sched::setns(f, nix::sched::CloneFlags::CLONE_NEWNET)
                    .map_err(std::io::Error::from)?;
            }
            spawn()
        })
        .join()
        .unwrap_or_else(|_| Err(std::io::Error::other("spawning thread panicked")))
    })
}

/// On the calling thread: a private mount namespace where each of `paths` is `nosuid,nodev`.
/// A path that is already both (a disk image) is left as it is; one that is missing is
/// skipped (a worktree not made yet has nothing to run).
fn nosuid_namespace(paths: &[&Path]) -> std::io::Result<()> {
    use nix::mount::{MsFlags, mount};
    use nix::sys::statvfs::{FsFlags, statvfs};
    let err = |what: &str, p: &Path, e: nix::Error| {
        std::io::Error::other(format!("{what} `{}`: {e}", p.display()))
    };
    nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNS | nix::sched::CloneFlags::CLONE_FS)
        .map_err(|e| err("a mount namespace for", Path::new("/"), e))?;
    // Nothing mounted here may reach the host's namespace, whatever its propagation.
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_SLAVE,
        None::<&str>,
    )
    .map_err(|e| err("making mounts slaves under", Path::new("/"), e))?;
    for &p in paths {
        let Ok(st) = statvfs(p) else { continue };
        let flags = st.flags();
        if flags.contains(FsFlags::ST_NOSUID) && flags.contains(FsFlags::ST_NODEV) {
            continue;
        }
        // Recursive: mounts below (a worktree's disk image under `/tmp`) stay visible.
        mount(
            Some(p),
            p,
            None::<&str>,
            MsFlags::MS_BIND | MsFlags::MS_REC,
            None::<&str>,
        )
        .map_err(|e| err("binding", p, e))?;
        let mut keep =
            MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_NOSUID | MsFlags::MS_NODEV;
        for (have, want) in [
            (FsFlags::ST_RDONLY, MsFlags::MS_RDONLY),
            (FsFlags::ST_NOEXEC, MsFlags::MS_NOEXEC),
            (FsFlags::ST_NOATIME, MsFlags::MS_NOATIME),
            (FsFlags::ST_NODIRATIME, MsFlags::MS_NODIRATIME),
            (FsFlags::ST_RELATIME, MsFlags::MS_RELATIME),
        ] {
            if flags.contains(have) {
                keep |= want;
            }
        }
        mount(None::<&str>, p, None::<&str>, keep, None::<&str>)
            .map_err(|e| err("remounting nosuid,nodev", p, e))?;
    }
    Ok(())
}

impl Default for LocalRuntime {
    fn default() -> Self {
        Self::new()
    }
}

/// Waits for the shell; on timeout kills its whole process group and reports 124.
async fn wait_or_kill(
    child: &mut tokio::process::Child,
    pgid: i32,
    timeout: Option<Duration>,
) -> std::io::Result<(i32, bool)> {
    let waited = match timeout {
        Some(t) => tokio::time::timeout(t, child.wait()).await.ok(),
        None => Some(child.wait().await),
    };
    match waited {
        Some(status) => Ok((exit_code_of(status?), false)),
        None => {
            if pgid > 0 {
                let _ = killpg(Pid::from_raw(pgid), Signal::SIGKILL);
            }
            let _ = child.wait().await;
            Ok((TIMEOUT_EXIT, true))
        }
    }
}

fn exit_code_of(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}

fn take_text(buf: &Arc<Mutex<Vec<u8>>>) -> String {
    buf.lock()
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
}

async fn pump(
    mut src: impl AsyncRead + Unpin,
    stream: Stream,
    buf: Arc<Mutex<Vec<u8>>>,
    sink: Option<mpsc::Sender<Chunk>>,
) {
    let mut chunk = vec![0u8; 16 * 1024];
    loop {
        let n = match src.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if let Ok(mut b) = buf.lock() {
            let room = MAX_CAPTURE.saturating_sub(b.len());
            b.extend_from_slice(&chunk[..n.min(room)]);
        }
        if let Some(sink) = &sink {
            // A gone client does not stop the command; output is still collected.
            let _ = sink
                .send(Chunk {
                    stream,
                    data: chunk[..n].to_vec(),
                })
                .await;
        }
    }
}

impl Runtime for LocalRuntime {
    fn exec<'a>(
        &'a self,
        spec: &'a RunSpec,
        command: &'a str,
        timeout: Option<Duration>,
        sink: Option<mpsc::Sender<Chunk>>,
    ) -> BoxFut<'a, WsResult<ExecResult>> {
        Box::pin(self.run(spec, command, timeout, sink))
    }

    fn stop<'a>(&'a self, spec: &'a RunSpec) -> BoxFut<'a, WsResult<u32>> {
        Box::pin(async move {
            let groups: Vec<i32> = self
                .groups
                .lock()
                .map(|g| {
                    g.get(&spec.workspace_id)
                        .map(|s| s.iter().copied().collect())
                        .unwrap_or_default()
                })
                .unwrap_or_default();
            let mut n = 0;
            for pgid in groups {
                if pgid > 0 && killpg(Pid::from_raw(pgid), Signal::SIGKILL).is_ok() {
                    n += 1;
                }
            }
            if self.setuid {
                n += procs::kill_uid(spec.uid).await;
            }
            // The sandbox's PID 1 last: with it the kernel ends whatever is left inside.
            if let Some(sb) = &self.sandbox {
                sb.stop(&spec.workspace_id).await;
            }
            Ok(n)
        })
    }

    fn isolates_users(&self) -> bool {
        self.setuid
    }
}
