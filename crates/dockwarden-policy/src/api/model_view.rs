//! The security-relevant view of a container-create body, read through the typed accessors of
//! [`super::json`] exactly as the policy reads it.
//!
//! The view mirrors what Go's `encoding/json` leaves in Docker's structs: absent and `null`
//! scalars are zero values, `null` lists and maps are `null` (nil) while `[]`/`{}` stay empty,
//! and a `null` element of a list of structs is a zero struct. `fixtures/gojson` prints the
//! same shape from Go itself, and `tests/go_differential.rs` asserts the two agree whenever our
//! decoder accepts a body. The fuzz targets run it too, since it touches every accessor.

use serde_json::{Map, Value};

use super::json::{DecodeError, Json, Object};

/// Which create-request shape the daemon decodes into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CreateShape {
    /// Engines >= 27.0: `Config` flattened at the top, `HostConfig` nested only.
    Modern,
    /// Engines <= 26.x: HostConfig fields at the top level are honoured too (see
    /// docker-api-notes §3.3); a nested `HostConfig` wins but takes `Memory` and
    /// `VolumeDriver` from the top level when it leaves them empty.
    Legacy,
}

const HC_STRINGS: &[&str] = &[
    "NetworkMode",
    "VolumeDriver",
    "CgroupnsMode",
    "IpcMode",
    "PidMode",
    "UTSMode",
    "UsernsMode",
    "Runtime",
    "CgroupParent",
];
const HC_BOOLS: &[&str] = &["Privileged", "PublishAllPorts"];
const HC_INTS: &[&str] = &["OomScoreAdj", "Memory"];
const HC_LISTS: &[&str] = &[
    "Binds",
    "VolumesFrom",
    "CapAdd",
    "ExtraHosts",
    "SecurityOpt",
    "DeviceCgroupRules",
    "MaskedPaths",
    "ReadonlyPaths",
];
const HC_OTHER: &[&str] = &[
    "Sysctls",
    "PortBindings",
    "Devices",
    "DeviceRequests",
    "PidsLimit",
    "Mounts",
];

/// Every HostConfig (and embedded Resources) field the view covers.
pub fn host_config_fields() -> impl Iterator<Item = &'static str> {
    [HC_STRINGS, HC_BOOLS, HC_INTS, HC_LISTS, HC_OTHER]
        .into_iter()
        .flatten()
        .copied()
}

/// The view of a create body: `{"Config": {...}, "HostConfig": {...}}`, or the type error Go
/// would report. A body that is not an object is an error.
pub fn create_view(body: &Json, shape: CreateShape) -> Result<Value, DecodeError> {
    let top = body
        .as_object()
        .ok_or_else(|| type_err("body", "an object"))?;
    let config = config_view(top)?;
    let nested = top.object("HostConfig")?;
    let host = match shape {
        CreateShape::Modern => host_view(nested.unwrap_or(&Object::new()))?,
        CreateShape::Legacy => {
            // Go type-checks the promoted top-level fields whether or not they are used.
            let from_top = host_view(top)?;
            match nested {
                None => from_top,
                Some(inner) => {
                    let mut h = host_view(inner)?;
                    for (field, zero) in [
                        ("Memory", Value::from(0)),
                        ("VolumeDriver", Value::from("")),
                    ] {
                        if h.get(field) == Some(&zero) {
                            h.insert(
                                field.to_owned(),
                                from_top.get(field).cloned().unwrap_or(zero),
                            );
                        }
                    }
                    h
                }
            }
        }
    };
    let mut out = Map::new();
    out.insert("Config".into(), Value::Object(config));
    out.insert("HostConfig".into(), Value::Object(host));
    Ok(Value::Object(out))
}

fn config_view(o: &Object) -> Result<Map<String, Value>, DecodeError> {
    let mut m = Map::new();
    for f in ["User", "Image"] {
        m.insert(f.into(), o.str(f)?.unwrap_or_default().into());
    }
    for f in ["Env", "Cmd"] {
        m.insert(f.into(), list(o.str_list(f)?));
    }
    for f in ["Volumes", "ExposedPorts"] {
        m.insert(f.into(), set(o, f)?);
    }
    m.insert("Labels".into(), string_map(o.str_map("Labels")?));
    Ok(m)
}

fn host_view(o: &Object) -> Result<Map<String, Value>, DecodeError> {
    let mut m = Map::new();
    for &f in HC_STRINGS {
        m.insert(f.into(), o.str(f)?.unwrap_or_default().into());
    }
    for &f in HC_BOOLS {
        m.insert(f.into(), o.bool(f)?.unwrap_or_default().into());
    }
    for &f in HC_INTS {
        m.insert(f.into(), o.int(f)?.unwrap_or_default().into());
    }
    for &f in HC_LISTS {
        m.insert(f.into(), list(o.str_list(f)?));
    }
    m.insert("Sysctls".into(), string_map(o.str_map("Sysctls")?));
    m.insert(
        "PidsLimit".into(),
        o.int("PidsLimit")?.map_or(Value::Null, Value::from),
    );
    m.insert("PortBindings".into(), port_bindings(o)?);
    m.insert("Mounts".into(), structs(o, "Mounts", mount)?);
    m.insert("Devices".into(), structs(o, "Devices", device)?);
    m.insert(
        "DeviceRequests".into(),
        structs(o, "DeviceRequests", device_request)?,
    );
    Ok(m)
}

fn type_err(field: &str, expected: &'static str) -> DecodeError {
    DecodeError::Type {
        field: field.to_owned(),
        expected,
    }
}

fn list(v: Option<Vec<String>>) -> Value {
    v.map_or(Value::Null, |items| {
        Value::Array(items.into_iter().map(Value::String).collect())
    })
}

fn string_map(v: Option<Vec<(String, String)>>) -> Value {
    v.map_or(Value::Null, |kv| {
        Value::Object(kv.into_iter().map(|(k, v)| (k, Value::String(v))).collect())
    })
}

/// A `map[string]struct{}`: values must be objects (their keys are ignored) or `null`.
fn set(o: &Object, field: &str) -> Result<Value, DecodeError> {
    let Some(m) = o.object(field)? else {
        return Ok(Value::Null);
    };
    let mut out = Map::new();
    for (k, v) in m.entries() {
        if !matches!(v, Json::Object(_) | Json::Null) {
            return Err(type_err(field, "an object of objects"));
        }
        out.insert(k.to_owned(), Value::Object(Map::new()));
    }
    Ok(Value::Object(out))
}

/// A `[]T` of structs, each element viewed by `each` (a `null` element is a zero struct).
fn structs(
    o: &Object,
    field: &str,
    each: fn(&Object) -> Result<Value, DecodeError>,
) -> Result<Value, DecodeError> {
    match o.object_list(field)? {
        None => Ok(Value::Null),
        Some(items) => items
            .iter()
            .map(each)
            .collect::<Result<Vec<_>, _>>()
            .map(Value::Array),
    }
}

/// `map[string][]PortBinding`: a `null` list stays nil, which is not the same as `[]`.
fn port_bindings(o: &Object) -> Result<Value, DecodeError> {
    let Some(m) = o.object("PortBindings")? else {
        return Ok(Value::Null);
    };
    let mut out = Map::new();
    for (port, v) in m.entries() {
        let bindings = match v {
            Json::Null => Value::Null,
            Json::Array(items) => Value::Array(
                items
                    .iter()
                    .map(|it| match it {
                        Json::Null => binding(&Object::new()),
                        Json::Object(b) => binding(b),
                        _ => Err(type_err("PortBindings", "a map of lists of objects")),
                    })
                    .collect::<Result<Vec<_>, _>>()?,
            ),
            _ => return Err(type_err("PortBindings", "a map of lists of objects")),
        };
        out.insert(port.to_owned(), bindings);
    }
    Ok(Value::Object(out))
}

fn binding(b: &Object) -> Result<Value, DecodeError> {
    let mut m = Map::new();
    for f in ["HostIp", "HostPort"] {
        m.insert(f.into(), b.str(f)?.unwrap_or_default().into());
    }
    Ok(Value::Object(m))
}

fn mount(o: &Object) -> Result<Value, DecodeError> {
    let mut m = Map::new();
    for f in ["Type", "Source", "Target"] {
        m.insert(f.into(), o.str(f)?.unwrap_or_default().into());
    }
    m.insert(
        "ReadOnly".into(),
        o.bool("ReadOnly")?.unwrap_or_default().into(),
    );
    let volume_options = match o.object("VolumeOptions")? {
        None => Value::Null,
        Some(vo) => {
            let driver = match vo.object("DriverConfig")? {
                None => Value::Null,
                Some(d) => {
                    let mut dm = Map::new();
                    dm.insert("Name".into(), d.str("Name")?.unwrap_or_default().into());
                    dm.insert("Options".into(), string_map(d.str_map("Options")?));
                    Value::Object(dm)
                }
            };
            let mut vm = Map::new();
            vm.insert("DriverConfig".into(), driver);
            Value::Object(vm)
        }
    };
    m.insert("VolumeOptions".into(), volume_options);
    Ok(Value::Object(m))
}

fn device(o: &Object) -> Result<Value, DecodeError> {
    let mut m = Map::new();
    for f in ["PathOnHost", "PathInContainer", "CgroupPermissions"] {
        m.insert(f.into(), o.str(f)?.unwrap_or_default().into());
    }
    Ok(Value::Object(m))
}

fn device_request(o: &Object) -> Result<Value, DecodeError> {
    let mut m = Map::new();
    m.insert("Driver".into(), o.str("Driver")?.unwrap_or_default().into());
    m.insert("Count".into(), o.int("Count")?.unwrap_or_default().into());
    m.insert("DeviceIDs".into(), list(o.str_list("DeviceIDs")?));
    let caps = match o.field("Capabilities") {
        None => Value::Null,
        Some(Json::Array(rows)) => Value::Array(
            rows.iter()
                .map(|row| match row {
                    Json::Null => Ok(Value::Null),
                    Json::Array(_) => {
                        let mut holder = Object::new();
                        holder.set("Capabilities", row.clone());
                        holder.str_list("Capabilities").map(list)
                    }
                    _ => Err(type_err("Capabilities", "a list of lists of strings")),
                })
                .collect::<Result<Vec<_>, _>>()?,
        ),
        Some(_) => return Err(type_err("Capabilities", "a list of lists of strings")),
    };
    m.insert("Capabilities".into(), caps);
    Ok(Value::Object(m))
}
