package testenv

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// FreePorts returns k distinct ports on 127.0.0.1 that nothing listens on,
// for a server that must be told its port (a database, a proxy) rather
// than report the one the kernel picked, as leafd does (see Env). They are
// taken from below the kernel's ephemeral range: a server restarted later
// must find its port still free, and the ephemeral ports are taken and
// released all the time by outgoing connections.
//
// Errors: no k free ports were found.
func FreePorts(k int) ([]int, error) {
	lo, hi := 20000, ephemeralStart()
	if hi-lo < 100*k {
		lo = 1024
	}
	seen := map[int]bool{}
	var ports []int
	for tries := 0; len(ports) < k; tries++ {
		if tries > 100*k+1000 {
			return nil, fmt.Errorf("no %d free ports in [%d, %d) on 127.0.0.1", k, lo, hi)
		}
		p := lo + rand.IntN(hi-lo)
		if seen[p] {
			continue
		}
		seen[p] = true
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue
		}
		ln.Close()
		ports = append(ports, p)
	}
	return ports, nil
}

// ephemeralStart is the first port of the kernel's ephemeral range.
func ephemeralStart() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if p, err := strconv.Atoi(f[0]); err == nil && p > 1024 {
				return p
			}
		}
	}
	return 32768
}

// LogTail returns the last lines of the log file at path (a LogFile, or a
// server's own error log): what a failed test shows.
func LogTail(path string, lines int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}
