//! `dockwarden serve`: the workspace lifecycle service's flags and start-up; the service
//! itself is `workspace::daemon::run`.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;

use crate::workspace::daemon;
use crate::workspace::model::DEFAULT_IDLE_TIMEOUT_SECS;

/// Flags of `dockwarden serve`.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Unix socket to serve the API on; its permissions are the authorization.
    #[arg(long, env = "DOCKWARDEN_WS_SOCKET")]
    pub socket: PathBuf,
    /// Directory for the database, worktrees and snapshots.
    #[arg(long)]
    pub state_dir: PathBuf,
    /// Socket permissions, in octal.
    #[arg(long, default_value = "660")]
    pub socket_mode: String,
    /// First uid/gid given to workspaces.
    #[arg(long, default_value_t = 20000)]
    pub uid_base: u32,
    /// How many uids the service may hand out (at most 32768: each docker-compose workspace's
    /// container ids are a subordinate range chosen by its uid modulo that).
    #[arg(long, default_value_t = 10000)]
    pub uid_count: u32,
    /// Default idle timeout of a workspace, in seconds: then it is suspended (frozen in
    /// place, with a snapshot) where the machine has a cgroup freezer, archived otherwise.
    #[arg(long, default_value_t = DEFAULT_IDLE_TIMEOUT_SECS)]
    pub idle_timeout: u64,
    /// Default time from suspension to archive (a stop with a snapshot), in seconds; 0: idle
    /// archives at once, without suspending. A create request's `archive_after_secs`, then
    /// the repository's settings, win over it.
    #[arg(long, default_value_t = crate::workspace::model::DEFAULT_ARCHIVE_AFTER_SECS)]
    pub archive_after: u64,
    /// Longest time a workspace stays live (from its create or its last connect) before it is
    /// stopped with a snapshot and the reason `max_runtime`, in seconds. A create request's
    /// `max_runtime_secs`, then the repository's settings, win over it. Default: no limit.
    #[arg(long)]
    pub max_runtime: Option<u64>,
    /// How often idle stop and baseline refresh run, in milliseconds.
    #[arg(long, default_value_t = 1000)]
    pub tick_ms: u64,
    /// Age after which a baseline snapshot of an active workspace is refreshed, in seconds.
    #[arg(long, default_value_t = 600)]
    pub baseline_stale_after: u64,
    /// Superseded automatic snapshots (baselines, idle stops) kept per workspace beside the
    /// newest; older ones are pruned, a few at a time. Manual and kill snapshots, a stopped
    /// workspace's, and any a stop record or a fork refers to are never pruned.
    #[arg(long, default_value_t = 20)]
    pub keep_snapshots: usize,
    /// Engine binary for docker-compose workspaces (each gets a private daemon of its own).
    /// For an engine outside /usr/sbin, its containerd and docker-proxy are looked up next to
    /// it first (`<prefix>/bin`, `<prefix>/sbin`), then on the system PATH (runc).
    #[arg(long, default_value = "/usr/sbin/dockerd")]
    pub dockerd: PathBuf,
    /// Turn the docker-compose runtime off (creates that need it are refused).
    #[arg(long)]
    pub no_docker: bool,
    /// An image archive (`docker save` output) loaded into every new private daemon before
    /// setup (repeatable): no registry may be reachable, and each daemon starts empty.
    #[arg(long = "preload-image-tar")]
    pub preload_image_tar: Vec<PathBuf>,
    /// Resource layers, defaults and disk pool (TOML; docs/resources.md). Default: embedded.
    #[arg(long)]
    pub resources: Option<PathBuf>,
    /// The key workspace secrets are sealed under in `state.db`: 32 bytes, mode 0600, outside
    /// the state directory; made at the first start (docs/workspace-api.md, "Secrets at rest").
    #[arg(long, default_value = crate::workspace::secrets::keyfile::DEFAULT_PATH)]
    pub secrets_key: PathBuf,
    /// What workspaces reach beyond their walls (docs/isolation.md, "Network"): `nat` (the
    /// host masquerades their traffic to anything but the host, its Docker bridges, other
    /// workspaces and link-local addresses) or `none` (nothing outside the workspace).
    #[arg(long, default_value = "nat", value_parser = ["nat", "none"])]
    pub egress: String,
    #[command(flatten)]
    pub log: crate::cli::logging::LogArgs,
}

/// Runs the workspace service until SIGINT or SIGTERM.
pub async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    crate::cli::logging::init(args.log.log_format);
    let socket_mode = u32::from_str_radix(&args.socket_mode, 8)
        .with_context(|| format!("socket mode `{}` is not octal", args.socket_mode))?;
    anyhow::ensure!(
        args.uid_count <= crate::workspace::runtime::docker::subid::SLOTS,
        "--uid-count {} is more than {}: workspaces' subordinate id ranges would overlap",
        args.uid_count,
        crate::workspace::runtime::docker::subid::SLOTS
    );
    let mut config = daemon::config(args.state_dir.clone());
    config.uid_base = args.uid_base;
    config.uid_count = args.uid_count;
    config.default_idle_timeout = Duration::from_secs(args.idle_timeout);
    config.tick = Duration::from_millis(args.tick_ms.max(10));
    config.baseline_stale_after = Duration::from_secs(args.baseline_stale_after);
    config.keep_snapshots = args.keep_snapshots;
    config.default_max_runtime = args.max_runtime.map(Duration::from_secs);
    config.default_archive_after = Duration::from_secs(args.archive_after);
    let docker = (!args.no_docker).then(|| crate::workspace::runtime::DockerConfig {
        dockerd: args.dockerd.clone(),
        exe: std::env::current_exe().unwrap_or_else(|_| PathBuf::from("dockwarden")),
        preload: args.preload_image_tar.clone(),
        fail_at: None,
    });
    let resources = match &args.resources {
        None => crate::workspace::resources::ResourcesConfig::embedded(),
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .with_context(|| format!("reading resources file `{}`", p.display()))?;
            crate::workspace::resources::ResourcesConfig::parse(&text)
                .map_err(|e| anyhow::anyhow!("resources file `{}`: {e}", p.display()))?
        }
    };
    let opts = daemon::DaemonOptions {
        socket: args.socket,
        socket_mode,
        config,
        docker,
        resources,
        secrets_key: args.secrets_key,
        egress: args
            .egress
            .parse()
            .map_err(|e: String| anyhow::anyhow!(e))?,
    };
    daemon::run(opts, daemon::shutdown_signal())
        .await
        .with_context(|| format!("workspace service on `{}`", args.state_dir.display()))
}
