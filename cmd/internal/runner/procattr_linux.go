package runner

import "syscall"

// agentProcAttr starts the agent in its own process group, killed by the
// kernel if the runner dies: an agent outliving its runner goes on with a
// turn nobody will acknowledge (its reply would come twice, once more
// after the next start's redelivery) and holds on to nothing useful. The
// signal fires when the thread that started the agent ends, so startAgent
// keeps that thread for the agent's whole life.
func agentProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
