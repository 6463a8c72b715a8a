//! What the watcher does about pins, decided without I/O: given the pins and the containers'
//! states, which pins to release and which to hand back (chown-back). `watch.rs` gathers the
//! states and carries the plan out.

use std::collections::BTreeMap;

use super::pins::PinEntry;

/// Container id → state (`running`, `restarting`, `paused`, `exited`, `created`, ...). A
/// container missing here does not exist.
pub type States = BTreeMap<String, String>;

/// What to do. Chown-back roots are opened before any release, so both may name one pin.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Plan {
    pub release: Vec<PinEntry>,
    pub chown: Vec<(PinEntry, &'static str)>,
}

/// Running, restarting and paused containers still use their binds.
pub fn busy(state: Option<&String>) -> bool {
    matches!(
        state.map(String::as_str),
        Some("running" | "restarting" | "paused")
    )
}

/// True when any pin of the same inode belongs to a container that still uses it.
fn source_busy(all: &[PinEntry], e: &PinEntry, states: &States) -> bool {
    all.iter().any(|o| {
        (o.dev, o.ino) == (e.dev, e.ino)
            && o.container.as_ref().is_some_and(|c| busy(states.get(c)))
    })
}

/// A container event: `destroy` releases the container's pins; `die`/`stop` of a container
/// that is not coming back hands its binds back, unless another container still uses them.
/// `states` must hold the container's state as inspect reports it after the event.
pub fn on_event(action: &str, id: &str, all: &[PinEntry], states: &States) -> Plan {
    let mine: Vec<PinEntry> = all
        .iter()
        .filter(|e| e.container.as_deref() == Some(id))
        .cloned()
        .collect();
    let mut plan = Plan::default();
    if action == "destroy" {
        plan.chown = mine
            .iter()
            .filter(|e| !source_busy(all, e, states))
            .map(|e| (e.clone(), "destroy"))
            .collect();
        plan.release = mine;
    } else if !busy(states.get(id)) {
        plan.chown = mine
            .into_iter()
            .filter(|e| !source_busy(all, e, states))
            .map(|e| (e, "stopped"))
            .collect();
    }
    plan
}

/// A reconciliation. `before` are the settled pins (`PinStore::settled`) snapshotted *before* listing the daemon's
/// containers; `all` are the pins after adopting what the listing showed; `referenced` is pin
/// path → container from the listing. Claimed pins no container uses are released (and handed
/// back); pins of stopped containers are handed back.
pub fn reconcile(
    before: &[PinEntry],
    all: &[PinEntry],
    referenced: &BTreeMap<String, String>,
    states: &States,
) -> Plan {
    let mut plan = Plan::default();
    for e in before.iter().filter(|e| !referenced.contains_key(&e.pin)) {
        plan.release.push(e.clone());
        if !source_busy(all, e, states) {
            plan.chown.push((e.clone(), "reconcile: container gone"));
        }
    }
    for e in all.iter().filter(|e| referenced.contains_key(&e.pin)) {
        let stopped = e.container.as_ref().is_some_and(|c| !busy(states.get(c)));
        if stopped && !source_busy(all, e, states) {
            plan.chown.push((e.clone(), "reconcile: container stopped"));
        }
    }
    plan
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pin(name: &str, container: Option<&str>, ino: u64) -> PinEntry {
        PinEntry {
            pin: format!("/pins/{name}"),
            source: "/ws/data".into(),
            is_dir: true,
            container: container.map(str::to_owned),
            dev: 1,
            ino,
            created: 0,
        }
    }

    fn states(s: &[(&str, &str)]) -> States {
        s.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    fn names(v: &[PinEntry]) -> Vec<&str> {
        v.iter().map(|e| e.pin.as_str()).collect()
    }

    fn chowned(p: &Plan) -> Vec<&str> {
        p.chown.iter().map(|(e, _)| e.pin.as_str()).collect()
    }

    #[test]
    fn die_before_a_restart_policy_restart_hands_nothing_back() {
        let all = [pin("a", Some("A"), 7)];
        assert_eq!(
            on_event("die", "A", &all, &states(&[("A", "restarting")])),
            Plan::default()
        );
        assert_eq!(
            chowned(&on_event("die", "A", &all, &states(&[("A", "exited")]))),
            ["/pins/a"]
        );
    }

    #[test]
    fn a_second_container_on_the_same_source_holds_the_chown_back() {
        let all = [
            pin("a", Some("A"), 7),
            pin("b", Some("B"), 7),
            pin("c", Some("C"), 9),
        ];
        let st = states(&[("A", "exited"), ("B", "running"), ("C", "running")]);
        assert!(
            on_event("die", "A", &all, &st).chown.is_empty(),
            "B still uses inode 7"
        );
        let st = states(&[("A", "exited"), ("B", "exited"), ("C", "running")]);
        assert_eq!(chowned(&on_event("die", "B", &all, &st)), ["/pins/b"]);
    }

    #[test]
    fn destroy_releases_and_hands_back_unless_the_source_is_in_use() {
        let all = [pin("a", Some("A"), 7), pin("b", Some("B"), 7)];
        let p = on_event("destroy", "A", &all, &states(&[("B", "paused")]));
        assert_eq!((names(&p.release), p.chown.len()), (vec!["/pins/a"], 0));
        let p = on_event("destroy", "A", &all, &states(&[("B", "created")]));
        assert_eq!(
            (names(&p.release), chowned(&p)),
            (vec!["/pins/a"], vec!["/pins/a"])
        );
    }

    #[test]
    fn events_of_containers_without_pins_do_nothing() {
        let all = [pin("a", Some("A"), 7), pin("p", None, 7)];
        assert_eq!(
            on_event("destroy", "X", &all, &States::new()),
            Plan::default()
        );
    }

    #[test]
    fn reconcile_releases_orphans_keeps_pending_and_hands_back_stopped() {
        let before = [
            pin("gone", Some("G"), 1),
            pin("stale", Some(""), 2),
            pin("run", Some("R"), 3),
            pin("stop", Some("S"), 4),
        ];
        let mut all = before.to_vec();
        all.push(pin("pending", None, 5));
        let referenced: BTreeMap<String, String> = [("/pins/run", "R"), ("/pins/stop", "S")]
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        let p = reconcile(
            &before,
            &all,
            &referenced,
            &states(&[("R", "running"), ("S", "exited")]),
        );
        assert_eq!(names(&p.release), ["/pins/gone", "/pins/stale"]);
        assert_eq!(chowned(&p), ["/pins/gone", "/pins/stale", "/pins/stop"]);
    }
}
