//! The policy file: TOML, with the default compiled in. Knobs can tighten the policy or tune
//! limits; nothing in the file can switch off a rule the mission forbids.

use serde::Deserialize;

/// The embedded default policy (`policy/default.toml`).
pub const DEFAULT_POLICY: &str = include_str!("../../../../policy/default.toml");

/// Why a policy file was refused at start-up.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("invalid policy file: {0}")]
    Parse(#[from] toml::de::Error),
    #[error("invalid policy file: {0}")]
    Invalid(String),
}

/// The loaded policy.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    /// Largest JSON body the proxy reads for a decision, in bytes.
    pub max_json_body: usize,
    /// Lowest API version the proxy accepts (older versions have legacy decode paths).
    pub min_api_version: String,
    pub limits: Limits,
    pub ports: Ports,
    pub network: Network,
    pub sysctls: Sysctls,
    /// Where the daemon sits: shared (`default`) or the workspace's own (`private-daemon`).
    #[serde(default)]
    pub profile: Profile,
}

/// What the daemon behind the proxy holds, which decides whether daemon-wide verbs are the
/// workspace's to use (`crates/dockwarden-policy/src/policy/profile.rs`).
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Profile {
    /// The daemon may hold other users' objects: prune and user-network builds are refused.
    #[default]
    Default,
    /// A per-workspace private daemon: everything on it is the workspace's own.
    PrivateDaemon,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// Most containers the daemon may hold (all of them, not only the proxy's).
    pub max_containers: u64,
    /// Share of the machine's memory and process capacity for all containers together.
    pub share: f64,
    /// Most bind pins (host mounts) the proxy holds at once for its workspace, and so the
    /// most distinct bind sources one create may name (`container.bind.pin_limit`).
    #[serde(default = "default_max_pins")]
    pub max_pins: u64,
}

fn default_max_pins() -> u64 {
    512
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Ports {
    /// The address published ports are bound to.
    pub bind_address: String,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Network {
    pub min_mtu: u32,
    pub max_mtu: u32,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Sysctls {
    /// Network-namespace sysctls a container with its own network namespace may set (exact
    /// names, or prefixes ending in `.` or `*`); each must start with `net.`.
    pub net: Vec<String>,
    /// IPC-namespace sysctls a container with its own IPC namespace may set; each must be one
    /// the kernel keeps per IPC namespace (`kernel.msg*`, `kernel.sem`, `kernel.shm*`,
    /// `fs.mqueue.*`).
    pub ipc: Vec<String>,
}

impl Sysctls {
    /// Whether `pattern` matches the sysctl `name` (exact, or a prefix ending in `.` or `*`).
    pub fn matches(pattern: &str, name: &str) -> bool {
        match pattern.strip_suffix('*') {
            Some(prefix) => name.starts_with(prefix),
            None if pattern.ends_with('.') => name.starts_with(pattern),
            None => pattern == name,
        }
    }

    /// Whether every name `pattern` can match lies in the IPC namespace.
    fn ipc_only(pattern: &str) -> bool {
        let lit = pattern.strip_suffix('*').unwrap_or(pattern);
        let exact = !pattern.ends_with('*') && !pattern.ends_with('.');
        lit.starts_with("kernel.msg")
            || lit.starts_with("kernel.shm")
            || lit.starts_with("fs.mqueue.")
            || (exact && lit == "kernel.sem")
    }
}

impl Policy {
    /// Parses and validates a policy file.
    pub fn from_toml(text: &str) -> Result<Self, ConfigError> {
        let p: Policy = toml::from_str(text)?;
        p.validate()?;
        Ok(p)
    }

    /// The embedded default.
    pub fn default_policy() -> Self {
        // INVARIANT: the embedded file is validated by a unit test.
        Self::from_toml(DEFAULT_POLICY)
            .unwrap_or_else(|e| panic!("embedded policy is invalid: {e}"))
    }

    fn validate(&self) -> Result<(), ConfigError> {
        let bad = |m: &str| Err(ConfigError::Invalid(m.to_owned()));
        if crate::api::version::ApiVersion::parse(&self.min_api_version)
            .is_none_or(|v| v.less_than(&crate::api::version::ApiVersion::new(1, 24)))
        {
            return bad("`min_api_version` must be a version of at least 1.24");
        }
        if !(1..=64 * 1024 * 1024).contains(&self.max_json_body) {
            return bad("`max_json_body` must be between 1 byte and 64 MiB");
        }
        if !(self.limits.share > 0.0 && self.limits.share <= 1.0) {
            return bad("`limits.share` must be in (0, 1]");
        }
        if self.limits.max_containers == 0 {
            return bad("`limits.max_containers` must be at least 1");
        }
        if !(1..=65_536).contains(&self.limits.max_pins) {
            return bad("`limits.max_pins` must be between 1 and 65536");
        }
        let loopback = self
            .ports
            .bind_address
            .parse::<std::net::IpAddr>()
            .map(|ip| ip.is_loopback());
        if loopback != Ok(true) {
            return bad("`ports.bind_address` must be a loopback address");
        }
        if let Some(p) = self.sysctls.net.iter().find(|p| !p.starts_with("net.")) {
            return bad(&format!("`sysctls.net` entry `{p}` is not a `net.` sysctl"));
        }
        if let Some(p) = self.sysctls.ipc.iter().find(|p| !Sysctls::ipc_only(p)) {
            return bad(&format!(
                "`sysctls.ipc` entry `{p}` is not an IPC-namespace sysctl"
            ));
        }
        if self.network.min_mtu < 68
            || self.network.max_mtu > 65535
            || self.network.min_mtu > self.network.max_mtu
        {
            return bad("`network.min_mtu`..`network.max_mtu` must lie within 68..65535");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_default_policy_is_valid() {
        let p = Policy::from_toml(DEFAULT_POLICY).expect("default policy parses");
        assert_eq!(p.limits.max_containers, 64);
    }

    #[test]
    fn a_policy_cannot_publish_on_a_public_address() {
        let text =
            DEFAULT_POLICY.replace("bind_address = \"127.0.0.1\"", "bind_address = \"0.0.0.0\"");
        let e = Policy::from_toml(&text).expect_err("refused");
        assert!(e.to_string().contains("ports.bind_address"), "{e}");
    }

    #[test]
    fn sysctl_lists_hold_only_namespaced_names() {
        let net = DEFAULT_POLICY.replace(
            r#"net = ["net.*"]"#,
            r#"net = ["net.*", "kernel.core_pattern"]"#,
        );
        let e = Policy::from_toml(&net).expect_err("refused");
        assert!(e.to_string().contains("`kernel.core_pattern`"), "{e}");
        for bad in ["kernel.*", "kernel.s*", "kernel.sem*", "fs.*"] {
            let ipc = DEFAULT_POLICY.replace(r#"ipc = ["#, &format!(r#"ipc = ["{bad}", "#));
            let e = Policy::from_toml(&ipc).expect_err(bad);
            assert!(e.to_string().contains(&format!("`{bad}`")), "{bad}: {e}");
        }
        assert!(Sysctls::matches("net.*", "net.ipv6.conf.all.disable_ipv6"));
        assert!(Sysctls::matches("fs.mqueue.", "fs.mqueue.msg_max"));
        assert!(!Sysctls::matches("kernel.sem", "kernel.sem_next_id"));
    }

    #[test]
    fn profile_defaults_and_parses() {
        assert_eq!(Policy::default_policy().profile, Profile::Default);
        let p = Policy::from_toml(
            &DEFAULT_POLICY.replace("profile = \"default\"", "profile = \"private-daemon\""),
        )
        .expect("parses");
        assert_eq!(p.profile, Profile::PrivateDaemon);
        let e = Policy::from_toml(
            &DEFAULT_POLICY.replace("profile = \"default\"", "profile = \"open\""),
        )
        .expect_err("refused");
        assert!(e.to_string().contains("open"), "{e}");
    }

    #[test]
    fn unknown_keys_refuse_startup() {
        let text = format!("{DEFAULT_POLICY}\nallow_privileged = true\n");
        let e = Policy::from_toml(&text).expect_err("refused");
        assert!(e.to_string().contains("allow_privileged"), "{e}");
    }
}
