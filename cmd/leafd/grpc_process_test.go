package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"

	"github.com/leafd/leafd/internal/testkit/testenv"
	leafdv1 "github.com/leafd/leafd/proto/leafd/v1"
)

// grpcProcess is a running leafd with the gRPC API on.
type grpcProcess struct {
	*process
	grpcAddr string
	conn     *grpc.ClientConn
}

// grpcAddrOf recognises the log record "leafd gRPC serving" and returns its
// address.
func grpcAddrOf(line string) (string, bool) {
	var rec struct{ Msg, Addr string }
	if json.Unmarshal([]byte(line), &rec) != nil || rec.Msg != "leafd gRPC serving" || rec.Addr == "" {
		return "", false
	}
	return rec.Addr, true
}

// startGRPCLeafd starts leafd with the gRPC API on a free loopback port,
// reads that port from the log, as the HTTP one is read, and connects to
// it.
func startGRPCLeafd(t *testing.T, env ...string) *grpcProcess {
	t.Helper()
	return startGRPCBinary(t, leafdBin, env...)
}

// startGRPCBinary is startGRPCLeafd of the binary at path.
func startGRPCBinary(t *testing.T, path string, env ...string) *grpcProcess {
	t.Helper()
	var mu sync.Mutex
	var grpcAddr string
	// localhost:0 rather than 127.0.0.1:0: the configuration refuses a
	// grpc.addr equal to http.addr, which the test environment sets to
	// 127.0.0.1:0.
	env = append([]string{"LEAFD_GRPC_ADDR=localhost:0"}, env...)
	p := testenv.MustStart(t, testenv.Config{Path: path, Dir: t.TempDir(), Env: append(baseEnv(t), env...),
		Line: func(line string) {
			if addr, ok := grpcAddrOf(line); ok {
				mu.Lock()
				grpcAddr = addr
				mu.Unlock()
			}
		}}, 30*time.Second)
	// "leafd gRPC serving" comes before "leafd serving", for which MustStart
	// waited, and lines are passed on in order.
	mu.Lock()
	addr := grpcAddr
	mu.Unlock()
	if addr == "" {
		t.Fatalf("no \"leafd gRPC serving\" record before \"leafd serving\"\n%s", p.Output())
	}
	if host, _, _ := net.SplitHostPort(addr); !net.ParseIP(host).IsLoopback() {
		t.Fatalf("gRPC listens on %s, not on loopback", addr)
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &grpcProcess{process: &process{Process: p, addr: p.URL()}, grpcAddr: addr, conn: conn}
}

// The real binary with LEAFD_GRPC_ADDR: reflection lists the services, the
// health service says SERVING, segment and snowflake IDs taken over gRPC
// and HTTP at once are never the same, /metrics counts the RPCs, and
// SIGTERM stops it cleanly while a client watches its health.
func TestGRPCProcess(t *testing.T) {
	p := startGRPCLeafd(t, "LEAFD_SNOWFLAKE_ENABLED=true", "LEAFD_SEGMENT_SEED_TAGS=t:20 u:7", "LEAFD_SEGMENT_MAX_STEP=50")
	waitReady(t, p.process)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// Reflection.
	stream, err := reflectionpb.NewServerReflectionClient(p.conn).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	res, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var services []string
	for _, s := range res.GetListServicesResponse().GetService() {
		services = append(services, s.GetName())
	}
	for _, want := range []string{"leafd.v1.IDService", "grpc.health.v1.Health"} {
		if !strings.Contains(strings.Join(services, " "), want) {
			t.Fatalf("reflection lists %v, without %s", services, want)
		}
	}
	stream.CloseSend()

	// Health: SERVING once ready (checked every second).
	hc := healthpb.NewHealthClient(p.conn)
	if err := testenv.Eventually(ctx, 10*time.Second, 50*time.Millisecond, func() error {
		for _, svc := range []string{"", "leafd.v1.IDService"} {
			res, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
			if err != nil {
				return err
			}
			if res.GetStatus() != healthpb.HealthCheckResponse_SERVING {
				return fmt.Errorf("health of %q is %s", svc, res.GetStatus())
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	// IDs over both APIs at once.
	client := leafdv1.NewIDServiceClient(p.conn)
	httpClient := &http.Client{Timeout: 10 * time.Second}
	var mu sync.Mutex
	issued := map[string]map[int64]string{} // tag → ID → who
	record := func(tag, who string, ids ...int64) {
		mu.Lock()
		defer mu.Unlock()
		if issued[tag] == nil {
			issued[tag] = map[int64]string{}
		}
		for _, id := range ids {
			if id < 1 {
				t.Errorf("%s: ID %d of %s", who, id, tag)
			}
			if other, dup := issued[tag][id]; dup {
				t.Errorf("%s: ID %d of %s issued twice, to %s and %s", tag, id, tag, other, who)
			}
			issued[tag][id] = who
		}
	}
	const workers, requests = 3, 60
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() { // gRPC
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for i := range requests {
				tag := []string{"t", "u"}[rng.IntN(2)]
				who := fmt.Sprintf("grpc %d/%d", w, i)
				switch rng.IntN(4) {
				case 0:
					r, err := client.SegmentRange(ctx, &leafdv1.SegmentRangeRequest{Tag: tag, Size: int64(1 + rng.IntN(30))})
					if err != nil {
						t.Errorf("%s: SegmentRange: %v", who, err)
						return
					}
					for id := r.GetStart(); id < r.GetEnd(); id++ {
						record(tag, who, id)
					}
				case 1:
					res, err := client.NextSnowflake(ctx, &leafdv1.NextSnowflakeRequest{Count: int32(1 + rng.IntN(20))})
					if err != nil {
						t.Errorf("%s: NextSnowflake: %v", who, err)
						return
					}
					record("snowflake", who, res.GetIds()...)
				default:
					res, err := client.NextSegment(ctx, &leafdv1.NextSegmentRequest{Tag: tag, Count: int32(rng.IntN(25))})
					if err != nil {
						t.Errorf("%s: NextSegment: %v", who, err)
						return
					}
					record(tag, who, res.GetIds()...)
				}
			}
		})
		wg.Go(func() { // HTTP
			rng := rand.New(rand.NewPCG(uint64(w), 2))
			for i := range requests {
				tag := []string{"t", "u", "snowflake"}[rng.IntN(3)]
				url := fmt.Sprintf("%s/segment/%s?count=%d", p.addr, tag, 1+rng.IntN(25))
				if tag == "snowflake" {
					url = fmt.Sprintf("%s/snowflake?count=%d", p.addr, 1+rng.IntN(20))
				}
				res, err := httpClient.Get(url)
				if err != nil {
					t.Errorf("GET %s: %v", url, err)
					return
				}
				body, _ := io.ReadAll(res.Body)
				res.Body.Close()
				if res.StatusCode != http.StatusOK {
					t.Errorf("GET %s: %d %s", url, res.StatusCode, body)
					return
				}
				var ids []int64
				for _, f := range strings.Fields(string(body)) {
					id, err := strconv.ParseInt(f, 10, 64)
					if err != nil {
						t.Errorf("GET %s: %q", url, f)
						return
					}
					ids = append(ids, id)
				}
				record(tag, fmt.Sprintf("http %d/%d", w, i), ids...)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	for tag, ids := range issued {
		t.Logf("%s: %d IDs, none twice", tag, len(ids))
	}

	// Decode, as GET /snowflake/{id}.
	d, err := client.DecodeSnowflake(ctx, &leafdv1.DecodeSnowflakeRequest{Id: 1234567890123456789})
	if err != nil || d.GetTime() != "2020-03-02T19:54:56.824Z" || d.GetWorkerId() != 664 || d.GetSequence() != 277 {
		t.Fatalf("DecodeSnowflake: %v %v", d, err)
	}

	// The RPCs are in /metrics.
	code, body := get(t, httpClient, p.addr+"/metrics")
	if code != http.StatusOK || !strings.Contains(body, `leafd_grpc_requests_total{code="OK",method="leafd.v1.IDService/NextSegment"}`) {
		t.Fatalf("/metrics: %d, without the NextSegment RPCs", code)
	}

	// SIGTERM: a client watching the health sees NOT_SERVING, its stream
	// ends, and leafd exits 0.
	watch, err := hc.Watch(ctx, &healthpb.HealthCheckRequest{Service: "leafd.v1.IDService"})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := watch.Recv(); err != nil || res.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("watch: %v %v", res, err)
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if res, err := watch.Recv(); err != nil || res.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("watch after SIGTERM: %v %v, want NOT_SERVING", res, err)
	}
	if code := p.stop(t); code != 0 {
		t.Fatalf("exit %d after SIGTERM, want 0\n%s", code, p.Output())
	}
	if _, err := client.NextSegment(ctx, &leafdv1.NextSegmentRequest{Tag: "t"}); err == nil {
		t.Fatal("an RPC succeeded after the server stopped")
	}
}

// A grpc.addr that cannot be listened on stops start-up with exit 1, the
// message naming grpc.addr.
func TestGRPCAddrInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	code, out := runLeafd(t, t.TempDir(), []string{"LEAFD_GRPC_ADDR=" + ln.Addr().String()}, "serve")
	if code != 1 || !strings.Contains(out, "grpc.addr") {
		t.Fatalf("exit %d, output %q; want exit 1 naming grpc.addr", code, out)
	}
}
