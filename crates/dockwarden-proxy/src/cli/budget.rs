//! `dockwarden proxy` flags and start-up steps for the container cap and the shared cgroup
//! budget (issue 4), kept apart from the socket set-up in `proxy.rs`.

use std::path::PathBuf;

use anyhow::{Context, bail};

use crate::limits::daemon_config::{self, DaemonSettings};
use crate::limits::{self, Amount, Layout, Machine, Sizes};
use crate::policy::Policy;
use crate::policy::facts::BuildPlacement;
use crate::proxy::upstream::Upstream;

#[derive(Debug, Clone, clap::Args, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BudgetArgs {
    /// Most containers the daemon may hold (overrides the policy's `limits.max_containers`).
    #[arg(long)]
    pub max_containers: Option<u64>,
    /// Memory all containers share: a fraction of MemTotal (`0.5`) or bytes (`64m`, `8g`).
    /// Default: the policy's `limits.share`.
    #[arg(long, value_parser = Amount::parse)]
    pub memory_budget: Option<Amount>,
    /// Processes all containers share: a fraction of min(pid_max, threads-max) (`0.5`) or a count.
    /// Default: the policy's `limits.share`.
    #[arg(long, value_parser = Amount::parse)]
    pub pids_budget: Option<Amount>,
    /// Name of the parent cgroup (cgroupfs: `/<name>`; systemd: `<name>.slice`).
    #[arg(long, default_value = "dockwarden")]
    pub cgroup_name: String,
    /// Where the cgroup hierarchy is mounted.
    #[arg(long, default_value = "/sys/fs/cgroup")]
    pub cgroup_root: PathBuf,
    /// Do not put containers under a budgeted parent cgroup (they share the whole machine).
    #[arg(long)]
    pub no_cgroup_budget: bool,
    /// The daemon's configuration file when its process is not visible (another PID namespace,
    /// a socket-activated daemon); otherwise the file on the daemon's own command line is read.
    #[arg(long, default_value = limits::daemon_config::DEFAULT_PATH)]
    pub daemon_config: PathBuf,
    /// Forward BuildKit builds the proxy cannot place inside the budget (the daemon's own
    /// `cgroup-parent` is not the budget's) instead of refusing them (`limits.build_budget`),
    /// with a warning logged at every such build.
    #[arg(long)]
    pub allow_unbudgeted_builds: bool,
}

/// What the budget set-up hands the policy environment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Budget {
    pub cgroup_parent: Option<String>,
    pub memory: Option<u64>,
    pub pids: Option<u64>,
    pub builds: BuildPlacement,
}

/// Applies `--max-containers` to the loaded policy.
pub fn apply_cap(a: &BudgetArgs, policy: &mut Policy) -> anyhow::Result<()> {
    if let Some(n) = a.max_containers {
        if n == 0 {
            bail!("`--max-containers` must be at least 1");
        }
        policy.limits.max_containers = n;
    }
    Ok(())
}

/// Detects the daemon's cgroup layout and installs the parent cgroup, or refuses to start.
pub async fn prepare(
    a: &BudgetArgs,
    policy: &Policy,
    up: &Upstream,
    upstream_path: &std::path::Path,
) -> anyhow::Result<Budget> {
    let info = crate::proxy::facts::daemon_get(up, "/info").await;
    let settings = daemon_config::read(upstream_path, &a.daemon_config);
    if a.no_cgroup_budget {
        // The daemon may be down at start-up here; the config warnings then skip version checks.
        let version = info.ok().flatten().and_then(|j| {
            j.as_object()
                .and_then(|o| o.str("ServerVersion").ok().flatten().map(str::to_owned))
        });
        warn_daemon_config(&settings, version.as_deref().unwrap_or(""));
        tracing::warn!(
            "--no-cgroup-budget: containers are not held to a shared memory and pids budget"
        );
        return Ok(Budget::default());
    }
    let info = info.context(
        "asking the daemon for `/info` (needed for the shared budget; --no-cgroup-budget skips it)",
    )?;
    let info = info
        .as_ref()
        .and_then(|j| j.as_object())
        .cloned()
        .unwrap_or_default();
    let text = |k: &str| info.str(k).ok().flatten().unwrap_or_default().to_owned();
    let version = text("ServerVersion");
    warn_daemon_config(&settings, &version);
    let layout = Layout::from_info(&text("CgroupDriver"), &text("CgroupVersion")).context(
        "the shared budget cannot be applied; pass --no-cgroup-budget to run without it",
    )?;
    let share = Amount::Fraction(policy.limits.share);
    let sizes = Sizes::of(
        Machine::read()?,
        a.memory_budget.unwrap_or(share),
        a.pids_budget.unwrap_or(share),
    );
    let parent = limits::install(layout, &a.cgroup_root, &a.cgroup_name, sizes).context(
        "the shared budget cannot be applied; pass --no-cgroup-budget to run without it",
    )?;
    let builds = placement(&settings, &parent, &version, a.allow_unbudgeted_builds);
    tracing::info!(cgroup.parent = %parent, budget.memory = sizes.memory, budget.pids = sizes.pids, layout = ?layout,
        builds.daemon_inside = builds.daemon_inside, builds.llb_cgroup = builds.llb_cgroup, "shared budget in place");
    Ok(Budget {
        cgroup_parent: Some(parent),
        memory: Some(sizes.memory),
        pids: Some(sizes.pids),
        builds,
    })
}

/// Where the daemon puts BuildKit steps, said once at start-up when it is outside the budget.
fn placement(
    settings: &DaemonSettings,
    parent: &str,
    server_version: &str,
    allow_unbudgeted: bool,
) -> BuildPlacement {
    let (daemon_inside, finding) = daemon_config::build_placement(settings, parent);
    if let Some(f) = finding {
        if allow_unbudgeted {
            tracing::warn!(
                "{} (--allow-unbudgeted-builds: they are forwarded, with a warning at each)",
                f.text
            );
        } else {
            tracing::warn!("{}", f.text);
        }
    }
    BuildPlacement {
        daemon_inside,
        // BuildKit 0.11 (Engine 23) and later honour an LLB step's own cgroup parent.
        llb_cgroup: major(server_version).is_some_and(|m| m >= 23),
        allow_unbudgeted,
    }
}

fn major(server_version: &str) -> Option<u64> {
    server_version
        .split('.')
        .next()
        .and_then(|m| m.parse::<u64>().ok())
}

fn warn_daemon_config(settings: &DaemonSettings, server_version: &str) {
    for f in daemon_config::findings(settings.text.as_deref(), major(server_version)) {
        if f.error {
            tracing::error!(daemon.config = %settings.source, "{}", f.text);
        } else {
            tracing::warn!(daemon.config = %settings.source, "{}", f.text);
        }
    }
}
