//! The IPC half of a uid sweep: the swept uids' SysV shared memory segments, message queues
//! and semaphore sets, listed in `/proc/sysvipc` (the service's IPC namespace, where workspace
//! commands run) and removed with `IPC_RMID`.

use super::Sweep;

/// One kind of SysV IPC object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Shm,
    Msg,
    Sem,
}

impl Kind {
    const ALL: [Kind; 3] = [Kind::Shm, Kind::Msg, Kind::Sem];

    fn file(self) -> &'static str {
        match self {
            Kind::Shm => "/proc/sysvipc/shm",
            Kind::Msg => "/proc/sysvipc/msg",
            Kind::Sem => "/proc/sysvipc/sem",
        }
    }

    fn id_column(self) -> &'static str {
        match self {
            Kind::Shm => "shmid",
            Kind::Msg => "msqid",
            Kind::Sem => "semid",
        }
    }

    fn noun(self) -> &'static str {
        match self {
            Kind::Shm => "shared memory segment",
            Kind::Msg => "message queue",
            Kind::Sem => "semaphore set",
        }
    }
}

/// One object as `/proc/sysvipc` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Object {
    pub id: i32,
    pub uid: u32,
    pub cuid: u32,
}

/// Parses one `/proc/sysvipc` table by its header's column names.
pub(super) fn parse(kind: Kind, text: &str) -> Vec<Object> {
    let mut lines = text.lines();
    let Some(header) = lines.next() else {
        return Vec::new();
    };
    let cols: Vec<&str> = header.split_whitespace().collect();
    let at = |name: &str| cols.iter().position(|c| *c == name);
    let (Some(id), Some(uid), Some(cuid)) = (at(kind.id_column()), at("uid"), at("cuid")) else {
        return Vec::new();
    };
    lines
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            Some(Object {
                id: f.get(id)?.parse().ok()?,
                uid: f.get(uid)?.parse().ok()?,
                cuid: f.get(cuid)?.parse().ok()?,
            })
        })
        .collect()
}

/// The objects of one kind; none where the kernel has no SysV IPC.
pub(super) fn list(kind: Kind) -> Result<Vec<Object>, String> {
    match std::fs::read_to_string(kind.file()) {
        Ok(text) => Ok(parse(kind, &text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(format!("reading `{}`: {e}", kind.file())),
    }
}

/// Removes every object a swept uid owns or created. The kernel checks permissions
/// against both, so either makes the object the uid's.
pub(super) fn sweep(is_ours: &dyn Fn(u32) -> bool, out: &mut Sweep) {
    let owner = |o: &Object| [o.uid, o.cuid].into_iter().find(|&u| u != 0 && is_ours(u));
    for kind in Kind::ALL {
        let objects = match list(kind) {
            Ok(o) => o,
            Err(e) => {
                out.shared(e);
                continue;
            }
        };
        for o in &objects {
            let Some(uid) = owner(o) else { continue };
            match remove(kind, o.id) {
                Ok(()) => out.of(uid).ipc += 1,
                // Removed since the listing.
                Err(e) if matches!(e.raw_os_error(), Some(libc::EINVAL | libc::EIDRM)) => {}
                Err(e) => out.error(uid, format!("removing {} {}: {e}", kind.noun(), o.id)),
            }
        }
    }
    // A segment still attached (by a process of another uid) outlives IPC_RMID, and Linux
    // lets its owner attach it again by id: it is not gone yet.
    if let Ok(left) = list(Kind::Shm) {
        for o in &left {
            if let Some(uid) = owner(o) {
                out.error(
                    uid,
                    format!("shared memory segment {} is still attached", o.id),
                );
            }
        }
    }
}

/// `IPC_RMID` on one object.
#[expect(
    unsafe_code,
    reason = "shmctl, msgctl and semctl have no wrapper in nix or rustix"
)]
fn remove(kind: Kind, id: i32) -> std::io::Result<()> {
    // SAFETY: IPC_RMID reads and writes no buffer: shmctl and msgctl get a null pointer, which
    // the kernel does not touch for this command, and semctl's optional fourth argument is not
    // passed (IPC_RMID does not read it). The id is a plain integer the kernel validates.
    let rc = unsafe {
        match kind {
            Kind::Shm => libc::shmctl(id, libc::IPC_RMID, std::ptr::null_mut()),
            Kind::Msg => libc::msgctl(id, libc::IPC_RMID, std::ptr::null_mut()),
            Kind::Sem => libc::semctl(id, 0, libc::IPC_RMID),
        }
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}
