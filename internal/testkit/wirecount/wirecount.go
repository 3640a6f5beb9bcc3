// Package wirecount is a TCP proxy between a client and a database server
// that counts the commands the client sends, read off the engine's wire
// protocol: how many statements a server ran is counted on the wire,
// whatever else uses the same database server. Tests ask for it by the
// engine's store.driver name, and run on the engines of Drivers.
package wirecount

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leafd/leafd/internal/testkit/testenv"
)

// protocol is what the proxy knows of one engine's wire protocol.
type protocol struct {
	// forward copies the client's side of one connection to the server,
	// calling count with the name of every command it begins.
	forward func(server io.Writer, client io.Reader, count func(cmd string))
	// statements are the commands that run a statement.
	statements []string
}

// protocols are the engines whose wire protocol the proxy reads, by
// store.driver name.
var protocols = map[string]protocol{
	"mysql": {forward: forwardMySQL, statements: []string{"QUERY", "STMT_EXECUTE"}},
}

// Drivers returns the engines, by store.driver name and sorted, whose
// commands the proxy counts.
func Drivers() []string {
	var names []string
	for name := range protocols {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// Proxy forwards TCP connections to a database server and counts the
// commands clients send.
type Proxy struct {
	target string
	proto  protocol
	ln     net.Listener

	mu    sync.Mutex
	cmds  Counts
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// Counts counts commands by their name in the engine's protocol.
type Counts map[string]int

// New starts a proxy to the database server at target, of engine driver,
// one of Drivers; it is closed when the test ends.
func New(t *testing.T, driver, target string) *Proxy {
	t.Helper()
	proto, ok := protocols[driver]
	if !ok {
		t.Fatalf("wirecount does not read the wire protocol of engine %q (it reads %v)", driver, Drivers())
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{target: target, proto: proto, ln: ln, cmds: Counts{}, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// Addr is the address the proxy listens on.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Counts returns a copy of the counts so far.
func (p *Proxy) Counts() Counts {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := make(Counts, len(p.cmds))
	for k, v := range p.cmds {
		c[k] = v
	}
	return c
}

// Statements counts the statements run in c: plain queries and
// executions of prepared ones (their preparation and closing are not
// counted).
func (p *Proxy) Statements(c Counts) int {
	n := 0
	for _, cmd := range p.proto.statements {
		n += c[cmd]
	}
	return n
}

// Minus returns what c counted beyond old, as text for a log: "none" when
// nothing.
func (c Counts) Minus(old Counts) string {
	var parts []string
	for cmd, n := range c {
		if d := n - old[cmd]; d > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", cmd, d))
		}
	}
	sort.Strings(parts)
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// WaitQuiet waits until no command has been sent for quiet, or fails the
// test after at most.
func (p *Proxy) WaitQuiet(t *testing.T, quiet, at time.Duration) {
	t.Helper()
	first := p.Counts()
	last, since := first, time.Now()
	if err := testenv.Eventually(t.Context(), at, 50*time.Millisecond, func() error {
		if now := p.Counts(); now.Minus(last) != "none" {
			last, since = now, time.Now()
		}
		if time.Since(since) < quiet {
			return errors.New("the client is still querying the database")
		}
		return nil
	}); err != nil {
		t.Fatalf("%v (commands sent meanwhile: %s)", err, p.Counts().Minus(first))
	}
}

func (p *Proxy) close() {
	p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *Proxy) track(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.conns[c] = struct{}{}
}

func (p *Proxy) count(cmd string) {
	p.mu.Lock()
	p.cmds[cmd]++
	p.mu.Unlock()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			client.Close()
			continue
		}
		p.track(client)
		p.track(server)
		p.wg.Add(2)
		go func() { // server to client, as is
			defer p.wg.Done()
			_, _ = io.Copy(client, server)
			client.Close()
		}()
		go func() { // client to server, packet by packet
			defer p.wg.Done()
			p.proto.forward(server, client, p.count)
			server.Close()
		}()
	}
}

// mysqlCommands name MySQL's commands by their byte.
var mysqlCommands = map[byte]string{0x01: "QUIT", 0x02: "INIT_DB", 0x03: "QUERY", 0x0e: "PING",
	0x16: "STMT_PREPARE", 0x17: "STMT_EXECUTE", 0x19: "STMT_CLOSE", 0x1f: "RESET_CONNECTION"}

// forwardMySQL copies packets of MySQL's protocol from client to server,
// counting each command by its command byte: the first byte of every
// packet that begins a command (sequence number 0). The handshake
// response and any authentication exchange carry sequence numbers above
// 0. It understands the protocol without TLS or compression, which is what
// the driver speaks unless told otherwise.
func forwardMySQL(server io.Writer, client io.Reader, count func(string)) {
	r := bufio.NewReader(client)
	var head [4]byte
	for {
		if _, err := io.ReadFull(r, head[:]); err != nil {
			return
		}
		n := int(binary.LittleEndian.Uint32(append(head[:3:3], 0)))
		payload := make([]byte, n)
		if _, err := io.ReadFull(r, payload); err != nil {
			return
		}
		if head[3] == 0 && n > 0 {
			name := mysqlCommands[payload[0]]
			if name == "" {
				name = fmt.Sprintf("0x%02x", payload[0])
			}
			count(name)
		}
		if _, err := server.Write(append(head[:], payload...)); err != nil {
			return
		}
	}
}
