package testenv

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"syscall"
)

// setProcAttr applies c's DeathSignal, Group and User to cmd.
func setProcAttr(cmd *exec.Cmd, c Config) error {
	a := &syscall.SysProcAttr{Pdeathsig: c.DeathSignal, Setpgid: c.Group}
	if c.User != "" {
		uid, gid, err := UserIDs(c.User)
		if err != nil {
			return err
		}
		if uid >= 0 {
			// Set by exec rather than by the server itself: a process that
			// changes its own user loses its parent-death signal.
			a.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}
		}
	}
	cmd.SysProcAttr = a
	return nil
}

// UserIDs returns the user and group ids of the user name when this process
// runs as root, for a server that refuses root or must own its files; -1,
// -1 when it does not run as root, and the server runs as this process's
// user.
//
// Errors: root, and there is no such user.
func UserIDs(name string) (uid, gid int, err error) {
	if os.Geteuid() != 0 {
		return -1, -1, nil
	}
	u, err := user.Lookup(name)
	if err != nil {
		return -1, -1, fmt.Errorf("running as root, the server runs as user %s, which does not exist: %w", name, err)
	}
	uid, _ = strconv.Atoi(u.Uid)
	gid, _ = strconv.Atoi(u.Gid)
	return uid, gid, nil
}

// signal sends sig to cmd's process, or to its process group.
func signal(cmd *exec.Cmd, group bool, sig os.Signal) error {
	s, ok := sig.(syscall.Signal)
	if !group || !ok {
		return cmd.Process.Signal(sig)
	}
	if err := syscall.Kill(-cmd.Process.Pid, s); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}
