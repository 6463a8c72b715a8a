//! The BuildKit messages the `/grpc` policy reads, declared with prost's derive.
//!
//! Field numbers and types are facts of the wire format, checked against BuildKit v0.13.2
//! (vendored by moby 26.1): `api/services/control/control.proto`,
//! `frontend/gateway/pb/gateway.proto` and `solver/pb/ops.proto`. Only the fields the policy
//! judges are declared; prost skips the rest, and the proxy forwards the client's bytes (plus
//! any appended rewrite), so undeclared fields reach the daemon unchanged.
//!
//! Go's protobuf and prost agree where it matters here: the last value of a repeated scalar
//! field wins, repeated message fields merge, a map's last entry for a key wins, and a string
//! that is not UTF-8 is an error.

use std::collections::HashMap;

/// `moby.buildkit.v1.SolveRequest` (control API).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ControlSolveRequest {
    #[prost(string, tag = "1")]
    pub r#ref: String,
    #[prost(message, optional, tag = "2")]
    pub definition: Option<Definition>,
    #[prost(string, tag = "3")]
    pub exporter_deprecated: String,
    #[prost(map = "string, string", tag = "4")]
    pub exporter_attrs_deprecated: HashMap<String, String>,
    #[prost(string, tag = "5")]
    pub session: String,
    #[prost(string, tag = "6")]
    pub frontend: String,
    #[prost(map = "string, string", tag = "7")]
    pub frontend_attrs: HashMap<String, String>,
    #[prost(message, optional, tag = "8")]
    pub cache: Option<CacheOptions>,
    #[prost(string, repeated, tag = "9")]
    pub entitlements: Vec<String>,
    #[prost(map = "string, message", tag = "10")]
    pub frontend_inputs: HashMap<String, Definition>,
    #[prost(bool, tag = "11")]
    pub internal: bool,
    /// `moby.buildkit.v1.sourcepolicy.Policy`, kept opaque: only its presence is judged.
    #[prost(bytes = "vec", optional, tag = "12")]
    pub source_policy: Option<Vec<u8>>,
    #[prost(message, repeated, tag = "13")]
    pub exporters: Vec<Exporter>,
}

/// The field number of `FrontendAttrs` in the control `SolveRequest`.
pub const CONTROL_FRONTEND_ATTRS: u32 = 7;
/// The field number of `FrontendOpt` in the gateway `SolveRequest`.
pub const GATEWAY_FRONTEND_OPT: u32 = 3;

/// `moby.buildkit.v1.CacheOptions`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct CacheOptions {
    #[prost(string, tag = "1")]
    pub export_ref_deprecated: String,
    #[prost(string, repeated, tag = "2")]
    pub import_refs_deprecated: Vec<String>,
    #[prost(map = "string, string", tag = "3")]
    pub export_attrs_deprecated: HashMap<String, String>,
    #[prost(message, repeated, tag = "4")]
    pub exports: Vec<CacheOptionsEntry>,
    #[prost(message, repeated, tag = "5")]
    pub imports: Vec<CacheOptionsEntry>,
}

/// `CacheOptionsEntry` (same shape in the control and gateway APIs).
#[derive(Clone, PartialEq, prost::Message)]
pub struct CacheOptionsEntry {
    #[prost(string, tag = "1")]
    pub r#type: String,
    #[prost(map = "string, string", tag = "2")]
    pub attrs: HashMap<String, String>,
}

/// `moby.buildkit.v1.Exporter`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Exporter {
    #[prost(string, tag = "1")]
    pub r#type: String,
    #[prost(map = "string, string", tag = "2")]
    pub attrs: HashMap<String, String>,
}

/// `moby.buildkit.v1.frontend.SolveRequest` (gateway API, `LLBBridge/Solve`).
#[derive(Clone, PartialEq, prost::Message)]
pub struct GatewaySolveRequest {
    #[prost(message, optional, tag = "1")]
    pub definition: Option<Definition>,
    #[prost(string, tag = "2")]
    pub frontend: String,
    #[prost(map = "string, string", tag = "3")]
    pub frontend_opt: HashMap<String, String>,
    #[prost(message, repeated, tag = "12")]
    pub cache_imports: Vec<CacheOptionsEntry>,
    #[prost(map = "string, message", tag = "13")]
    pub frontend_inputs: HashMap<String, Definition>,
    #[prost(bytes = "vec", repeated, tag = "15")]
    pub source_policies: Vec<Vec<u8>>,
}

/// `moby.buildkit.v1.frontend.ResolveSourceMetaRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ResolveSourceMetaRequest {
    #[prost(message, optional, tag = "1")]
    pub source: Option<SourceOp>,
    #[prost(bytes = "vec", repeated, tag = "8")]
    pub source_policies: Vec<Vec<u8>>,
}

/// `pb.Definition`: marshalled ops (metadata and source mapping are not judged).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Definition {
    #[prost(bytes = "vec", repeated, tag = "1")]
    pub def: Vec<Vec<u8>>,
}

/// `pb.Op`. The `op` oneof is declared as separate fields: a Go decoder keeps the last one on
/// the wire, and judging every one of them is stricter.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Op {
    #[prost(message, optional, tag = "2")]
    pub exec: Option<ExecOp>,
    #[prost(message, optional, tag = "3")]
    pub source: Option<SourceOp>,
    #[prost(bytes = "vec", optional, tag = "4")]
    pub file: Option<Vec<u8>>,
    #[prost(bytes = "vec", optional, tag = "5")]
    pub build: Option<Vec<u8>>,
    #[prost(bytes = "vec", optional, tag = "6")]
    pub merge: Option<Vec<u8>>,
    #[prost(bytes = "vec", optional, tag = "7")]
    pub diff: Option<Vec<u8>>,
}

/// `pb.ExecOp`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ExecOp {
    #[prost(message, optional, tag = "1")]
    pub meta: Option<Meta>,
    /// `pb.NetMode`: 0 sandbox, 1 host, 2 none.
    #[prost(int32, tag = "3")]
    pub network: i32,
    /// `pb.SecurityMode`: 0 sandbox, 1 insecure.
    #[prost(int32, tag = "4")]
    pub security: i32,
}

/// `pb.Meta` (the exec op's arguments).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Meta {
    #[prost(string, repeated, tag = "1")]
    pub args: Vec<String>,
    #[prost(string, tag = "10")]
    pub cgroup_parent: String,
}

/// `pb.SourceOp`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct SourceOp {
    #[prost(string, tag = "1")]
    pub identifier: String,
    #[prost(map = "string, string", tag = "2")]
    pub attrs: HashMap<String, String>,
}

/// One map entry `string → string`, to append a rewritten attribute to a message.
#[derive(Clone, PartialEq, prost::Message)]
pub struct StringEntry {
    #[prost(string, tag = "1")]
    pub key: String,
    #[prost(string, tag = "2")]
    pub value: String,
}

/// `pb.NetMode` values.
pub const NET_SANDBOX: i32 = 0;
pub const NET_HOST: i32 = 1;
pub const NET_NONE: i32 = 2;
/// `pb.SecurityMode` values.
pub const SECURITY_SANDBOX: i32 = 0;
