package rpc

import (
	"fmt"
	"net"
	"time"

	"golang.org/x/net/netutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	encproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
)

// Limits bound what clients can make the server hold (docs/contract.md
// section 4, "gRPC"; docs/grpc.md, "Limits"). A zero field means its
// default.
type Limits struct {
	// MaxConnections caps the connections served at once
	// (grpc.max_connections); past it, new connections wait in the
	// kernel's accept queue until one closes. 0 means no cap.
	MaxConnections int
	// MaxConcurrentStreams caps the RPCs open at once on one connection
	// (grpc.max_concurrent_streams), counted until the last byte of the
	// answer is sent: a client past it waits for one to end (gRPC clients
	// queue the call), or has its stream refused. 0 means
	// DefaultMaxConcurrentStreams.
	MaxConcurrentStreams int
	// IdleTimeout closes a connection with no RPC open for that long
	// (grpc.idle_timeout). 0 means DefaultIdleTimeout.
	IdleTimeout time.Duration
	// KeepaliveTime is how long a connection may send nothing before the
	// server pings it, and KeepaliveTimeout how long the ping may then go
	// unanswered before the connection is closed (grpc.keepalive_time,
	// grpc.keepalive_timeout): a client that stopped reading is cut. 0
	// means DefaultKeepaliveTime, DefaultKeepaliveTimeout.
	KeepaliveTime, KeepaliveTimeout time.Duration
}

// The defaults of Limits.
const (
	DefaultMaxConcurrentStreams = 100
	DefaultIdleTimeout          = 2 * time.Minute
	DefaultKeepaliveTime        = time.Minute
	DefaultKeepaliveTimeout     = 20 * time.Second
)

// The fixed limits.
const (
	// WatchesPerConnection caps the health Watch streams open at once on
	// one connection: a gRPC client with health checking opens one. With
	// the connection cap it bounds them in the process.
	WatchesPerConnection = 4
	// maxRequestBytes bounds a request message: leafd's are a tag of 128
	// characters at most and a number; reflection's name a symbol.
	maxRequestBytes = 16 << 10
	// maxHeaderBytes bounds a request's metadata, as HTTP's headers.
	maxHeaderBytes = 64 << 10
	// windowBytes is the HTTP/2 flow-control window the server grants for
	// request data, per stream and per connection: set, it is not grown
	// (by the BDP estimate, up to 16 MiB), so that a connection's
	// unread request data stays within 64 KiB.
	windowBytes = 64 << 10
	// minAnswerLimit is the least MaxSendMsgSize, for reflection's answers
	// (the descriptors of leafd.proto and its imports, some KiB).
	minAnswerLimit = 256 << 10
	// handshakeTimeout bounds the HTTP/2 preface and settings of a new
	// connection: one that sends nothing is closed after it.
	handshakeTimeout = 10 * time.Second
	// minPingInterval is how often a client may ping; a client pinging
	// more often is closed (GOAWAY too_many_pings), as gRPC servers do.
	// Go clients refuse to ping more often than every 10 s.
	minPingInterval = 5 * time.Second
)

// MaxAnswerBytes is the size of the largest answer of a batch of maxBatch
// IDs: a packed repeated int64 of 9 bytes an ID at most (IDs below 2^63),
// its tag and length. The snowflake IDs of today are 9 bytes each,
// segment IDs fewer.
func MaxAnswerBytes(maxBatch int) int { return 9*maxBatch + 16 }

// answerPool is the pool of the buffers answers are encoded into. gRPC's
// default pool has no size between 32 KiB and 1 MiB: a batch of 10,000 IDs
// (90 KB) would take, and an answer the client does not read would hold
// until it leaves, a 1 MiB buffer, zeroed. With these sizes a buffer is at
// most twice its answer.
var answerPool = mem.NewTieredBufferPool(256, 4<<10, 16<<10, 32<<10, 64<<10, 128<<10, 256<<10, 512<<10, 1<<20,
	2<<20, 4<<20, 8<<20)

// codec is gRPC's proto codec, but for the pool answers are encoded into.
type codec struct{}

var protoCodec = encoding.GetCodecV2(encproto.Name)

func (codec) Name() string { return encproto.Name }

// Marshal encodes v as gRPC's codec does, into a buffer of answerPool.
func (codec) Marshal(v any) (mem.BufferSlice, error) {
	m, ok := v.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("proto: cannot marshal %T, not a proto.Message", v)
	}
	size := proto.Size(m)
	opts := proto.MarshalOptions{UseCachedSize: true} // the size just computed
	if mem.IsBelowBufferPoolingThreshold(size) {
		b, err := opts.Marshal(m)
		return mem.BufferSlice{mem.SliceBuffer(b)}, err
	}
	buf := answerPool.Get(size)
	if _, err := opts.MarshalAppend((*buf)[:0], m); err != nil {
		answerPool.Put(buf)
		return nil, err
	}
	return mem.BufferSlice{mem.NewBuffer(buf, answerPool)}, nil
}

// Unmarshal decodes as gRPC's codec does.
func (codec) Unmarshal(data mem.BufferSlice, v any) error { return protoCodec.Unmarshal(data, v) }

// serverOptions are the gRPC server's options for l and answers of at most
// maxAnswer bytes.
func (l Limits) serverOptions(maxAnswer int) []grpc.ServerOption {
	streams := l.MaxConcurrentStreams
	if streams <= 0 {
		streams = DefaultMaxConcurrentStreams
	}
	kp := keepalive.ServerParameters{
		MaxConnectionIdle: orDefault(l.IdleTimeout, DefaultIdleTimeout),
		Time:              orDefault(l.KeepaliveTime, DefaultKeepaliveTime),
		Timeout:           orDefault(l.KeepaliveTimeout, DefaultKeepaliveTimeout),
	}
	return []grpc.ServerOption{
		grpc.MaxConcurrentStreams(uint32(streams)),
		grpc.KeepaliveParams(kp),
		// Clients may ping while no RPC is open: the idle timeout closes
		// such a connection anyway.
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: minPingInterval, PermitWithoutStream: true}),
		grpc.MaxRecvMsgSize(maxRequestBytes),
		grpc.MaxSendMsgSize(max(maxAnswer, minAnswerLimit)),
		grpc.MaxHeaderListSize(maxHeaderBytes),
		grpc.InitialWindowSize(windowBytes),
		grpc.InitialConnWindowSize(windowBytes),
		grpc.ConnectionTimeout(handshakeTimeout),
		grpc.ForceServerCodecV2(codec{}),
	}
}

// listener returns ln capped at MaxConnections connections at a time.
func (l Limits) listener(ln net.Listener) net.Listener {
	if l.MaxConnections <= 0 {
		return ln
	}
	return netutil.LimitListener(ln, l.MaxConnections)
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}
