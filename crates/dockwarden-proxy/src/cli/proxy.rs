//! `dockwarden proxy`: set up the listening socket, load the policy, serve until a signal.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use tokio::net::UnixListener;

use crate::hostfs::watch::{IdRange, Owner};
use crate::policy::Policy;
use crate::policy::facts::Environment;
use crate::proxy::audit::AuditLog;
use crate::proxy::{self, Options, Shared};

/// `dockwarden proxy`'s arguments: from its flags, or (the workspace service's child proxies)
/// from a JSON file read by [`read_args_file`], so the service builds this struct and a renamed
/// field is a compile error there rather than a failed start in every docker-compose workspace.
#[derive(Debug, Clone, clap::Args, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProxyArgs {
    /// Socket the workspace user connects to (DOCKER_HOST).
    #[arg(long, default_value = "/run/dockwarden/docker.sock")]
    pub listen: PathBuf,
    /// The daemon's socket; never exposed.
    #[arg(long, default_value = "/var/run/docker.sock")]
    pub upstream: PathBuf,
    /// The workspace checkout: the only place bind mounts may come from.
    #[arg(long)]
    pub workspace: PathBuf,
    /// Owner of the listening socket (default: owner of the workspace).
    #[arg(long)]
    pub uid: Option<u32>,
    /// Group of the listening socket (default: group of the workspace).
    #[arg(long)]
    pub gid: Option<u32>,
    /// Mode of the listening socket, octal.
    #[arg(long, default_value = "660", value_parser = parse_mode)]
    pub socket_mode: u32,
    /// Policy file (TOML); the embedded default when absent.
    #[arg(long)]
    pub policy: Option<PathBuf>,
    /// Audit log file (JSON lines); stderr when absent.
    #[arg(long)]
    pub audit_log: Option<PathBuf>,
    /// Log "would deny" and forward anyway. For learning what a project needs; never in production.
    #[arg(long)]
    pub dry_run: bool,
    /// Seconds a client has to send a request head (also the keep-alive idle limit).
    #[arg(long, default_value_t = 30)]
    pub header_timeout: u64,
    /// Most client connections served at once.
    #[arg(long, default_value_t = 1024)]
    pub max_connections: usize,
    // Surface issue: container cap and shared cgroup budget flags.
    #[command(flatten)]
    pub budget: super::budget::BudgetArgs,
    /// Root-only directory for bind-source pins (default: `/run/dockwarden/pins/<hash of
    /// --listen>`, so a restarted proxy finds its pins and two proxies never share them).
    #[arg(long)]
    pub pin_dir: Option<PathBuf>,
    /// Show pin paths in container inspect and list answers instead of the workspace paths
    /// they were made from (for reviewers; clients expect their own paths back).
    #[arg(long)]
    pub show_pins: bool,
    /// Host uids that count as written by a container, besides 0, and are handed back to the
    /// workspace user after the container stops: `START:COUNT`, the daemon's userns-remap
    /// range (for example `100000:65536`).
    #[arg(long, value_name = "START:COUNT", value_parser = parse_id_range)]
    pub hand_back_ids: Option<IdRange>,
    #[command(flatten)]
    pub log: super::logging::LogArgs,
}

/// Reads the arguments the workspace service wrote (`dockwarden proxy-args FILE`): the same
/// struct, checked field by field (`deny_unknown_fields`), so a field the service sets and the
/// proxy no longer has is refused at start-up, never ignored.
pub fn read_args_file(path: &Path) -> anyhow::Result<ProxyArgs> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the proxy's arguments `{}`", path.display()))?;
    serde_json::from_str(&text)
        .with_context(|| format!("the proxy's arguments `{}`", path.display()))
}

/// The default pin directory: stable per listening socket (FNV-1a of its path).
fn default_pin_dir(listen: &Path) -> PathBuf {
    let h = listen
        .as_os_str()
        .as_encoded_bytes()
        .iter()
        .fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3)
        });
    PathBuf::from(format!("/run/dockwarden/pins/{h:016x}"))
}

fn parse_mode(s: &str) -> Result<u32, String> {
    u32::from_str_radix(s, 8).map_err(|e| format!("not an octal mode: {e}"))
}

/// `START:COUNT`, both decimal: the host uids `START..START+COUNT`.
fn parse_id_range(s: &str) -> Result<IdRange, String> {
    let Some((start, count)) = s.split_once(':') else {
        return Err(format!(
            "`{s}` is not `START:COUNT`; for example `100000:65536`"
        ));
    };
    let num = |what: &str, v: &str| {
        if v.is_empty() {
            Err(format!(
                "{what} is missing in `{s}`; for example `100000:65536`"
            ))
        } else if !v.bytes().all(|b| b.is_ascii_digit()) {
            Err(format!("{what} `{v}` of `{s}` is not a decimal number"))
        } else {
            v.parse::<u32>()
                .map_err(|e| format!("{what} `{v}` of `{s}`: {e}"))
        }
    };
    let (start, count) = (num("start", start)?, num("count", count)?);
    if count == 0 {
        return Err(format!("`{s}` holds no id; COUNT must be at least 1"));
    }
    IdRange::new(start, count)
        .ok_or_else(|| format!("`{s}` reaches uid {}, which `chown` reserves", u32::MAX))
}

/// Who chown-back hands files to. A range holding the workspace user's own uid is a mistake
/// (the daemon's subordinate ids never include it) and refuses to start.
fn hand_back_owner(uid: u32, gid: u32, hand_back: Option<IdRange>) -> anyhow::Result<Owner> {
    if hand_back.is_some_and(|r| r.contains(uid)) {
        bail!(
            "`--hand-back-ids` includes the workspace user's uid {uid}; pass the daemon's subordinate range, which never does"
        );
    }
    Ok(Owner {
        uid,
        gid,
        hand_back,
    })
}

pub fn main(a: ProxyArgs) -> anyhow::Result<()> {
    super::logging::init(a.log.log_format);
    // One thread: the proxy's work per request is small next to the daemon's, and a single
    // scheduler saves the cross-thread wake-ups between the client connection's task and the
    // pooled upstream connection's task, which dominated the profile on the multi-thread
    // runtime (benches/README.md). Blocking host-path checks still run on the blocking pool.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(serve(a))
}

fn load_policy(path: Option<&Path>) -> anyhow::Result<Policy> {
    match path {
        None => Ok(Policy::default_policy()),
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .with_context(|| format!("reading policy file `{}`", p.display()))?;
            Policy::from_toml(&text)
                .with_context(|| format!("loading policy file `{}`", p.display()))
        }
    }
}

/// Binds the socket, replacing a stale file but never a live socket.
fn bind_socket(path: &Path, uid: u32, gid: u32, mode: u32) -> anyhow::Result<UnixListener> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating `{}`", dir.display()))?;
    }
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        use std::os::unix::fs::FileTypeExt;
        if !meta.file_type().is_socket() {
            bail!(
                "`{}` exists and is not a socket; refusing to replace it",
                path.display()
            );
        }
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            bail!(
                "`{}` is in use by a running server; refusing to take it over",
                path.display()
            );
        }
        std::fs::remove_file(path)
            .with_context(|| format!("removing stale socket `{}`", path.display()))?;
    }
    let listener =
        UnixListener::bind(path).with_context(|| format!("binding `{}`", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
    nix::unistd::chown(path, Some(uid.into()), Some(gid.into()))
        .with_context(|| format!("changing owner of `{}`", path.display()))?;
    Ok(listener)
}

async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => {},
        _ = int.recv() => {},
    }
    tracing::info!("shutting down: no new connections, draining in-flight requests");
}

async fn serve(a: ProxyArgs) -> anyhow::Result<()> {
    let mut policy = load_policy(a.policy.as_deref())?;
    super::budget::apply_cap(&a.budget, &mut policy)?; // surface issue
    let workspace = a
        .workspace
        .canonicalize()
        .with_context(|| format!("workspace `{}`", a.workspace.display()))?;
    let meta = std::fs::metadata(&workspace)?;
    let (uid, gid) = (a.uid.unwrap_or(meta.uid()), a.gid.unwrap_or(meta.gid()));
    let owner = hand_back_owner(uid, gid, a.hand_back_ids)?;
    let audit = match &a.audit_log {
        Some(p) => {
            AuditLog::file(p).with_context(|| format!("opening audit log `{}`", p.display()))?
        }
        None => AuditLog::stderr(),
    };
    let upstream_path = a.upstream.display().to_string();
    let pin_dir = a
        .pin_dir
        .clone()
        .unwrap_or_else(|| default_pin_dir(&a.listen));
    let upstream = proxy::upstream::client(a.upstream.clone());
    let budget = super::budget::prepare(&a.budget, &policy, &upstream, &a.upstream).await?; // surface issue
    let env = Environment {
        workspace: workspace.display().to_string(),
        proxy_socket: a.listen.display().to_string(),
        daemon_sockets: vec![
            upstream_path.clone(),
            "/var/run/docker.sock".into(),
            "/run/docker.sock".into(),
        ],
        cgroup_parent: budget.cgroup_parent,
        memory_budget: budget.memory,
        pids_budget: budget.pids,
        builds: budget.builds,
        pin_dir: pin_dir.display().to_string(),
    };
    if a.dry_run {
        tracing::warn!("DRY RUN MODE: denials are logged as `would-deny` and forwarded anyway");
    }
    let listener = bind_socket(&a.listen, uid, gid, a.socket_mode)?;
    // After the socket: a second proxy on a live socket fails there, with the clearer error.
    let pins = match crate::hostfs::PinStore::open(
        &pin_dir,
        &workspace,
        &a.upstream.display().to_string(),
    ) {
        Ok(p) => Arc::new(p),
        Err(e) => {
            let _ = std::fs::remove_file(&a.listen);
            return Err(e).context("setting up bind pins (the proxy must run as root, in the daemon's mount namespace)");
        }
    };
    // Beside the pin directory's lock: as private as the pins, and per proxy.
    let created = pin_dir.with_file_name(format!(
        "{}.created.json",
        pin_dir.file_name().unwrap_or_default().to_string_lossy()
    ));
    let containers = Arc::new(proxy::containers::Containers::open(Some(created))?);
    containers.spawn(upstream.clone());
    // Releases pins of destroyed containers and hands container-written files back (reconciles
    // with the daemon first, and after every reconnect).
    let hand_back = crate::hostfs::watch::spawn(pins.clone(), upstream.clone(), owner);
    let shared = Arc::new(Shared {
        policy,
        upstream,
        upstream_path,
        audit,
        dry_run: a.dry_run,
        env: Arc::new(env),
        creates: Default::default(),
        pins: Some(pins.clone()),
        containers,
        hand_back: Some(hand_back),
        show_pins: a.show_pins,
        sessions: Arc::default(),
    });
    println!("export DOCKER_HOST=unix://{}", a.listen.display());
    tracing::info!(listen = %a.listen.display(), upstream = %a.upstream.display(), workspace = %workspace.display(), "dockwarden proxy ready");
    let opts = Options {
        header_timeout: Duration::from_secs(a.header_timeout),
        max_connections: a.max_connections,
        ..Options::default()
    };
    let res = proxy::run(listener, shared, opts, shutdown_signal()).await;
    let _ = std::fs::remove_file(&a.listen);
    pins.close();
    res.context("serving")
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        a: ProxyArgs,
    }

    fn parse(extra: &[&str]) -> Result<ProxyArgs, clap::Error> {
        let args = ["proxy", "--workspace", "/ws"].iter().chain(extra);
        Cli::try_parse_from(args).map(|c| c.a)
    }

    #[test]
    fn hand_back_ids_parses_start_and_count() {
        assert_eq!(parse(&[]).expect("no flag").hand_back_ids, None);
        let a = parse(&["--hand-back-ids", "100000:65536"]).expect("a range");
        assert_eq!(a.hand_back_ids, IdRange::new(100_000, 65_536));
    }

    #[test]
    fn hand_back_ids_rejects_malformed_ranges_with_a_clear_error() {
        for (bad, says) in [
            ("100000", "is not `START:COUNT`"),
            ("100000:", "count is missing in `100000:`"),
            (":65536", "start is missing in `:65536`"),
            ("-1:10", "start `-1` of `-1:10` is not a decimal number"),
            ("+1:10", "is not a decimal number"),
            ("0x10:10", "is not a decimal number"),
            ("1:2:3", "count `2:3` of `1:2:3` is not a decimal number"),
            ("4294967296:1", "number too large"),
            ("100000:0", "COUNT must be at least 1"),
            ("4294967290:100", "reaches uid 4294967295"),
        ] {
            let flag = format!("--hand-back-ids={bad}");
            let err = parse(&[&flag]).expect_err(bad).to_string();
            assert!(err.contains(says), "`{bad}`: {err}");
        }
    }

    #[test]
    fn hand_back_ids_holding_the_workspace_uid_refuse_to_start() {
        let err =
            hand_back_owner(100_500, 100_500, IdRange::new(100_000, 65_536)).expect_err("refused");
        assert!(
            err.to_string()
                .contains("includes the workspace user's uid 100500"),
            "{err}"
        );
        let o = hand_back_owner(12345, 12345, IdRange::new(100_000, 65_536)).expect("accepted");
        assert!(o.hands_back(100_000) && !o.hands_back(12345));
    }
}
