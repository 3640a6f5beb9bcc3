package main

import (
	"os"
	"strconv"
	"strings"
	"time"
)

// userHZ is the unit of the CPU times in /proc/PID/stat: 100 per second on
// every mainstream Linux (USER_HZ).
const userHZ = 100

// cpuTime returns the CPU time (user and system, all threads) that process
// pid has used so far, read from /proc. ok is false where there is no /proc
// or the process is gone. Its resolution is 10 ms: over a phase of seconds
// at thousands of requests per second that is well under 1%.
//
// CPU per request is a figure a busy machine disturbs far less than
// throughput: other processes take CPU away, but do not make a request cost
// more of it (caches aside).
func cpuTime(pid int) (d time.Duration, ok bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// The command name (field 2) is in parentheses and may hold spaces;
	// fields are counted after its closing one: state is field 3, utime 14,
	// stime 15.
	i := strings.LastIndexByte(string(data), ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 13 {
		return 0, false
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(utime+stime) * time.Second / userHZ, true
}

// cpuMeter measures the CPU that the server process and leafbench itself
// use during a phase.
type cpuMeter struct {
	server             int // pid, 0 when leafbench did not start the server
	server0, client0   time.Duration
	serverOK, clientOK bool
}

// startCPU takes the first reading; server is the server's pid or 0.
func startCPU(server int) *cpuMeter {
	m := &cpuMeter{server: server}
	if server != 0 {
		m.server0, m.serverOK = cpuTime(server)
	}
	m.client0, m.clientOK = cpuTime(os.Getpid())
	return m
}

// stop takes the second reading and stores the CPU used in between in p.
func (m *cpuMeter) stop(p *phase) {
	if m.serverOK {
		if d, ok := cpuTime(m.server); ok {
			p.ServerCPU, p.HasServerCPU = d-m.server0, true
		}
	}
	if m.clientOK {
		if d, ok := cpuTime(os.Getpid()); ok {
			p.ClientCPU, p.HasClientCPU = d-m.client0, true
		}
	}
}
