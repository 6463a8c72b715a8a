//! Microbenchmarks of the pure core: route classification, and body decode plus policy
//! decision for a small create body and for a real compose-generated one.
//!
//! Facts are gathered before the timed loop (every host path answers "inside the workspace",
//! every daemon look-up answers with a plausible object), so the numbers are the policy's own
//! cost, not the daemon's or the filesystem's.
//!
//! Time is the benchmark thread's **CPU time** (`CLOCK_THREAD_CPUTIME_ID`), not wall time:
//! the bench machines are small and shared, and CPU time does not count the time the thread
//! waited for a core. `DW_BENCH_WALL=1` switches back to criterion's wall clock.

use std::hint::black_box;

use criterion::measurement::{Measurement, ValueFormatter, WallTime};
use criterion::{Criterion, Throughput};
use dockwarden::api::json::{self, Json};
use dockwarden::api::path::CanonicalPath;
use dockwarden::api::query::Query;
use dockwarden::api::route;
use dockwarden::policy::facts::{Environment, HostPathFact, ImageFact, NetworkFact, VolumeFact};
use dockwarden::policy::{self, FactQuery, Facts, Policy, Verdict};

const SMALL: &[u8] = include_bytes!("../fixtures/bodies/small-create.json");
const COMPOSE: &[u8] = include_bytes!("../fixtures/bodies/compose-create.json");

const PATHS: &[(&str, &str)] = &[
    ("GET", "/_ping"),
    ("GET", "/v1.41/containers/json"),
    ("GET", "/v1.41/containers/3f2a9c1b7e4d/json"),
    ("POST", "/v1.41/containers/create"),
    ("POST", "/v1.41/exec/9d8c7b6a5f4e/start"),
    ("DELETE", "/v1.41/containers/x/checkpoints/y"),
    ("GET", "/v1.41/no/such/endpoint"),
];

fn bench_route<M: Measurement>(c: &mut Criterion<M>) {
    let mut g = c.benchmark_group("route");
    for (m, p) in PATHS {
        g.bench_function(format!("{m} {p}"), |b| {
            b.iter(|| {
                let path = CanonicalPath::parse(black_box(p)).expect("canonical");
                black_box(route::classify(black_box(m), &path))
            })
        });
    }
    g.finish();
}

fn env() -> Environment {
    Environment {
        workspace: "/home/dev/proj".into(),
        proxy_socket: "/run/dockwarden/docker.sock".into(),
        daemon_sockets: vec!["/var/run/docker.sock".into(), "/run/docker.sock".into()],
        pin_dir: "/run/dockwarden/pins".into(),
        ..Environment::default()
    }
}

/// Answers every query the way a healthy daemon and a tidy workspace would.
fn fake_facts(qs: Vec<FactQuery>) -> Facts {
    let mut f = Facts {
        env: env().into(),
        ..Facts::default()
    };
    for q in qs {
        match q {
            FactQuery::HostPath(p) => {
                f.pins
                    .insert(p.clone(), format!("/run/dockwarden/pins/{}", f.pins.len()));
                f.host_paths
                    .insert(p, HostPathFact::Inside { is_dir: true });
            }
            FactQuery::Container(r) => {
                f.containers.insert(r, None);
            }
            FactQuery::Exec(id) => {
                f.execs.insert(id, None);
            }
            FactQuery::Network(r) => {
                let fact = NetworkFact {
                    id: "0123456789ab".into(),
                    name: r.clone(),
                    driver: "bridge".into(),
                    options: Vec::new(),
                    raw: json::parse(br#"{"Name":"n","Driver":"bridge","Options":{}}"#)
                        .expect("json"),
                };
                f.networks.insert(r, Some(fact));
            }
            FactQuery::Volume(r) => {
                let fact = VolumeFact {
                    name: r.clone(),
                    driver: "local".into(),
                    options: Vec::new(),
                };
                f.volumes.insert(r, Some(fact));
            }
            FactQuery::Image(r) => {
                f.images.insert(
                    r,
                    Some(ImageFact {
                        exposed_ports: vec!["8080/tcp".into()],
                    }),
                );
            }
            FactQuery::ContainerCount => f.container_count = Some(3),
            FactQuery::HostRoutes => f.host_routes = Some(Vec::new()),
            FactQuery::SwarmState => f.swarm_state = Some("inactive".into()),
        }
    }
    f
}

fn request(body: Option<Json>) -> policy::Request {
    let path = CanonicalPath::parse("/v1.41/containers/create").expect("canonical");
    policy::Request {
        method: "POST".into(),
        route: route::classify("POST", &path),
        query: Query::parse(Some("name=dwbench_web_1")).expect("query"),
        body,
        has_body: true,
    }
}

/// Decode, ask for facts, decide, and serialise what is forwarded: the proxy's CPU path for a
/// create, minus the I/O.
fn decide(body: &[u8], facts: &Facts, pol: &Policy) -> Option<Vec<u8>> {
    let parsed: Json = json::parse(body).ok()?;
    let req = request(Some(parsed));
    let _qs = policy::needs(&req, pol).ok()?;
    match policy::decide(&req, facts, pol) {
        Verdict::Allow(p) => Some(p.body().map(Json::to_bytes).unwrap_or_default()),
        Verdict::Deny(_) => None,
    }
}

fn bench_policy<M: Measurement>(c: &mut Criterion<M>) {
    let pol = Policy::default_policy();
    let mut g = c.benchmark_group("create");
    for (name, body) in [("small", SMALL), ("compose", COMPOSE)] {
        let req = request(Some(json::parse(body).expect("fixture is valid JSON")));
        let facts = fake_facts(policy::needs(&req, &pol).unwrap_or_default());
        match policy::decide(&req, &facts, &pol) {
            Verdict::Allow(_) => {}
            // Still timed (a denial is a real path), but say so: the numbers mean something else.
            Verdict::Deny(d) => eprintln!(
                "note: the {name} create body is denied ({}): timing the deny path",
                d.rule
            ),
        }
        g.bench_function(format!("decode/{name}"), |b| {
            b.iter(|| black_box(json::parse(black_box(body))))
        });
        g.bench_function(format!("decode+decide/{name}"), |b| {
            b.iter(|| black_box(decide(black_box(body), &facts, &pol)))
        });
    }
    g.finish();
}

/// On-CPU nanoseconds of the calling thread (`CLOCK_THREAD_CPUTIME_ID`, which the kernel brings
/// up to date on every read, unlike `/proc/thread-self/schedstat`).
#[expect(
    unsafe_code,
    reason = "clock_gettime has no safe wrapper in the crates we depend on"
)]
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec and the clock id is a constant the kernel knows.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Criterion measurement of thread CPU time (criterion runs the routine on this thread).
struct CpuTime;

impl Measurement for CpuTime {
    type Intermediate = u64;
    type Value = u64;
    fn start(&self) -> u64 {
        thread_cpu_ns()
    }
    fn end(&self, t0: u64) -> u64 {
        thread_cpu_ns().saturating_sub(t0)
    }
    fn add(&self, a: &u64, b: &u64) -> u64 {
        a + b
    }
    fn zero(&self) -> u64 {
        0
    }
    fn to_f64(&self, v: &u64) -> f64 {
        *v as f64
    }
    fn formatter(&self) -> &dyn ValueFormatter {
        &CpuFormatter
    }
}

struct CpuFormatter;

impl ValueFormatter for CpuFormatter {
    fn scale_values(&self, ns: f64, values: &mut [f64]) -> &'static str {
        let (factor, unit) = match ns {
            n if n < 1e3 => (1.0, "ns cpu"),
            n if n < 1e6 => (1e-3, "µs cpu"),
            _ => (1e-6, "ms cpu"),
        };
        values.iter_mut().for_each(|v| *v *= factor);
        unit
    }
    fn scale_throughputs(&self, _typical: f64, t: &Throughput, values: &mut [f64]) -> &'static str {
        let n = match t {
            Throughput::Bytes(n) | Throughput::BytesDecimal(n) | Throughput::Elements(n) => {
                *n as f64
            }
            _ => 1.0,
        };
        values.iter_mut().for_each(|v| *v = n * 1e9 / *v);
        "per cpu-second"
    }
    fn scale_for_machines(&self, _values: &mut [f64]) -> &'static str {
        "ns"
    }
}

fn run<M: Measurement + 'static>(mut c: Criterion<M>)
where
    Criterion<M>: Sized,
{
    bench_route(&mut c);
    bench_policy(&mut c);
    c.final_summary();
}

fn main() {
    if std::env::var_os("DW_BENCH_WALL").is_some() {
        run(Criterion::default()
            .with_measurement(WallTime)
            .configure_from_args());
    } else {
        run(Criterion::default()
            .with_measurement(CpuTime)
            .configure_from_args());
    }
}
