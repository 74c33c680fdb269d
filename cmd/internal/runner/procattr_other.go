//go:build !linux

package runner

import "syscall"

// agentProcAttr starts the agent in its own process group. Only Linux can
// have the kernel kill it with the runner.
func agentProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
