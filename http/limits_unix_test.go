//go:build unix

package http_test

import (
	"net"
	"syscall"
)

// stingyDialer dials with a receive buffer of 4 KiB, set before the
// connection opens so that the window the server sees is small: a client
// that reads nothing then blocks the server's writes after a few answers,
// as one across the Internet would, instead of letting loopback buffers
// swallow megabytes.
var stingyDialer = &net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
	var err error
	if cerr := c.Control(func(fd uintptr) {
		err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
	}); cerr != nil {
		return cerr
	}
	return err
}}
