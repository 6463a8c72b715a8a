//! Port rules: every published port is bound to the policy's loopback address.
//!
//! - `HostIp` empty, `0.0.0.0`, `::` or unparsable (engines ≤ 28.x treat an unparsable address as
//!   "all interfaces") is rewritten to `ports.bind_address`; loopback is kept (in canonical
//!   form); any other address is refused.
//! - An empty or `null` binding list publishes on every interface on 25.0+; it becomes one
//!   loopback binding with an ephemeral host port.
//! - `PublishAllPorts` becomes explicit loopback bindings for every exposed port, the request's
//!   and the image's (looked up), and is then turned off.
//!
//! In [`Mode::Stored`] nothing can be rewritten, so anything that would be is refused.

use std::net::IpAddr;

use super::{Changes, Ctx, Mode, fact_missing};
use crate::api::json::{Json, Object};
use crate::policy::{Denial, FactQuery};

/// What a binding's `HostIp` means to the daemon.
enum HostIp {
    /// Every interface (empty, unspecified or unparsable).
    Any,
    /// Loopback, with its canonical spelling.
    Loopback(String),
    /// Some other host interface.
    Other,
}

fn judge_ip(raw: &str) -> HostIp {
    let Ok(ip) = raw.parse::<IpAddr>() else {
        return HostIp::Any;
    };
    let ip = match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    };
    if ip.is_unspecified() {
        HostIp::Any
    } else if ip.is_loopback() {
        HostIp::Loopback(ip.to_string())
    } else {
        HostIp::Other
    }
}

/// The image, when `PublishAllPorts` needs its exposed ports.
pub(super) fn needs(body: &Object, hc: &Object) -> Result<Vec<FactQuery>, Denial> {
    if hc.bool("PublishAllPorts")? != Some(true) {
        return Ok(Vec::new());
    }
    Ok(body
        .str("Image")?
        .filter(|i| !i.is_empty())
        .map(|i| FactQuery::Image(i.to_owned()))
        .into_iter()
        .collect())
}

fn loopback_binding(ctx: &Ctx<'_>) -> Json {
    let mut b = Object::new();
    b.set(
        "HostIp",
        Json::String(ctx.policy.ports.bind_address.clone()),
    );
    b.set("HostPort", Json::String(String::new()));
    Json::Array(vec![Json::Object(b)])
}

/// Checks and rewrites `PortBindings`.
pub(super) fn check_bindings(
    hc: &mut Object,
    ctx: &Ctx<'_>,
    ch: &mut Changes,
) -> Result<(), Denial> {
    if ctx.mode == Mode::Stored && hc.bool("PublishAllPorts")? == Some(true) {
        return Err(Denial::new(
            "container.ports.publish_all",
            "it publishes all ports on every interface",
        ));
    }
    let Some(map) = hc.object("PortBindings")? else {
        return Ok(());
    };
    let mut out = Object::new();
    for (port, list) in map.entries() {
        let items = match list {
            Json::Null => Vec::new(),
            Json::Array(items) => items.clone(),
            _ => {
                return Err(Denial::new(
                    "request.body.invalid",
                    format!("bindings of port `{port}` must be a list"),
                ));
            }
        };
        if items.is_empty() {
            if ctx.mode == Mode::Stored {
                return Err(Denial::new(
                    "container.ports.empty",
                    format!("port `{port}` has an empty binding list"),
                ));
            }
            ch.rewrite(
                "container.ports.empty",
                format!("port `{port}`: empty binding list bound to loopback"),
            );
            out.set(port, loopback_binding(ctx));
            continue;
        }
        let mut new = Vec::with_capacity(items.len());
        for item in items {
            new.push(Json::Object(binding(port, item, ctx, ch)?));
        }
        out.set(port, Json::Array(new));
    }
    hc.set("PortBindings", Json::Object(out));
    Ok(())
}

/// One `{HostIp, HostPort}`; `null` is the zero binding (all interfaces, ephemeral port).
fn binding(port: &str, item: Json, ctx: &Ctx<'_>, ch: &mut Changes) -> Result<Object, Denial> {
    let mut b = match item {
        Json::Null => Object::new(),
        Json::Object(o) => o,
        _ => {
            return Err(Denial::new(
                "request.body.invalid",
                format!("a binding of port `{port}` must be an object"),
            ));
        }
    };
    let raw = b.str("HostIp")?.unwrap_or("").to_owned();
    match (judge_ip(&raw), ctx.mode) {
        (HostIp::Loopback(canon), _) => {
            if canon != raw {
                b.set("HostIp", Json::String(canon));
            }
        }
        (HostIp::Any, Mode::Create) => {
            ch.rewrite(
                "container.ports.host_ip",
                format!("port `{port}`: host IP `{raw}` rewritten to loopback"),
            );
            b.set(
                "HostIp",
                Json::String(ctx.policy.ports.bind_address.clone()),
            );
        }
        (HostIp::Any, Mode::Stored) => {
            return Err(Denial::new(
                "container.ports.host_ip",
                format!("it publishes port `{port}` on every interface"),
            ));
        }
        (HostIp::Other, _) => {
            return Err(Denial::new(
                "container.ports.host_ip",
                format!("publishing port `{port}` on `{raw}` is not allowed"),
            ));
        }
    }
    Ok(b)
}

/// `80`, `80/TCP` and `080/tcp` are one port to engines ≥ 29.
fn norm_port(p: &str) -> String {
    let (num, proto) = p.split_once('/').unwrap_or((p, "tcp"));
    let num = num.trim_start_matches('0');
    format!(
        "{}/{}",
        if num.is_empty() { "0" } else { num },
        proto.to_ascii_lowercase()
    )
}

/// Turns `PublishAllPorts` into loopback bindings for every exposed port without one.
pub(super) fn publish_all(
    body: &Object,
    hc: &mut Object,
    ctx: &Ctx<'_>,
    ch: &mut Changes,
) -> Result<(), Denial> {
    if hc.bool("PublishAllPorts")? != Some(true) {
        return Ok(());
    }
    let mut exposed: Vec<String> = body
        .object("ExposedPorts")?
        .map(|o| o.entries().map(|(k, _)| k.to_owned()).collect())
        .unwrap_or_default();
    if let Some(image) = body.str("Image")?.filter(|i| !i.is_empty()) {
        match ctx.facts.images.get(image) {
            None => return Err(fact_missing(&format!("image `{image}`"))),
            // The daemon will answer "no such image"; nothing of the image can be published.
            Some(None) => {}
            Some(Some(img)) => exposed.extend(img.exposed_ports.iter().cloned()),
        }
    }
    let mut map = hc.object("PortBindings")?.cloned().unwrap_or_default();
    let mut bound: Vec<String> = map.entries().map(|(k, _)| norm_port(k)).collect();
    for port in exposed {
        if !bound.contains(&norm_port(&port)) {
            bound.push(norm_port(&port));
            map.set(&port, loopback_binding(ctx));
        }
    }
    hc.set("PortBindings", Json::Object(map));
    hc.set("PublishAllPorts", Json::Bool(false));
    ch.rewrite(
        "container.ports.publish_all",
        "`PublishAllPorts` replaced by loopback bindings for every exposed port",
    );
    Ok(())
}
