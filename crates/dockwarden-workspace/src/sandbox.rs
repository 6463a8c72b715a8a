//! The walls around a workspace (issue 24): every command of a workspace, in both runtimes,
//! runs in one set of namespaces of its own, held by a small init of ours.
//!
//! - **Mount:** a root of its own (tmpfs, read-only once built) holding read-only binds of the
//!   system directories toolchains need (`/usr`, `/bin`, `/sbin`, `/lib*`), a minimal `/etc`
//!   (passwd and group with the workspace user, the workspace's own hosts, hostname and
//!   resolv.conf, certificates, the alternatives, the loader cache and a few files tools read),
//!   the worktree and HOME read-write at their host paths (`nosuid,nodev`), a private `/tmp`,
//!   `/var/tmp` and `/dev/shm` (tmpfs, charged to the workspace's memory cgroup), a minimal
//!   `/dev` (null, zero, full, random, urandom, tty, its own devpts), and a `/proc` of its own
//!   PID namespace. For docker-compose, the proxy socket (`DOCKER_HOST`) and the `sudo` shim,
//!   nothing else of `workspaces/<id>`.
//! - **PID:** the init is PID 1: it reaps orphans and forwards SIGTERM/SIGINT/SIGHUP to every
//!   process of the namespace; when it dies, the kernel kills them all.
//! - **IPC** and **UTS** (the hostname is the workspace id).
//! - **Network:** the workspace's network namespace when it has one (docker-compose, and the
//!   standard runtime's once it gets one).
//!
//! How: the service spawns `dockwarden sandbox-init` from a thread that joined the
//! workspace's network namespace and unshared its PID namespace, so the init is PID 1; the
//! init (a fresh, single-threaded process) unshares mount, IPC and UTS, builds the root,
//! `pivot_root`s into it, mounts `/proc`, drops its groups, sets `no_new_privs`, says `ready`
//! and reaps. A command joins the init's namespaces with `setns`
//! from a thread of its own ([`enter`]) and is spawned there, so it is born inside.
//!
//! INVARIANT: everything in the namespaces but PID 1 runs as the workspace uid with
//! `no_new_privs`. PID 1 stays root (with `no_new_privs`, no groups) only so that no workspace
//! process can signal or trace it; after `ready` it only reaps and forwards signals. It is
//! killed at every stop of the workspace, and a service start kills the ones an earlier
//! service left ([`Sandboxes::sweep`]).
//! INVARIANT: every mount of the sandbox is made in the init's own mount namespace, whose
//! mounts are slaves of the host's: nothing propagates back, and nothing is left on the host
//! when the init dies.
//! INVARIANT: a command joins an init only after checking that the pid is the workspace's
//! init (its command line and owner), so a reused pid is never joined.
//! No setuid helper: the service is root and the init is this binary.

use std::collections::HashMap;
use std::ffi::OsString;
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Mutex;
use std::time::Duration;

use nix::mount::{MntFlags, MsFlags, mount, umount2};
use nix::sched::{CloneFlags, setns, unshare};

/// System directories bound read-only when they are directories, copied as symlinks when
/// they are links (merged `/usr`).
const SYSTEM: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
];
/// What of the host's `/etc` a workspace sees (read-only, those that exist).
const ETC: &[&str] = &[
    "alternatives",
    "ssl",
    "ca-certificates",
    "ca-certificates.conf",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "nsswitch.conf",
    "localtime",
    "timezone",
    "protocols",
    "services",
    "host.conf",
    "gai.conf",
    "mime.types",
    "os-release",
    "debian_version",
    "pip.conf",
    "npmrc",
    "gitconfig",
    "java-17-openjdk",
    "python3",
    "python3.11",
    "python3.12",
    "python3.13",
    "perl",
    "bash.bashrc",
    "profile",
    "environment",
    "inputrc",
    "terminfo",
    "magic",
    "magic.mime",
];
/// Device nodes bound from the host's `/dev`.
const DEVICES: &[&str] = &["null", "zero", "full", "random", "urandom", "tty"];
/// How long the init gets to say `ready`.
const READY_WITHIN: Duration = Duration::from_secs(10);

/// What the init is told (the service builds it; `args` and [`InitArgs`] are the two ends).
#[derive(Debug, Clone, clap::Args)]
pub struct InitArgs {
    /// The workspace id: the hostname, and what the service checks before joining.
    #[arg(long)]
    pub id: String,
    #[arg(long)]
    pub uid: u32,
    #[arg(long)]
    pub gid: u32,
    /// The workspace user's name in the sandbox's /etc/passwd.
    #[arg(long)]
    pub user: String,
    #[arg(long)]
    pub home: PathBuf,
    /// An empty root-owned directory the new root is built on (in the init's namespace).
    #[arg(long)]
    pub root: PathBuf,
    /// Host paths bound read-write at the same path (`nosuid,nodev`).
    #[arg(long = "rw")]
    pub rw: Vec<PathBuf>,
    /// Host paths (directories, files or sockets) bound read-only at the same path.
    #[arg(long = "ro")]
    pub ro: Vec<PathBuf>,
    /// Size of the private /tmp and /var/tmp (tmpfs `size=`), e.g. `1g`.
    #[arg(long, default_value = "1g")]
    pub tmp_size: String,
    /// Size of /dev/shm.
    #[arg(long, default_value = "256m")]
    pub shm_size: String,
}

impl InitArgs {
    /// The argv after the binary, for [`InitArgs`] to parse back (tested).
    pub fn to_args(&self) -> Vec<OsString> {
        let mut a: Vec<OsString> = vec!["sandbox-init".into()];
        let mut kv = |k: &str, v: OsString| {
            a.push(k.into());
            a.push(v);
        };
        kv("--id", self.id.clone().into());
        kv("--uid", self.uid.to_string().into());
        kv("--gid", self.gid.to_string().into());
        kv("--user", self.user.clone().into());
        kv("--home", self.home.clone().into());
        kv("--root", self.root.clone().into());
        for p in &self.rw {
            kv("--rw", p.clone().into());
        }
        for p in &self.ro {
            kv("--ro", p.clone().into());
        }
        kv("--tmp-size", self.tmp_size.clone().into());
        kv("--shm-size", self.shm_size.clone().into());
        a
    }
}

fn err(what: impl std::fmt::Display, e: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::other(format!("{what}: {e}"))
}

fn mnt(
    src: Option<&Path>,
    dst: &Path,
    fstype: Option<&str>,
    flags: MsFlags,
    data: Option<&str>,
) -> std::io::Result<()> {
    mount(src, dst, fstype, flags, data)
        .map_err(|e| err(format!("mount on `{}`", dst.display()), e))
}

/// Bind `src` at `dst` (made first: a directory for a directory, else a file), then remount
/// it with `extra` flags on top of the ones it had.
fn bind(src: &Path, dst: &Path, extra: MsFlags) -> std::io::Result<()> {
    let meta = std::fs::metadata(src).map_err(|e| err(src.display(), e))?;
    // Directories made on the way are searchable, not listable: `ls` of the state directory
    // shows nothing of it.
    let mkdirs = |d: &Path| {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o711)
            .create(d)
            .map_err(|e| err(d.display(), e))
    };
    if meta.is_dir() {
        mkdirs(dst)?;
    } else {
        if let Some(p) = dst.parent() {
            mkdirs(p)?;
        }
        File::create(dst).map_err(|e| err(dst.display(), e))?;
    }
    mnt(
        Some(src),
        dst,
        None,
        MsFlags::MS_BIND | MsFlags::MS_REC,
        None,
    )?;
    use nix::sys::statvfs::{FsFlags, statvfs};
    let have = statvfs(src).map(|s| s.flags()).unwrap_or(FsFlags::empty());
    let mut flags = MsFlags::MS_BIND | MsFlags::MS_REMOUNT | extra;
    for (h, w) in [
        (FsFlags::ST_RDONLY, MsFlags::MS_RDONLY),
        (FsFlags::ST_NOSUID, MsFlags::MS_NOSUID),
        (FsFlags::ST_NODEV, MsFlags::MS_NODEV),
        (FsFlags::ST_NOEXEC, MsFlags::MS_NOEXEC),
        (FsFlags::ST_NOATIME, MsFlags::MS_NOATIME),
        (FsFlags::ST_RELATIME, MsFlags::MS_RELATIME),
    ] {
        if have.contains(h) {
            flags |= w;
        }
    }
    mnt(None, dst, None, flags, None)
}

/// `host` as a path under `root`.
fn under(root: &Path, host: &Path) -> PathBuf {
    root.join(host.strip_prefix("/").unwrap_or(host))
}

fn tmpfs(at: &Path, opts: &str, flags: MsFlags) -> std::io::Result<()> {
    std::fs::create_dir_all(at).map_err(|e| err(at.display(), e))?;
    mnt(
        Some(Path::new("tmpfs")),
        at,
        Some("tmpfs"),
        flags,
        Some(opts),
    )
}

/// Pure: the sandbox's `/etc/passwd`, `/etc/group` and `/etc/hosts`.
pub fn etc_files(a: &InitArgs) -> [(&'static str, String); 4] {
    let host = hostname_of(&a.id);
    [
        (
            "passwd",
            format!(
                "root:x:0:0:root:/root:/usr/sbin/nologin\n{}:x:{}:{}:workspace {}:{}:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
                a.user,
                a.uid,
                a.gid,
                a.id,
                a.home.display()
            ),
        ),
        (
            "group",
            format!(
                "root:x:0:\ntty:x:5:\n{}:x:{}:\nnogroup:x:65534:\n",
                a.user, a.gid
            ),
        ),
        (
            "hosts",
            format!(
                "127.0.0.1\tlocalhost {host}\n::1\tlocalhost ip6-localhost ip6-loopback {host}\n"
            ),
        ),
        ("hostname", format!("{host}\n")),
    ]
}

/// Pure: a hostname from a workspace id (at most 63 bytes of letters, digits, `-` and `.`).
pub fn hostname_of(id: &str) -> String {
    let h: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '-'
            }
        })
        .take(63)
        .collect();
    if h.is_empty() { "workspace".into() } else { h }
}

/// Builds the new root under `a.root` (in this process's fresh mount namespace).
fn build_root(a: &InitArgs) -> std::io::Result<()> {
    let r = &a.root;
    let nsd = MsFlags::MS_NOSUID | MsFlags::MS_NODEV;
    mnt(
        Some(Path::new("tmpfs")),
        r,
        Some("tmpfs"),
        nsd,
        Some("mode=0755,size=16m"),
    )?;
    for sys in SYSTEM {
        let host = Path::new(sys);
        match std::fs::symlink_metadata(host) {
            Ok(m) if m.file_type().is_symlink() => {
                let target = std::fs::read_link(host).map_err(|e| err(sys, e))?;
                symlink(target, under(r, host)).map_err(|e| err(sys, e))?;
            }
            Ok(m) if m.is_dir() => bind(host, &under(r, host), MsFlags::MS_RDONLY | nsd)?,
            _ => {}
        }
    }
    let etc = r.join("etc");
    std::fs::create_dir_all(&etc).map_err(|e| err(etc.display(), e))?;
    for (name, text) in etc_files(a) {
        std::fs::write(etc.join(name), text).map_err(|e| err(name, e))?;
    }
    if let Ok(resolv) = std::fs::read("/etc/resolv.conf") {
        std::fs::write(etc.join("resolv.conf"), resolv).map_err(|e| err("resolv.conf", e))?;
    }
    for name in ETC {
        let host = Path::new("/etc").join(name);
        match std::fs::symlink_metadata(&host) {
            Ok(m) if m.file_type().is_symlink() => {
                let target = std::fs::read_link(&host).map_err(|e| err(host.display(), e))?;
                symlink(target, etc.join(name)).map_err(|e| err(name, e))?;
            }
            Ok(_) => bind(&host, &etc.join(name), MsFlags::MS_RDONLY | nsd)?,
            Err(_) => {}
        }
    }
    // /dev: a tmpfs with the harmless nodes bound from the host's, and a devpts of its own.
    let dev = r.join("dev");
    tmpfs(
        &dev,
        "mode=0755,size=64k",
        MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
    )?;
    for d in DEVICES {
        bind(
            &Path::new("/dev").join(d),
            &dev.join(d),
            MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
        )?;
    }
    let pts = dev.join("pts");
    std::fs::create_dir_all(&pts).map_err(|e| err(pts.display(), e))?;
    mnt(
        Some(Path::new("devpts")),
        &pts,
        Some("devpts"),
        MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
        Some("newinstance,ptmxmode=0666,mode=0620"),
    )?;
    for (link, target) in [
        ("ptmx", "pts/ptmx"),
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ] {
        symlink(target, dev.join(link)).map_err(|e| err(link, e))?;
    }
    let shm = format!("mode=1777,size={}", a.shm_size);
    tmpfs(&dev.join("shm"), &shm, nsd)?;
    let tmp = format!("mode=1777,size={}", a.tmp_size);
    tmpfs(&r.join("tmp"), &tmp, nsd)?;
    tmpfs(&r.join("var/tmp"), &tmp, nsd)?;
    std::fs::create_dir_all(r.join("proc")).map_err(|e| err("proc", e))?;
    std::fs::create_dir_all(r.join("root")).map_err(|e| err("root", e))?;
    std::fs::set_permissions(r.join("root"), std::fs::Permissions::from_mode(0o700))
        .map_err(|e| err("root", e))?;
    // The workspace's own paths, after the tmpfs mounts they may lie under (tests keep state
    // under /tmp).
    for p in &a.rw {
        bind(p, &under(r, p), nsd)?;
    }
    for p in &a.ro {
        bind(p, &under(r, p), MsFlags::MS_RDONLY | nsd)?;
    }
    Ok(())
}

/// `dockwarden sandbox-init`: PID 1 of a workspace. Never returns on success.
pub fn init_main(a: InitArgs) -> anyhow::Result<()> {
    if nix::unistd::getpid().as_raw() != 1 {
        anyhow::bail!("sandbox-init must be PID 1 of a new PID namespace (the service starts it)");
    }
    unshare(CloneFlags::CLONE_NEWNS | CloneFlags::CLONE_NEWIPC | CloneFlags::CLONE_NEWUTS)
        .map_err(|e| err("unshare", e))?;
    // Nothing mounted here reaches the host, whatever the host's propagation.
    mnt(
        None,
        Path::new("/"),
        None,
        MsFlags::MS_REC | MsFlags::MS_SLAVE,
        None,
    )?;
    nix::unistd::sethostname(hostname_of(&a.id)).map_err(|e| err("sethostname", e))?;
    build_root(&a)?;
    let old = a.root.join(".old");
    std::fs::create_dir_all(&old).map_err(|e| err(old.display(), e))?;
    nix::unistd::pivot_root(&a.root, &old).map_err(|e| err("pivot_root", e))?;
    nix::unistd::chdir("/").map_err(|e| err("chdir", e))?;
    umount2("/.old", MntFlags::MNT_DETACH).map_err(|e| err("unmounting the old root", e))?;
    std::fs::remove_dir("/.old").map_err(|e| err("/.old", e))?;
    mnt(
        Some(Path::new("proc")),
        Path::new("/proc"),
        Some("proc"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        None,
    )?;
    // The root itself is read-only from now on: /etc and the mount points cannot change.
    mnt(
        None,
        Path::new("/"),
        None,
        MsFlags::MS_REMOUNT
            | MsFlags::MS_BIND
            | MsFlags::MS_RDONLY
            | MsFlags::MS_NOSUID
            | MsFlags::MS_NODEV,
        None,
    )?;
    nix::unistd::setgroups(&[]).map_err(|e| err("setgroups", e))?;
    nix::sys::prctl::set_no_new_privs().map_err(|e| err("no_new_privs", e))?;
    let mut out = std::io::stdout();
    writeln!(out, "ready")
        .and_then(|()| out.flush())
        .map_err(|e| err("ready", e))?;
    reap()
}

/// PID 1's loop: reap every child, forward the stop signals to the whole namespace.
fn reap() -> ! {
    use nix::sys::signal::{SigSet, Signal, kill};
    use nix::sys::wait::{WaitPidFlag, waitpid};
    let mut set = SigSet::empty();
    for s in [
        Signal::SIGCHLD,
        Signal::SIGTERM,
        Signal::SIGINT,
        Signal::SIGHUP,
    ] {
        set.add(s);
    }
    let _ = set.thread_block();
    loop {
        match set.wait() {
            Ok(Signal::SIGCHLD) | Err(_) => {
                while let Ok(st) = waitpid(None, Some(WaitPidFlag::WNOHANG)) {
                    if st == nix::sys::wait::WaitStatus::StillAlive {
                        break;
                    }
                }
            }
            Ok(sig) => {
                let _ = kill(nix::unistd::Pid::from_raw(-1), sig);
                std::thread::sleep(Duration::from_millis(200));
                std::process::exit(0);
            }
        }
    }
}

/// The service's side: one init per workspace, made on first use.
pub struct Sandboxes {
    exe: PathBuf,
    inits: Mutex<HashMap<String, i32>>,
}

/// What the service knows of a workspace to sandbox it.
pub struct Spec<'a> {
    pub id: &'a str,
    pub uid: u32,
    pub gid: u32,
    pub worktree: &'a Path,
    pub home: &'a Path,
    pub ws_dir: &'a Path,
    pub netns: Option<&'a Path>,
    /// Extra paths bound read-only (the proxy socket and the shim of docker-compose).
    pub ro: Vec<PathBuf>,
}

impl Sandboxes {
    pub fn new(exe: PathBuf) -> Sandboxes {
        Sandboxes {
            exe,
            inits: Mutex::new(HashMap::new()),
        }
    }

    /// The pid of the workspace's init, started first when there is none alive.
    /// `place` runs the spawn (for example inside the workspace's cgroup).
    pub fn ensure(
        &self,
        s: &Spec<'_>,
        place: impl FnOnce(
            &mut (dyn FnMut() -> std::io::Result<std::process::Child> + Send),
        ) -> std::io::Result<std::process::Child>,
    ) -> std::io::Result<i32> {
        let mut inits = self.inits.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(&pid) = inits.get(s.id)
            && is_init_of(pid, s.id)
        {
            return Ok(pid);
        }
        let root = s.ws_dir.join("sandbox");
        std::fs::create_dir_all(&root).map_err(|e| err(root.display(), e))?;
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| err(root.display(), e))?;
        let args = InitArgs {
            id: s.id.to_string(),
            uid: s.uid,
            gid: s.gid,
            user: format!("ws-{}", s.id),
            home: s.home.to_path_buf(),
            root,
            rw: vec![s.worktree.to_path_buf(), s.home.to_path_buf()],
            ro: s.ro.iter().filter(|p| p.exists()).cloned().collect(),
            tmp_size: "1g".into(),
            shm_size: "256m".into(),
        };
        let mut cmd = std::process::Command::new(&self.exe);
        cmd.args(args.to_args())
            .env_clear()
            .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let netns = s.netns.map(File::open).transpose()?;
        let mut spawn = || {
            std::thread::scope(|t| {
                t.spawn(|| {
                    if let Some(f) = &netns {
                        setns(f, CloneFlags::CLONE_NEWNET)
                            .map_err(|e| err("joining the network namespace", e))?;
                    }
                    unshare(CloneFlags::CLONE_NEWPID).map_err(|e| err("a PID namespace", e))?;
                    cmd.spawn()
                })
                .join()
                .unwrap_or_else(|_| Err(std::io::Error::other("sandbox thread panicked")))
            })
        };
        let mut child = place(&mut spawn)?;
        let pid = child.id() as i32;
        let ready = read_ready(&mut child);
        if let Err(e) = ready {
            let _ = child.kill();
            let _ = child.wait();
            return Err(err(
                format!("the sandbox of workspace `{}` did not start", s.id),
                e,
            ));
        }
        // Reaped when it ends (stop, delete, kill by uid).
        std::thread::spawn(move || child.wait());
        inits.insert(s.id.to_string(), pid);
        tracing::debug!(workspace.id = s.id, pid, "sandbox up");
        Ok(pid)
    }

    /// Kills a workspace's init (and so everything left in its namespaces) and waits, up to
    /// 2 s, until it is reaped: a zombie still holds its cgroup, which delete removes next.
    pub async fn stop(&self, id: &str) {
        let pid = self
            .inits
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(id);
        let Some(pid) = pid.filter(|&p| is_init_of(p, id)) else {
            return;
        };
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
        let proc_dir = PathBuf::from(format!("/proc/{pid}"));
        for _ in 0..200 {
            if !proc_dir.exists() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        tracing::warn!(
            workspace.id = id,
            pid,
            "the sandbox's init was not reaped within 2 s"
        );
    }

    /// Kills the inits an earlier service of this state directory left (a crash): their
    /// `--root` lies under `workspaces_dir` and they are not this process's children.
    pub fn sweep(workspaces_dir: &Path) -> usize {
        let Ok(dir) = std::fs::read_dir("/proc") else {
            return 0;
        };
        let mut prefix = workspaces_dir.as_os_str().as_encoded_bytes().to_vec();
        prefix.push(b'/');
        let mut n = 0;
        for e in dir.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
                continue;
            };
            let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
                continue;
            };
            let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
            // This service's own (started during recovery) are its children; an earlier
            // service's were handed to the host's init when it died.
            let ppid = std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|st| {
                    st.rsplit(')')
                        .next()?
                        .split_whitespace()
                        .nth(1)?
                        .parse::<u32>()
                        .ok()
                });
            let ours = args.iter().any(|a| *a == b"sandbox-init")
                && args
                    .windows(2)
                    .any(|w| w[0] == b"--root" && w[1].starts_with(&prefix))
                && ppid != Some(std::process::id());
            if ours
                && nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                )
                .is_ok()
            {
                n += 1;
            }
        }
        n
    }
}

fn read_ready(child: &mut std::process::Child) -> std::io::Result<()> {
    let out = child
        .stdout
        .take()
        .ok_or_else(|| std::io::Error::other("no stdout"))?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let r = BufReader::new(out).read_line(&mut line).map(|_| line);
        let _ = tx.send(r);
    });
    match rx.recv_timeout(READY_WITHIN) {
        Ok(Ok(l)) if l.trim() == "ready" => Ok(()),
        Ok(Ok(l)) => Err(std::io::Error::other(format!(
            "it said {l:?} (its errors are in the service log)"
        ))),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(std::io::Error::other("no `ready` within 10 s")),
    }
}

/// Whether `pid` is the init of workspace `id` (root's, so no workspace process forged it).
fn is_init_of(pid: i32, id: &str) -> bool {
    let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
        return false;
    };
    let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
    let named = args
        .windows(2)
        .any(|w| w[0] == b"--id" && w[1] == id.as_bytes());
    let is_init = args.iter().any(|a| *a == b"sandbox-init");
    let owner = std::fs::metadata(format!("/proc/{pid}"))
        .map(|m| m.uid())
        .ok();
    is_init && named && owner == Some(0) && crate::runtime::docker::dockerd::alive(pid)
}

/// On the calling thread (one of its own): joins every namespace of the init `pid`. Children
/// spawned afterwards are born in the workspace's PID namespace and see only its root.
pub fn enter(pid: i32) -> std::io::Result<()> {
    let kinds = [
        ("ipc", CloneFlags::CLONE_NEWIPC),
        ("uts", CloneFlags::CLONE_NEWUTS),
        ("net", CloneFlags::CLONE_NEWNET),
        ("pid", CloneFlags::CLONE_NEWPID),
        ("mnt", CloneFlags::CLONE_NEWNS),
    ];
    // Opened first: once in the mount namespace, the host's /proc is gone.
    let fds = kinds
        .iter()
        .map(|(n, f)| File::open(format!("/proc/{pid}/ns/{n}")).map(|fd| (fd, *f, *n)))
        .collect::<std::io::Result<Vec<_>>>()?;
    unshare(CloneFlags::CLONE_FS).map_err(|e| err("unshare(CLONE_FS)", e))?;
    for (fd, flag, name) in &fds {
        setns(fd, *flag).map_err(|e| err(format!("joining the sandbox's {name} namespace"), e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, clap::Parser)]
    struct Cli {
        #[command(subcommand)]
        c: Sub,
    }
    #[derive(Debug, clap::Subcommand)]
    enum Sub {
        SandboxInit(InitArgs),
    }

    fn args() -> InitArgs {
        InitArgs {
            id: "my_ws".into(),
            uid: 20001,
            gid: 20001,
            user: "ws-my_ws".into(),
            home: "/s/workspaces/my_ws/home".into(),
            root: "/s/workspaces/my_ws/sandbox".into(),
            rw: vec![
                "/s/workspaces/my_ws/worktree".into(),
                "/s/workspaces/my_ws/home".into(),
            ],
            ro: vec!["/s/workspaces/my_ws/docker.sock".into()],
            tmp_size: "1g".into(),
            shm_size: "256m".into(),
        }
    }

    #[test]
    fn the_init_parses_what_the_service_passes() {
        use clap::Parser;
        let a = args();
        let mut argv: Vec<OsString> = vec!["dockwarden".into()];
        argv.extend(a.to_args());
        let Sub::SandboxInit(b) = Cli::try_parse_from(argv)
            .unwrap_or_else(|e| panic!("{e}"))
            .c;
        assert_eq!(
            (b.id, b.uid, b.rw, b.ro, b.root),
            (a.id, a.uid, a.rw, a.ro, a.root)
        );
    }

    #[test]
    fn etc_holds_the_workspace_user_and_its_own_hostname() {
        let files = etc_files(&args());
        let get = |n: &str| {
            files
                .iter()
                .find(|(k, _)| *k == n)
                .map(|(_, v)| v.clone())
                .expect(n)
        };
        assert!(
            get("passwd").contains(
                "ws-my_ws:x:20001:20001:workspace my_ws:/s/workspaces/my_ws/home:/bin/sh\n"
            )
        );
        assert!(get("group").contains("ws-my_ws:x:20001:\n"));
        assert_eq!(get("hostname"), "my-ws\n");
        assert!(get("hosts").starts_with("127.0.0.1\tlocalhost my-ws\n"));
        assert_eq!(hostname_of(&"x".repeat(100)).len(), 63);
        assert_eq!(hostname_of(""), "workspace");
    }
}
