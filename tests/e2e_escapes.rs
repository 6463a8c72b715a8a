//! Issue 12's escapes, end to end on both engines: each test is an attack that worked before
//! (or a client that must keep working), run through the real proxy against the real daemon,
//! with the daemon's own view as the oracle.

mod common;
mod escapes_support;

use common::{IMAGE, unique};
use escapes_support::{Cleanup, engines, request};

/// `{"Image":…, "NetworkMode":"<id of host>"}` with no `HostConfig`, or with `"HostConfig":
/// null`: engines before 27 read the top-level field and join the host network object. A
/// bridge made outside the proxy with a forbidden option is refused the same way; the default
/// bridge named at the top level still works.
#[test]
fn top_level_network_mode_naming_the_host_network_or_a_foreign_bridge_is_refused() {
    for e in engines() {
        let p = e.proxy(&[]);
        let mut c = Cleanup::new(e);
        let host_id = e.ok(&["network", "inspect", "-f", "{{.Id}}", "host"]);
        let lanbr = unique("lanbr");
        e.ok(&["network", "create", "-o", "com.docker.network.bridge.enable_icc=false", &lanbr]);
        c.networks.push(lanbr.clone());
        for version in ["v1.41", "v1.44"] {
            if e.name == "20.10" && version == "v1.44" {
                continue; // 20.10 speaks API 1.41 at most
            }
            for target in [host_id.as_str(), &host_id[..12], lanbr.as_str()] {
                for hc in ["", r#","HostConfig":null"#] {
                    let name = unique("toplevel");
                    c.containers.push(name.clone());
                    let body = format!(r#"{{"Image":"{IMAGE}","NetworkMode":"{target}"{hc}}}"#);
                    let (s, t) = request(&p, "POST", &format!("/{version}/containers/create?name={name}"), Some(&body));
                    assert_eq!(s, 403, "engine {}: {body}: {t}", e.name);
                    assert!(t.contains("(rule network.connect)"), "engine {}: {body}: {t}", e.name);
                    assert!(!e.exists(&name), "engine {}: {body} created a container", e.name);
                }
            }
        }
        let name = unique("toplevel-ok");
        c.containers.push(name.clone());
        let body = format!(r#"{{"Image":"{IMAGE}","NetworkMode":"bridge","HostConfig":null}}"#);
        let (s, t) = request(&p, "POST", &format!("/v1.41/containers/create?name={name}"), Some(&body));
        assert_eq!(s, 201, "engine {}: {t}", e.name);
        assert_eq!(e.inspect(&name)["HostConfig"]["NetworkMode"], "bridge", "engine {}", e.name);
        eprintln!("engine {}: top-level NetworkMode host/foreign bridge refused, default bridge allowed", e.name);
    }
}
