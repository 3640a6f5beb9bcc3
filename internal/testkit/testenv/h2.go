package testenv

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"net"
	"sync"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/protobuf/proto"
)

// H2 is a raw HTTP/2 connection to a gRPC server that opens calls and never
// reads their answers, as a hostile client does: its streams grant the
// server no flow-control window (SETTINGS_INITIAL_WINDOW_SIZE 0), so that
// no answer can be sent. It is for the tests of a server's limits.
type H2 struct {
	conn net.Conn
	mu   sync.Mutex // over the writes: Call's and the ping answers of Serve
	bw   *bufio.Writer
	fr   *http2.Framer
	hbuf bytes.Buffer
	enc  *hpack.Encoder
	next uint32 // the next stream id
}

// DialH2 connects to addr with d and sends the HTTP/2 preface and
// settings.
func DialH2(d *net.Dialer, addr string) (*H2, error) {
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	h := &H2{conn: c, bw: bufio.NewWriterSize(c, 64<<10), next: 1}
	h.fr = http2.NewFramer(h.bw, c)
	h.enc = hpack.NewEncoder(&h.hbuf)
	if _, err := h.bw.WriteString(http2.ClientPreface); err != nil {
		c.Close()
		return nil, err
	}
	if err := h.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0}); err != nil {
		c.Close()
		return nil, err
	}
	return h, h.Flush()
}

// Call opens a stream calling method ("/leafd.v1.IDService/NextSnowflake")
// with the request msg, buffered until Flush.
func (h *H2) Call(method string, msg proto.Message) error {
	body, err := proto.Marshal(msg)
	if err != nil {
		return err
	}
	data := make([]byte, 5+len(body)) // gRPC's frame: not compressed, the length, the message
	binary.BigEndian.PutUint32(data[1:], uint32(len(body)))
	copy(data[5:], body)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.hbuf.Reset()
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", method}, {":authority", "leafd"},
		{"content-type", "application/grpc"}, {"te", "trailers"}} {
		if err := h.enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]}); err != nil {
			return err
		}
	}
	id := h.next
	h.next += 2
	if err := h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: h.hbuf.Bytes(), EndHeaders: true}); err != nil {
		return err
	}
	return h.fr.WriteData(id, true, data)
}

// Flush sends the calls buffered.
func (h *H2) Flush() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.bw.Flush()
}

// Serve reads what the server sends, answering its pings (so that its
// keepalive finds the connection alive) and dropping the rest, until the
// connection fails. It never grants a window.
func (h *H2) Serve() error {
	for {
		f, err := h.fr.ReadFrame()
		if err != nil {
			return err
		}
		if p, ok := f.(*http2.PingFrame); ok && !p.IsAck() {
			h.mu.Lock()
			err = h.fr.WritePing(true, p.Data)
			if err == nil {
				err = h.bw.Flush()
			}
			h.mu.Unlock()
			if err != nil {
				return err
			}
		}
	}
}

// Conn is the connection.
func (h *H2) Conn() net.Conn { return h.conn }

// Close closes the connection.
func (h *H2) Close() error { return h.conn.Close() }
