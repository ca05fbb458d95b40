//! Which process a worker is, so that its next incarnation under the same name (the same pod's
//! next container, `mostrador dev` started again) can tell that a previous one is surely gone and
//! take its runs back at once, rather than after its lease.
//!
//! A process is `<boot id>:<pid>:<start time>` (the kernel's boot id, and the process's start in
//! clock ticks since boot, `/proc/<pid>/stat`): on the same machine, since the same boot, a
//! process that no longer has that pid with that start time is gone. On another machine, or
//! after a reboot, nothing can be told: the lease decides, as before.

/// This process.
pub fn current() -> Option<String> {
    let pid = std::process::id();
    Some(format!("{}:{pid}:{}", boot_id()?, start_time(pid)?))
}

/// Whether the process `recorded` names (as [`current`] wrote it) is surely gone.
pub fn is_gone(recorded: &str) -> bool {
    let mut parts = recorded.split(':');
    let (Some(boot), Some(pid), Some(start)) = (parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    let Ok(pid) = pid.parse::<u32>() else {
        return false;
    };
    if boot_id().as_deref() != Some(boot) {
        return false;
    }
    // This process has that pid now (a container's next start is pid 1 again), or whoever has
    // it started at another time, or nobody has it.
    pid == std::process::id() || start_time(pid).as_deref() != Some(start)
}

fn boot_id() -> Option<String> {
    let id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    Some(id.trim().to_owned())
}

/// The process's start, in clock ticks after boot: the 22nd field of `/proc/<pid>/stat`, counted
/// after its name (which may hold spaces and parentheses).
fn start_time(pid: u32) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_name = &stat[stat.rfind(')')? + 1..];
    after_name.split_whitespace().nth(19).map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::{current, is_gone};

    #[test]
    fn a_process_that_is_there_is_not_gone_and_one_that_is_not_is() {
        let me = current().expect("Linux's /proc");
        // Recorded by another registration of this very process: its pid is this one's.
        assert!(is_gone(&me));
        let parent = std::os::unix::process::parent_id();
        let parent_start = super::start_time(parent).expect("the parent's start");
        let boot = me.split(':').next().expect("boot id");
        assert!(
            !is_gone(&format!("{boot}:{parent}:{parent_start}")),
            "alive"
        );
        assert!(
            is_gone(&format!("{boot}:{parent}:1")),
            "its pid, another start"
        );
        assert!(
            !is_gone(&format!("another-boot:{parent}:1")),
            "another machine: unknown"
        );
        assert!(!is_gone("garbage"));
    }
}
