//! The Landlock step every confined process of a job takes on itself: the harness's child
//! between fork and exec (`kernelgate_eval::sandbox`), and the judge and its workers after they
//! start (`kernelgate_harness`). One owner, because the rule it adds is what keeps CUDA working
//! under the sandbox. Beside it, what a judge must not hold when it forks its workers
//! ([`fork_refusal`]).

/// Enforces the Landlock ruleset `fd` on this process after granting it read-write on its own
/// `/proc/<pid>`: the CUDA driver writes there during `cuInit` (without it: error 304, "OS call
/// failed", seen on the H200). Only the process knows its pid, so the rule is added by the
/// process itself, with plain system calls (safe between fork and exec). Call it while the
/// process has one thread: Landlock confines the calling thread and those it starts afterwards.
pub fn restrict_self_with_own_proc(fd: i32) -> std::io::Result<()> {
    #[repr(C, packed)]
    struct PathBeneathAttr {
        allowed_access: u64,
        parent_fd: i32,
    }
    const LANDLOCK_RULE_PATH_BENEATH: libc::c_int = 1;
    // WRITE_FILE | READ_FILE | READ_DIR, handled by every Landlock ABI, and TRUNCATE (ABI 3):
    // `fopen(.., "w")` opens with O_TRUNC.
    const OWN_PROC_ACCESS: u64 = (1 << 1) | (1 << 2) | (1 << 3);
    const TRUNCATE: u64 = 1 << 14;
    // SAFETY: plain system calls on a constant C string and a stack value.
    unsafe {
        let proc_fd = libc::open(
            c"/proc/self".as_ptr(),
            libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
        );
        if proc_fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let add = |access: u64| {
            let attr = PathBeneathAttr {
                allowed_access: access,
                parent_fd: proc_fd,
            };
            libc::syscall(
                libc::SYS_landlock_add_rule,
                fd,
                LANDLOCK_RULE_PATH_BENEATH,
                &attr as *const PathBeneathAttr,
                0,
            )
        };
        // A kernel before ABI 3 does not handle TRUNCATE, and rejects it in a rule (EINVAL).
        let mut added = add(OWN_PROC_ACCESS | TRUNCATE);
        if added != 0 {
            added = add(OWN_PROC_ACCESS);
        }
        libc::close(proc_fd);
        if added != 0 {
            return Err(std::io::Error::last_os_error());
        }
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        if libc::syscall(libc::SYS_landlock_restrict_self, fd, 0) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Why a process whose memory map is `maps` (the text of `/proc/<pid>/maps`) must not fork a
/// worker for candidate code, or `None` when it may:
/// - the CUDA driver is mapped: a fork after the driver started has no working CUDA in the child;
/// - a mapping is both writable and shared: the fork would share it with the candidate's
///   process, which could then write into the parent's memory.
pub fn fork_refusal(maps: &str) -> Option<String> {
    if maps.contains("libcuda.so") {
        return Some("the CUDA driver is loaded".to_string());
    }
    let writable_shared = |line: &&str| {
        let perms = line.split_whitespace().nth(1).unwrap_or("").as_bytes();
        perms.len() == 4 && perms[1] == b'w' && perms[3] == b's'
    };
    maps.lines()
        .find(writable_shared)
        .map(|line| format!("a writable shared mapping: {line}"))
}

#[cfg(test)]
mod tests {
    use super::fork_refusal;

    const LIBS: &str = "\
55d0c0a00000-55d0c0a21000 r--p 00000000 fe:00 1 /usr/bin/python3.11
7efeac626000-7efeac62d000 r--s 00000000 fe:00 325745 /usr/lib/x86_64-linux-gnu/gconv/gconv-modules.cache
7efeac700000-7efeac800000 rw-p 00000000 00:00 0
";

    #[test]
    fn private_and_read_only_shared_mappings_allow_a_fork() {
        assert_eq!(fork_refusal(LIBS), None);
        assert_eq!(fork_refusal(""), None);
    }

    #[test]
    fn a_writable_shared_mapping_or_the_cuda_driver_refuses_a_fork() {
        let shm =
            format!("{LIBS}7f0000000000-7f0000100000 rw-s 00000000 00:1a 77 /dev/shm/torch_1_2\n");
        let why = fork_refusal(&shm).expect("refused");
        assert!(why.contains("/dev/shm/torch_1_2"), "{why}");
        let cuda = format!("{LIBS}7f1000000000-7f1000100000 r-xp 00000000 fe:00 9 /usr/lib/x86_64-linux-gnu/libcuda.so.580.1\n");
        assert_eq!(
            fork_refusal(&cuda).as_deref(),
            Some("the CUDA driver is loaded")
        );
    }
}
