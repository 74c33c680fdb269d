package relay

import "syscall"

// NoDump makes this process undumpable. The runner and the toolbox hold
// the member's bearer in memory, and the agent runs as the same user:
// without it, the agent's shell could read their environment and memory
// (/proc/<pid>/environ, /proc/<pid>/mem) or ptrace them. An undumpable
// process's /proc files are the kernel's, and only a process with
// CAP_SYS_PTRACE may trace it. A process the caller starts afterwards is
// dumpable again (execve resets it), so the agent itself is unaffected.
func NoDump() error {
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_DUMPABLE, 0, 0); errno != 0 {
		return errno
	}
	return nil
}
