//! Facts the policy needs but cannot compute itself: host-path resolutions and daemon
//! look-ups. The proxy gathers them (see `dockwarden::proxy::facts`) before calling `decide`.

use std::collections::BTreeMap;

use crate::api::json::Json;

/// One fact to gather before deciding.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum FactQuery {
    /// Resolve a host path beneath the workspace, with no symlink in any component.
    HostPath(String),
    /// Inspect a container by reference (ID, name or prefix), as the daemon resolves it.
    Container(String),
    /// Inspect an exec instance, for the container it runs in.
    Exec(String),
    /// Inspect a network by reference.
    Network(String),
    /// Inspect a volume by name.
    Volume(String),
    /// Inspect an image (for its exposed ports).
    Image(String),
    /// Count every container the daemon has.
    ContainerCount,
    /// The host's IPv4 routes (for user-chosen network subnets).
    HostRoutes,
    /// The daemon's swarm state (`GET /info`, `Swarm.LocalNodeState`).
    SwarmState,
}

/// What resolving a host path found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostPathFact {
    /// Beneath the workspace, no symlinks, and it exists (file or directory).
    Inside { is_dir: bool },
    /// Beneath the workspace lexically, but (part of) it does not exist.
    Missing,
    /// The path resolves outside the workspace.
    Outside,
    /// A component of the path is a symlink.
    ThroughSymlink,
    /// The daemon socket or the proxy's own socket.
    DockerSocket,
    /// It could not be resolved (permission, I/O error, bad bytes).
    Unusable(String),
}

/// A container as the daemon reports it (`GET /containers/{id}/json`).
#[derive(Debug, Clone, PartialEq)]
pub struct ContainerFact {
    pub id: String,
    /// The stored `HostConfig`, re-checked by the same rules when another container joins it.
    pub host_config: Json,
    /// The container's `Config.Labels`.
    pub labels: Vec<(String, String)>,
    /// Whether this proxy created it (its record of the creates it forwarded).
    pub created_here: bool,
    /// The names of the volumes it mounts (`Mounts[]` of type `volume`), which `VolumesFrom`
    /// would bring into another container.
    pub volumes: Vec<String>,
}

/// A network as the daemon reports it (`GET /networks/{id}`).
#[derive(Debug, Clone, PartialEq)]
pub struct NetworkFact {
    pub id: String,
    pub name: String,
    pub driver: String,
    pub options: Vec<(String, String)>,
    /// The full inspect body, for rules that need more.
    pub raw: Json,
}

/// A volume as the daemon reports it (`GET /volumes/{name}`).
#[derive(Debug, Clone, PartialEq)]
pub struct VolumeFact {
    pub name: String,
    pub driver: String,
    pub options: Vec<(String, String)>,
}

/// An image's configuration, as far as the policy needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct ImageFact {
    pub exposed_ports: Vec<String>,
}

/// One IPv4 route of the host (`/proc/net/route`), as a network and prefix length.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostRoute {
    pub network: std::net::Ipv4Addr,
    pub prefix: u8,
    /// The interface the route goes through (`docker0`, `br-<id>`, `eth0`, ...).
    pub iface: String,
}

/// Where this proxy runs: fixed at start-up.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Environment {
    /// The workspace checkout, canonical (no symlinks).
    pub workspace: String,
    /// The proxy's listening socket, which a container gets in place of the daemon's.
    pub proxy_socket: String,
    /// The daemon's socket path(s) as a container might name them.
    pub daemon_sockets: Vec<String>,
    /// The cgroup parent every container is placed under, when the budget is on.
    pub cgroup_parent: Option<String>,
    /// Memory all containers share, in bytes (the parent cgroup's limit), when the budget is on.
    pub memory_budget: Option<u64>,
    /// Processes all containers share (the parent cgroup's pids limit), when the budget is on.
    pub pids_budget: Option<u64>,
    /// Where the daemon's BuildKit puts build steps, as read at start-up (`limits::builds`).
    pub builds: BuildPlacement,
    /// The root-only directory holding this proxy's bind pins (`dockwarden::hostfs::pins`). A
    /// stored HostConfig of a container made through the proxy names pins from here in place
    /// of workspace paths; empty in tests that do not pin.
    pub pin_dir: String,
}

/// What decides whether a BuildKit step lands inside the budget (`Environment::cgroup_parent`).
/// The default is the strictest reading: the daemon's own cgroup parent is not known to be the
/// budget's, its BuildKit ignores an LLB step's cgroup parent, and nothing unplaced is let by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BuildPlacement {
    /// The daemon's own cgroup parent (dockerd's `cgroup-parent`, where BuildKit puts every step
    /// that names none) is the budget's parent or beneath it.
    pub daemon_inside: bool,
    /// The daemon's BuildKit honours the cgroup parent an LLB exec step names (Engine 23 and
    /// later: `executor/oci.GenerateSpec`). Then the proxy can place a step itself, and a step
    /// the proxy does not see (an image frontend's) can place itself anywhere.
    pub llb_cgroup: bool,
    /// `--allow-unbudgeted-builds`: a build the proxy cannot place is forwarded with a warning
    /// instead of refused.
    pub allow_unbudgeted: bool,
}

/// Gathered facts. A missing entry means "not gathered", which rules treat as a denial.
#[derive(Debug, Clone, Default)]
pub struct Facts {
    /// Shared with the proxy (one per process): a request's facts take a reference, not a
    /// copy of its strings (~2,500 instructions of every request to clone and drop).
    pub env: std::sync::Arc<Environment>,
    pub host_paths: BTreeMap<String, HostPathFact>,
    /// Cleaned host path → the root-only pin the proxy mounted for it while gathering
    /// (`dockwarden::hostfs::pins`). A path resolved `Inside` but absent here could not be pinned.
    pub pins: BTreeMap<String, String>,
    /// `None` means the daemon answered 404 for that reference.
    pub containers: BTreeMap<String, Option<ContainerFact>>,
    /// Exec ID → the ID of its container; `None` when the daemon answered 404.
    pub execs: BTreeMap<String, Option<String>>,
    pub networks: BTreeMap<String, Option<NetworkFact>>,
    pub volumes: BTreeMap<String, Option<VolumeFact>>,
    pub images: BTreeMap<String, Option<ImageFact>>,
    pub container_count: Option<u64>,
    /// Pins the proxy held before this request's were made; `None` without a pin store.
    pub pins_in_use: Option<u64>,
    /// The host's IPv4 routes; `None` when not gathered.
    pub host_routes: Option<Vec<HostRoute>>,
    /// The daemon's `Swarm.LocalNodeState` (`inactive`, `active`, ...); `None` when not gathered.
    pub swarm_state: Option<String>,
}

impl Facts {
    /// Whether `q` was gathered already.
    pub fn has(&self, q: &FactQuery) -> bool {
        match q {
            FactQuery::HostPath(p) => self.host_paths.contains_key(p),
            FactQuery::Container(r) => self.containers.contains_key(r),
            FactQuery::Exec(id) => self.execs.contains_key(id),
            FactQuery::Network(r) => self.networks.contains_key(r),
            FactQuery::Volume(r) => self.volumes.contains_key(r),
            FactQuery::Image(r) => self.images.contains_key(r),
            FactQuery::ContainerCount => self.container_count.is_some(),
            FactQuery::HostRoutes => self.host_routes.is_some(),
            FactQuery::SwarmState => self.swarm_state.is_some(),
        }
    }
}
