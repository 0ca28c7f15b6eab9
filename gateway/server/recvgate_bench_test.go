package server

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/sessiongate/sessiongate/gateway/wirecodec"
	sessiongatev1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
)

// BenchmarkOversizedInputs sends K RunJob requests of a 10 MB input (over
// the default max_input_bytes of 8 MiB, under the 17 MiB receive limit) at
// once, over 8 connections, and reports the gateway process's peak heap
// in use and peak RSS while they are received and refused: with the
// default --max-receiving-bytes (256 MiB, 15 requests of the receive limit
// at a time) and with the gate off (a budget of 1 TiB). Every call must
// end CAP_EXCEEDED. The request is encoded once and sent as bytes, so the
// callers in this process add little. Run it alone:
//
//	go test -run '^$' -bench OversizedInputs -benchtime 3x ./gateway/server/
func BenchmarkOversizedInputs(b *testing.B) {
	for _, gate := range []struct {
		name  string
		bytes int64
	}{{"gate=default", 0}, {"gate=off", 1 << 40}} {
		for _, k := range []int{16, 48} {
			b.Run(fmt.Sprintf("%s/k=%d", gate.name, k), func(b *testing.B) {
				benchOversized(b, gate.bytes, k)
			})
		}
	}
}

func benchOversized(b *testing.B, gateBytes int64, k int) {
	h := newHarnessTB(b, harnessOpts{config: func(c *Config) { c.MaxReceivingBytes = gateBytes }})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	open, err := h.client.OpenSession(ctx, &sessiongatev1.OpenSessionRequest{})
	if err != nil {
		b.Fatal(err)
	}
	req, err := proto.Marshal(&sessiongatev1.RunJobRequest{SessionId: open.GetSessionId(), Agent: "echo",
		Input: structpb.NewStringValue(strings.Repeat("x", 10_000_000))})
	if err != nil {
		b.Fatal(err)
	}
	conns := make([]*grpc.ClientConn, 8)
	for i := range conns {
		conns[i], err = grpc.NewClient(h.addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.ForceCodecV2(wirecodec.NewCodec()), grpc.MaxCallSendMsgSize(64<<20)))
		if err != nil {
			b.Fatal(err)
		}
		defer conns[i].Close()
	}
	runtime.GC()
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) // resets VmHWM
	var peakHeap atomic.Uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		var ms runtime.MemStats
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peakHeap.Load() {
				peakHeap.Store(ms.HeapInuse)
			}
		}
	}()
	var refused atomic.Int64
	b.ResetTimer()
	for range b.N {
		var wg sync.WaitGroup
		for i := range k {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var resp wirecodec.RawMessage
				err := conns[i%len(conns)].Invoke(ctx, sessiongatev1.SessionGateway_RunJob_FullMethodName, &wirecodec.RawMessage{Bytes: req}, &resp)
				if ei := errorInfo(err); ei.GetReason() == "CAP_EXCEEDED" && ei.GetMetadata()["cap"] == "max_input_bytes" {
					refused.Add(1)
				} else {
					b.Errorf("10 MB input: %v; want CAP_EXCEEDED max_input_bytes", status.Convert(err))
				}
			}()
		}
		wg.Wait()
	}
	b.StopTimer()
	close(stop)
	<-sampled
	if refused.Load() != int64(k*b.N) {
		b.Fatalf("%d of %d calls refused CAP_EXCEEDED", refused.Load(), k*b.N)
	}
	b.ReportMetric(float64(peakHeap.Load())/(1<<20), "peak-heap-MiB")
	b.ReportMetric(float64(vmHWM())/(1<<20), "peak-RSS-MiB")
}

// vmHWM is the process's peak resident set since the last clear_refs, in
// bytes (0 where /proc is missing).
func vmHWM() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			var kb int64
			fmt.Sscanf(strings.TrimSpace(rest), "%d kB", &kb)
			return kb << 10
		}
	}
	return 0
}
