//! Sweeping a uid clean before it goes to another workspace: its processes, what it owns in
//! the shared temporary directories, and its SysV IPC objects.
//!
//! A deleted workspace's uid is handed to the next workspace, and `workspaces/<id>` is not
//! all the old holder could leave: 0600 files in `/tmp`, `/var/tmp` and `/dev/shm`, POSIX
//! message queues in `/dev/mqueue`, SysV shared memory, message queues and semaphores would
//! all be the new holder's to read. Delete sweeps the uid; a uid whose sweep left anything is
//! quarantined (never allocated) until a later sweep finds it clean. At start the service
//! sweeps, in one pass, every uid of its range that no workspace holds: what a crash during a
//! delete or a create left, and the quarantined ones.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

use tracing::{info, warn};

use crate::workspace::error::WsResult;
use crate::workspace::runtime::procs;
use crate::workspace::service::Service;
use crate::workspace::store;

mod sysv;
#[cfg(test)]
mod tests;
mod walk;

/// The shared directories a workspace user can write to outside its workspace.
pub const SYSTEM_ROOTS: [&str; 4] = ["/tmp", "/var/tmp", "/dev/shm", "/dev/mqueue"];

/// What a sweep did for one uid, for the log line and the quarantine decision.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SweepReport {
    pub processes: u32,
    pub files: u64,
    pub dirs: u64,
    pub ipc: u64,
    /// Things of the uid's that could not be removed (or places that could not be searched).
    pub errors: u64,
    /// The first of them, as the reason of a quarantine.
    pub first_error: Option<String>,
}

impl SweepReport {
    /// Nothing of the uid's is known to be left.
    pub fn is_clean(&self) -> bool {
        self.errors == 0
    }

    fn error(&mut self, what: String) {
        self.errors += 1;
        self.first_error.get_or_insert(what);
    }
}

/// Where a sweep looks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Roots {
    /// Directories walked; one that does not exist is skipped.
    pub dirs: Vec<PathBuf>,
    /// Directories never entered (the service's own state, should it live under `/tmp`).
    pub skip: Vec<PathBuf>,
    /// Whether SysV IPC objects are swept too.
    pub sysv: bool,
}

impl Roots {
    /// The production roots: the four system directories and SysV IPC.
    pub fn system(state_dir: &Path) -> Roots {
        Roots {
            dirs: SYSTEM_ROOTS.iter().map(PathBuf::from).collect(),
            skip: vec![state_dir.to_path_buf()],
            sysv: true,
        }
    }
}

/// The outcome of one sweep of several uids.
#[derive(Debug, Default)]
pub struct Sweep {
    per_uid: BTreeMap<u32, SweepReport>,
    /// Errors no single uid can be blamed for (a root, or a `/proc/sysvipc` table, that could
    /// not be read): every swept uid counts them, as none can be called clean.
    shared: Vec<String>,
    /// Other owners' directories that could not be searched (gone or moved mid-walk). Not
    /// errors: any workspace user could make them at will, and would then keep every uid
    /// from being released. What another user moves around during the walk is beyond any
    /// walk; the private `/tmp` and `no_new_privs` of issue 23 close that side.
    pub unsearched: Vec<String>,
}

impl Sweep {
    fn of(&mut self, uid: u32) -> &mut SweepReport {
        self.per_uid.entry(uid).or_default()
    }

    fn error(&mut self, uid: u32, what: String) {
        self.of(uid).error(what);
    }

    fn shared(&mut self, what: String) {
        self.shared.push(what);
    }

    /// The report of one swept uid.
    pub fn report(&self, uid: u32) -> SweepReport {
        let mut r = self.per_uid.get(&uid).cloned().unwrap_or_default();
        for e in &self.shared {
            r.error(e.clone());
        }
        r
    }

    /// The uids something was found (or failed) for.
    pub fn touched(&self) -> impl Iterator<Item = u32> + '_ {
        self.per_uid.keys().copied()
    }
}

/// Sweeps one uid: kills its processes, removes what it owns under `roots`, and its SysV
/// IPC objects.
pub async fn sweep(uid: u32, roots: &Roots) -> SweepReport {
    sweep_uids(HashSet::from([uid]), roots).await.report(uid)
}

/// Sweeps every uid of `uids` (never root's) in one pass over `roots` and `/proc/sysvipc`.
pub async fn sweep_uids(uids: HashSet<u32>, roots: &Roots) -> Sweep {
    let mut out = Sweep::default();
    if uids.is_empty() {
        return out;
    }
    // Processes first: one still running could make new files behind the walk.
    for (uid, n) in procs::kill_matching(|u| uids.contains(&u)).await {
        out.of(uid).processes += n;
    }
    let roots = roots.clone();
    let swept = tokio::task::spawn_blocking(move || {
        for (_, uid) in procs::pids_matching(|u| uids.contains(&u)) {
            out.error(uid, "a process of the uid survived SIGKILL".into());
        }
        let is_ours = |u: u32| uids.contains(&u);
        let mut walk = walk::Walk::new(&is_ours, &roots.skip, &mut out);
        for dir in &roots.dirs {
            walk.root(dir);
        }
        if roots.sysv {
            sysv::sweep(&is_ours, &mut out);
        }
        out
    })
    .await;
    swept.unwrap_or_else(|e| {
        let mut out = Sweep::default();
        out.shared(format!("sweep task: {e}"));
        out
    })
}

fn log_unsearched(out: &Sweep, when: &str) {
    if let Some(first) = out.unsearched.first() {
        warn!(sweep.unsearched = out.unsearched.len(), sweep.first = %first, "uid sweep {when}: other owners' directories left unsearched");
    }
}

fn log(uid: u32, r: &SweepReport, when: &str) {
    if r.is_clean() {
        info!(
            workspace.uid = uid,
            sweep.processes = r.processes,
            sweep.files = r.files,
            sweep.dirs = r.dirs,
            sweep.ipc = r.ipc,
            "uid swept {when}"
        );
    } else {
        warn!(
            workspace.uid = uid,
            sweep.processes = r.processes,
            sweep.files = r.files,
            sweep.dirs = r.dirs,
            sweep.ipc = r.ipc,
            sweep.errors = r.errors,
            sweep.first_error = r.first_error.as_deref().unwrap_or(""),
            "uid not clean {when}; quarantined"
        );
    }
}

impl Service {
    /// Removes the record of `id` (deleted, or its create failed) once its `uid` is swept.
    /// The record holds the uid while it is swept, so no create can take it; when the sweep
    /// left something, the uid is quarantined in the transaction that removes the record.
    pub(crate) async fn remove_record(&self, id: &str, uid: Option<u32>) -> WsResult<()> {
        let quarantine = match (uid, self.uid_sweep.as_ref()) {
            (Some(uid), Some(roots)) => {
                let when = format!("at the release of `{id}`");
                let out = sweep_uids(HashSet::from([uid]), roots).await;
                log_unsearched(&out, &when);
                let r = out.report(uid);
                log(uid, &r, &when);
                (!r.is_clean()).then(|| {
                    let why = r.first_error.unwrap_or_default();
                    let reason =
                        format!("{} thing(s) left at the release of `{id}`: {why}", r.errors);
                    (uid, reason)
                })
            }
            _ => None,
        };
        self.store.tx(|tx| {
            store::delete_ws(tx, id)?;
            match &quarantine {
                Some((uid, why)) => store::quarantine_in(tx, *uid, why),
                None => Ok(()),
            }
        })
    }

    /// At start, before the API answers: sweeps every uid of the range that no workspace
    /// holds, in one pass; quarantines those still unclean and releases quarantined ones
    /// found clean.
    pub(crate) async fn sweep_free_uids_on_start(&self) -> WsResult<()> {
        let Some(roots) = self.uid_sweep.as_ref() else {
            return Ok(());
        };
        let held: HashSet<u32> = self.store.list()?.into_iter().map(|w| w.uid).collect();
        let end = self.cfg.uid_base.saturating_add(self.cfg.uid_count);
        let free: HashSet<u32> = (self.cfg.uid_base..end)
            .filter(|u| *u != 0 && !held.contains(u))
            .collect();
        let quarantined = self.store.quarantined()?;
        let out = sweep_uids(free.clone(), roots).await;
        log_unsearched(&out, "at start");
        let mut dirty: BTreeMap<u32, String> = BTreeMap::new();
        for uid in out.touched() {
            let r = out.report(uid);
            log(uid, &r, "at start");
            if let (false, Some(why)) = (r.is_clean(), r.first_error) {
                dirty.insert(uid, format!("{} thing(s) left at start: {why}", r.errors));
            }
        }
        if let Some(first) = out.shared.first() {
            warn!(sweep.error = %first, uids = free.len(), "the uid sweep at start was incomplete; every free uid is quarantined");
            for &uid in &free {
                dirty
                    .entry(uid)
                    .or_insert_with(|| format!("the uid sweep at start was incomplete: {first}"));
            }
        }
        let released: Vec<_> = quarantined
            .into_iter()
            .filter(|q| free.contains(&q.uid) && !dirty.contains_key(&q.uid))
            .collect();
        self.store.tx(|tx| {
            for (uid, why) in &dirty {
                store::quarantine_in(tx, *uid, why)?;
            }
            for q in &released {
                store::release_in(tx, q.uid)?;
            }
            Ok(())
        })?;
        for q in &released {
            info!(workspace.uid = q.uid, quarantine.reason = %q.reason, "quarantined uid clean again; released");
        }
        Ok(())
    }
}
