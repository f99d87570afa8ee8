//! The Landlock step every confined process of a job takes on itself: the harness's child
//! between fork and exec (`kernelgate_eval::sandbox`), and the judge and its workers after they
//! start (`kernelgate_harness`). One owner, because the rule it adds is what keeps CUDA working
//! under the sandbox.

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
