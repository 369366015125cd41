//! Starting Studio detached, and knowing it again later by its process id plus the start
//! time the operating system records for it (sysinfo reads it from `/proc`, `proc_pidinfo`
//! or `GetProcessTimes`). An id alone can be reused by another program once ours has
//! exited; the pair cannot, so nothing that is not the Studio we started is ever signalled.

use std::ffi::OsString;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use sysinfo::{Pid, ProcessRefreshKind, ProcessStatus, ProcessesToUpdate, System};

/// One process, as the OS knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Identity {
    pub pid: u32,
    /// When it started, in seconds since the Unix epoch, as the OS says.
    pub started: u64,
}

/// What became of a process we started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Liveness {
    Running,
    /// It exited (a zombie not yet reaped counts as exited).
    Exited,
}

fn system() -> Option<System> {
    System::new().ok()
}

fn refreshed(system: &mut System, pids: ProcessesToUpdate<'_>) {
    system.refresh_processes_specifics(pids, true, ProcessRefreshKind::nothing());
}

/// The identity of the running process `pid`, if there is one.
pub fn identity_of(pid: u32) -> Option<Identity> {
    let mut system = system()?;
    let id = Pid::from_u32(pid);
    refreshed(&mut system, ProcessesToUpdate::Some(&[id]));
    let process = system.process(id)?;
    if process.status() == ProcessStatus::Zombie {
        return None;
    }
    Some(Identity {
        pid,
        started: process.start_time(),
    })
}

/// Whether the process `identity` names still runs: the same id with the same start time.
pub fn liveness(identity: &Identity) -> Liveness {
    match identity_of(identity.pid) {
        Some(now) if now.started == identity.started => Liveness::Running,
        _ => Liveness::Exited,
    }
}

/// Starts `exe` with `args`, detached from this process: its own process group (a Ctrl-C
/// at the caller's terminal is not Studio's), no console window on Windows, stdin closed,
/// and its stdout and stderr ("Studio pipes verbose logs to stdout") into `log`, never
/// into this process's stdout, which may be MCP's channel.
pub fn spawn_detached(exe: &Path, args: &[OsString], log: &Path) -> std::io::Result<Child> {
    let file = std::fs::File::create(log)?;
    let mut command = Command::new(exe);
    command
        .args(args)
        .stdin(Stdio::null())
        .stdout(file.try_clone()?)
        .stderr(file);
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt as _;
        command.process_group(0);
    }
    #[cfg(windows)]
    {
        use std::os::windows::process::CommandExt as _;
        const CREATE_NEW_PROCESS_GROUP: u32 = 0x0000_0200;
        const DETACHED_PROCESS: u32 = 0x0000_0008;
        command.creation_flags(CREATE_NEW_PROCESS_GROUP | DETACHED_PROCESS);
    }
    command.spawn()
}

/// Reaps `child` whenever it exits, so that a long-lived host leaves no zombie behind
/// (a zombie would still hold its id). Dropping a `Child` neither waits nor kills.
pub fn reap_in_background(mut child: Child) {
    std::thread::Builder::new()
        .name("studio-reaper".into())
        .spawn(move || {
            let _ = child.wait();
        })
        .ok();
}

/// `root` and every process descended from it, each with its identity, parents first.
/// Only processes started no earlier than `root` count (a child cannot predate its
/// parent), so an id reused by an older program's child is never taken in.
fn tree(root: &Identity) -> Vec<Identity> {
    let Some(mut system) = system() else {
        return Vec::new();
    };
    refreshed(&mut system, ProcessesToUpdate::All);
    let running = |pid: Pid| {
        system
            .process(pid)
            .filter(|p| p.status() != ProcessStatus::Zombie)
            .map(|p| p.start_time())
    };
    if running(Pid::from_u32(root.pid)) != Some(root.started) {
        return Vec::new();
    }
    let mut found = vec![*root];
    let mut next = 0;
    while next < found.len() {
        let parent = Pid::from_u32(found[next].pid);
        for (pid, process) in system.processes() {
            if process.parent() == Some(parent)
                && process.status() != ProcessStatus::Zombie
                && process.start_time() >= root.started
                && !found.iter().any(|f| f.pid == pid.as_u32())
            {
                found.push(Identity {
                    pid: pid.as_u32(),
                    started: process.start_time(),
                });
            }
        }
        next += 1;
    }
    found
}

/// Asks the Studio of `root` to quit as a person closing it would: SIGTERM to its process
/// tree on Unix; `taskkill /PID <pid> /T` (without `/F`: a close request to its windows)
/// on Windows. Returns whether it was still running.
pub fn ask_to_quit(root: &Identity) -> bool {
    let processes = tree(root);
    if processes.is_empty() {
        return false;
    }
    #[cfg(unix)]
    for process in &processes {
        signal(process, libc::SIGTERM);
    }
    #[cfg(windows)]
    {
        let _ = taskkill(root.pid, false);
    }
    true
}

/// Ends the process tree of `root` at once: SIGKILL on Unix, `taskkill /PID <pid> /T /F`
/// on Windows, then whatever of the tree is left, one by one.
pub fn end_tree(root: &Identity) {
    let processes = tree(root);
    #[cfg(windows)]
    {
        let _ = taskkill(root.pid, true);
    }
    for process in processes {
        if liveness(&process) == Liveness::Running {
            #[cfg(unix)]
            signal(&process, libc::SIGKILL);
            #[cfg(not(unix))]
            if let Some(mut system) = system() {
                let pid = Pid::from_u32(process.pid);
                refreshed(&mut system, ProcessesToUpdate::Some(&[pid]));
                if let Some(p) = system.process(pid) {
                    p.kill();
                }
            }
        }
    }
}

/// Sends `signal` to `process`, if the id still names it.
#[cfg(unix)]
fn signal(process: &Identity, signal: i32) {
    if liveness(process) != Liveness::Running {
        return;
    }
    let Ok(pid) = i32::try_from(process.pid) else { return };
    // SAFETY: kill(2) with a positive pid we just checked names the process we started;
    // it touches no memory of ours.
    unsafe {
        libc::kill(pid, signal);
    }
}

#[cfg(windows)]
fn taskkill(pid: u32, force: bool) -> std::io::Result<std::process::ExitStatus> {
    use std::os::windows::process::CommandExt as _;
    const CREATE_NO_WINDOW: u32 = 0x0800_0000;
    let mut command = Command::new("taskkill.exe");
    command.arg("/PID").arg(pid.to_string()).arg("/T");
    if force {
        command.arg("/F");
    }
    command
        .creation_flags(CREATE_NO_WINDOW)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
}

/// Waits up to `within` for `identity` to exit; returns whether it did.
pub async fn exited_within(identity: &Identity, within: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if liveness(identity) == Liveness::Exited {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn a_process_is_known_by_its_id_and_start_time() {
        let mut child = Command::new("sleep").arg("30").spawn().unwrap();
        let identity = identity_of(child.id()).expect("the child runs");
        assert_eq!(liveness(&identity), Liveness::Running);
        // The same id with another start time is not this process.
        let other = Identity {
            pid: identity.pid,
            started: identity.started.saturating_sub(3600),
        };
        assert_eq!(liveness(&other), Liveness::Exited);
        assert_eq!(tree(&other), Vec::new(), "a stale identity reaches no process");
        assert!(ask_to_quit(&identity));
        child.wait().unwrap();
        assert_eq!(liveness(&identity), Liveness::Exited);
        assert!(!ask_to_quit(&identity), "an exited process is not signalled");
    }

    #[test]
    fn the_tree_holds_the_children_and_ends_with_them() {
        // sh starts a sleep as its child and waits for it.
        let mut child = Command::new("sh").args(["-c", "sleep 30 & wait"]).spawn().unwrap();
        let root = identity_of(child.id()).unwrap();
        let mut processes = tree(&root);
        for _ in 0..50 {
            if processes.len() >= 2 {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
            processes = tree(&root);
        }
        assert_eq!(processes.len(), 2, "sh and its sleep: {processes:?}");
        end_tree(&root);
        child.wait().unwrap();
        for process in processes {
            // SIGKILL is delivered asynchronously: wait for the outcome, not a time.
            let mut tries = 0;
            while liveness(&process) == Liveness::Running && tries < 200 {
                std::thread::sleep(Duration::from_millis(10));
                tries += 1;
            }
            assert_eq!(liveness(&process), Liveness::Exited, "{process:?}");
        }
    }
}
