package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sessiongate/sessiongate/gateway/arcpruntime"
	"github.com/sessiongate/sessiongate/gateway/directory"
	"github.com/sessiongate/sessiongate/gateway/peerauth/peertls"
	"github.com/sessiongate/sessiongate/gateway/server"
)

// clusterSetup is cluster mode's part of the command: the directory and the
// gateway's cluster configuration.
type clusterSetup struct {
	dir *directory.Directory
	cfg server.ClusterConfig
}

// config is the gateway's Cluster field (nil: not in cluster mode).
func (c *clusterSetup) config() *server.ClusterConfig {
	if c == nil {
		return nil
	}
	return &c.cfg
}

// openCluster opens the directory when --redis is set; listenAddr is the
// gRPC listener's address, advertised when --advertise is not given.
func openCluster(ctx context.Context, o *options, listenAddr string, reg prometheus.Registerer, log *slog.Logger) (*clusterSetup, error) {
	if o.redisURL == "" {
		return nil, nil
	}
	adv := o.advertise
	if adv == "" {
		adv = listenAddr
	}
	obs, err := server.NewDirectoryObserver(reg)
	if err != nil {
		return nil, err
	}
	d, err := directory.Open(ctx, o.redisURL, directory.Config{
		Instance: o.instanceID, Advertise: adv, Keys: o.directoryKeys, LeaseTTL: o.leaseTTL,
		Observer: obs, Logger: log.With("component", "directory"),
	})
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	// A second process with a live instance id would steal the first's
	// records: refuse to start (a crashed predecessor's lease expires
	// within --lease-ttl, which this waits out).
	if err := d.CheckInstance(ctx); err != nil {
		_ = d.Close()
		return nil, fmt.Errorf("cluster: %w", err)
	}
	var pt *peertls.TLS
	if o.peerTLS.cert != "" {
		pt, err = peertls.Load(peertls.Files{Cert: o.peerTLS.cert, Key: o.peerTLS.key, CA: o.peerTLS.ca}, peertls.Options{
			OnReloadError: func(err error) {
				log.Warn("peer TLS files changed but did not load; the previous ones stay in use", "error", err)
			},
		})
		if err != nil {
			_ = d.Close()
			return nil, fmt.Errorf("cluster: %w", err)
		}
	}
	log.Info("cluster mode", "instance_id", o.instanceID, "advertise", adv, "lease_ttl", o.leaseTTL, "peer_tls", pt != nil)
	off := func(d time.Duration) time.Duration { // 0 on the command line: off (the config's zero is its default)
		if d <= 0 {
			return -1
		}
		return d
	}
	rebalance := o.rebalance
	if rebalance <= 0 {
		rebalance = -1 // the config's zero is its default
	}
	return &clusterSetup{dir: d, cfg: server.ClusterConfig{
		Directory: d, Advertise: adv, Secret: o.clusterSecret, AckLag: o.ackLag, PeerTLS: pt, RebalancePerSecond: rebalance,
		LameDuck: off(o.lameDuck), PeerFirstByte: off(o.peerFirstByte), PeerKeepalive: off(o.peerKeepalive), OwnerWait: off(o.ownerWait),
	}}, nil
}

// runRuntime is `gateway runtime`: the reference ARCP runtime alone (demo
// agents echo, sleep, stream, fail), so that several gateway replicas can
// share one runtime on a machine.
func runRuntime(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("gateway runtime", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:9090", "loopback host:port of the runtime's WebSocket endpoint")
	level := fs.String("log-level", "info", "debug, info, warn or error")
	format := fs.String("log-format", "auto", "json, text or auto")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("runtime: unexpected argument %q", fs.Arg(0))
	}
	log, err := newLogger(*level, *format, stderr)
	if err != nil {
		return err
	}
	srv, err := arcpruntime.Listen(*listen, arcpruntime.Options{Logger: log})
	if err != nil {
		return err
	}
	log.Info("reference runtime serving", "url", srv.URL())
	fmt.Fprintf(stdout, "reference runtime serving on %s (pass --runtime default=%s to each gateway)\n", srv.URL(), srv.URL())
	<-ctx.Done()
	if err := srv.Close(); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}
