//! The container rule catalogue: one row per rule id, with its rationale and the hint the CLI
//! user sees after the denial.

use crate::policy::catalogue::Rule;

const fn r(id: &'static str, rationale: &'static str, hint: &'static str) -> Rule {
    Rule {
        id,
        rationale,
        hint,
    }
}

pub const RULES: &[Rule] = &[
    r(
        "container.privileged",
        "a privileged container (or exec) has every capability and device of the host",
        "remove `--privileged` or `privileged: true`",
    ),
    r(
        "container.capabilities",
        "added capabilities (in any spelling, `CAP_` prefix, `ALL`, non-ASCII) widen what root in the container can do to the host",
        "remove `--cap-add` / `cap_add`; to keep a default capability, drop fewer instead of re-adding it",
    ),
    r(
        "container.mknod",
        "every created container loses `CAP_MKNOD`, so no device node it makes in a bind opens a host device",
        "nothing to do: `MKNOD` is added to the container's dropped capabilities",
    ),
    r(
        "container.devices",
        "host devices, device requests (GPU/CDI) and device cgroup rules give direct access to host hardware",
        "remove `--device`, `--gpus` and `--device-cgroup-rule`",
    ),
    r(
        "container.runtime",
        "a non-default runtime (or any containerd shim on the daemon's PATH) runs outside the default isolation",
        "remove `--runtime`",
    ),
    r(
        "container.cgroup_parent",
        "only the proxy places containers in a cgroup; a chosen parent escapes the shared budget",
        "remove `--cgroup-parent` / `cgroup_parent`",
    ),
    r(
        "container.oom_score",
        "a negative OOM score shields the container from the OOM killer at the host's expense",
        "use an `--oom-score-adj` of 0 or more",
    ),
    r(
        "container.annotations",
        "OCI annotations drive runtime hooks (for example CDI device injection)",
        "remove the annotations",
    ),
    r(
        "container.sysctl",
        "only namespaced sysctls from the policy's lists may be set: `net.*` in the container's own network namespace, IPC sysctls in its own IPC namespace",
        "remove the `--sysctl`, or drop `--network host` / `--ipc host` (and `container:` joins of such containers) for a namespaced one",
    ),
    r(
        "container.log_driver",
        "log drivers other than json-file/local/none make the daemon connect out or read host files",
        "use the `json-file`, `local` or `none` log driver",
    ),
    r(
        "container.tmpfs",
        "tmpfs options are limited to a safe list; `suid`, `dev`, `bind` and unknown options are refused",
        "use only size/mode/uid/gid/exec/noexec options on tmpfs mounts",
    ),
    r(
        "container.namespace.host",
        "host network, PID, IPC, UTS, user and cgroup namespaces remove the container's isolation",
        "remove `--network host`, `--pid host`, `--ipc host`, `--uts host`, `--userns host`, `--cgroupns host`",
    ),
    r(
        "container.cgroupns",
        "the cgroup namespace is forced to `private` (engines on cgroup v1 default to the host's)",
        "nothing to do: the container gets a private cgroup namespace",
    ),
    r(
        "container.cgroup_join",
        "`HostConfig.Cgroup` (`container:<id>`) puts the container in another container's cgroup, outside the placement and budget the proxy gives it",
        "remove `Cgroup` from the create request; each container gets its own cgroup under the workspace budget",
    ),
    r(
        "container.join",
        "joining another container's namespaces, volumes or links is allowed only when that container itself passes this policy",
        "join only containers created through the workspace proxy",
    ),
    r(
        "container.security_opt",
        "only `no-new-privileges` may be set; seccomp, AppArmor and SELinux overrides are refused in every spelling",
        "remove the `--security-opt`, except `no-new-privileges`; Supabase's vector log collector needs `label:disable`, so run `supabase start -x vector`",
    ),
    r(
        "container.masked_paths",
        "setting MaskedPaths or ReadonlyPaths (`systempaths=unconfined`) unmasks the host's /proc and /sys",
        "remove `--security-opt systempaths=unconfined`",
    ),
    r(
        "container.bind.outside",
        "bind mounts may only come from beneath the workspace",
        "bind only paths inside the workspace",
    ),
    r(
        "container.bind.symlink",
        "a symlink in a bind source could point anywhere on the host",
        "bind the real directory, not a path through a symlink",
    ),
    r(
        "container.bind.missing",
        "dockerd creates missing bind sources as root and follows symlinks while doing so",
        "create the directory in the workspace first",
    ),
    r(
        "container.bind.unusable",
        "a bind source that cannot be checked is refused",
        "bind a plain file or directory inside the workspace",
    ),
    r(
        "container.bind.propagation",
        "shared or slave mount propagation lets mounts cross between host and container",
        "remove the `shared`/`slave` propagation option",
    ),
    r(
        "container.bind.docker_socket",
        "a bind of the Docker socket is rewritten to the proxy's socket so the container's requests pass the same policy",
        "nothing to do: Docker requests from the container pass the workspace policy",
    ),
    r(
        "container.mount.type",
        "only bind, volume and tmpfs mounts are understood; other types are refused",
        "use a bind, volume or tmpfs mount",
    ),
    r(
        "container.mount.invalid",
        "a mount specification the daemon would read differently or reject is refused",
        "use `source:target[:options]` with an absolute target",
    ),
    r(
        "container.volume.driver",
        "volume drivers other than `local` are plugins that run on the host",
        "use the local volume driver",
    ),
    r(
        "container.volume.options",
        "local volume options `type`/`o`/`device` mount arbitrary host paths or devices (only a strict tmpfs form is allowed)",
        "use a plain named volume or a bind from the workspace",
    ),
    r(
        "container.ports.host_ip",
        "published ports are bound to loopback; unspecified or unparsable host IPs are rewritten, other addresses refused",
        "publish on 127.0.0.1 (for example `-p 127.0.0.1:8080:80`)",
    ),
    r(
        "container.ports.empty",
        "an empty binding list publishes on every interface on newer engines; it is rewritten to one loopback binding",
        "nothing to do: the port is published on 127.0.0.1",
    ),
    r(
        "container.ports.publish_all",
        "PublishAllPorts publishes on every interface; it is rewritten to loopback bindings for every exposed port",
        "nothing to do: every exposed port is published on 127.0.0.1",
    ),
    r(
        "container.extra_hosts",
        "every container gets `host.docker.internal:host-gateway` unless it names that host itself",
        "nothing to do: reach workspace services listening on 0.0.0.0 as `host.docker.internal`",
    ),
    r(
        "container.legacy_hostconfig",
        "engines up to 26.x honour HostConfig fields at the top level of a create body; they are moved into HostConfig, or refused when both are present",
        "put host settings inside `HostConfig`",
    ),
    r(
        "container.fact_missing",
        "a fact the decision needs was not gathered, so the request is refused",
        "retry; report a bug if this persists",
    ),
];
