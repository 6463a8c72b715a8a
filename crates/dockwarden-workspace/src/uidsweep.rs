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

use crate::error::WsResult;
use crate::runtime::procs;
use crate::service::Service;
use crate::store::{self, Quarantined};

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

/// What a sweep decides: the uids to quarantine (with why) and the quarantined ones found
/// clean, to release.
struct Verdict {
    dirty: BTreeMap<u32, String>,
    released: Vec<Quarantined>,
}

impl Verdict {
    /// Judges the sweep of `swept`, logging each uid something was found for (and `uid`,
    /// the one being released, in any case).
    fn of(
        out: &Sweep,
        swept: &HashSet<u32>,
        quarantined: Vec<Quarantined>,
        uid: Option<u32>,
        when: &str,
    ) -> Verdict {
        log_unsearched(out, when);
        let mut dirty = BTreeMap::new();
        let logged: std::collections::BTreeSet<u32> = out.touched().chain(uid).collect();
        for uid in logged {
            let r = out.report(uid);
            log(uid, &r, when);
            if let (false, Some(why)) = (r.is_clean(), r.first_error) {
                dirty.insert(uid, format!("{} thing(s) left {when}: {why}", r.errors));
            }
        }
        if let Some(first) = out.shared.first() {
            warn!(sweep.error = %first, uids = swept.len(), "the uid sweep {when} was incomplete; every uid swept is quarantined");
            for &uid in swept {
                dirty
                    .entry(uid)
                    .or_insert_with(|| format!("the uid sweep {when} was incomplete: {first}"));
            }
        }
        let released = quarantined
            .into_iter()
            .filter(|q| swept.contains(&q.uid) && !dirty.contains_key(&q.uid))
            .collect();
        Verdict { dirty, released }
    }

    fn record(&self, tx: &rusqlite::Transaction<'_>) -> WsResult<()> {
        for (uid, why) in &self.dirty {
            store::quarantine_in(tx, *uid, why)?;
        }
        for q in &self.released {
            store::release_in(tx, q.uid)?;
        }
        Ok(())
    }

    fn log_released(&self) {
        for q in &self.released {
            info!(workspace.uid = q.uid, quarantine.reason = %q.reason, "quarantined uid clean again; released");
        }
    }
}

impl Service {
    /// Removes the record of `id` (deleted, or its create failed) once its `uid` is swept.
    /// The record holds the uid while it is swept, so no create can take it; when the sweep
    /// left something, the uid is quarantined in the transaction that removes the record.
    /// The same pass sweeps the quarantined uids again and releases those now clean, so a
    /// quarantine does not wait for the next start.
    pub(crate) async fn remove_record(&self, id: &str, uid: Option<u32>) -> WsResult<()> {
        let verdict = match (uid, self.uid_sweep.as_ref()) {
            (Some(uid), Some(roots)) => {
                let quarantined = self.store.quarantined()?;
                let mut swept: HashSet<u32> = quarantined.iter().map(|q| q.uid).collect();
                swept.insert(uid);
                let out = sweep_uids(swept.clone(), roots).await;
                let when = format!("at the release of `{id}`");
                Some(Verdict::of(&out, &swept, quarantined, Some(uid), &when))
            }
            _ => None,
        };
        self.store.tx(|tx| {
            store::delete_ws(tx, id)?;
            verdict.as_ref().map_or(Ok(()), |v| v.record(tx))
        })?;
        if let Some(v) = &verdict {
            v.log_released();
        }
        Ok(())
    }

    /// At start, before the API answers: sweeps every uid of the range that no workspace
    /// holds, in one pass (what a crash during a delete or a create left); quarantines those
    /// still unclean and releases quarantined ones found clean.
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
        let verdict = Verdict::of(&out, &free, quarantined, None, "at start");
        self.store.tx(|tx| verdict.record(tx))?;
        verdict.log_released();
        Ok(())
    }
}
