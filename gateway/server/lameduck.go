package server

import (
	"errors"
	"net"
	"sync"

	"google.golang.org/grpc"
)

// The lame duck's listener (cluster mode).
//
// grpc-go sends GOAWAY to a server's connections only when it stops, and it
// closes the server's listeners first. To send GOAWAY first and close the
// listener last, the gateway serves its listener through an acceptMux: each
// gRPC server accepts from a subListener of its own, whose Close ends only
// that server's accept loop. When Shutdown begins, a second gRPC server (the
// same services, interceptors and options: Gateway.buildLame) starts on a
// new subListener and the first stops gracefully: every connection made
// before the shutdown is sent GOAWAY at once (its calls in flight finish;
// new calls go to a new connection, on another replica or on the second
// server), while the listener goes on accepting for the lame duck. At its
// end the listener is closed and the second server stops gracefully.

// lameDuck is a gateway's listener and its servers in cluster mode.
type lameDuck struct {
	mux   *acceptMux
	first *subListener // the main server's (Gateway.grpc)

	// Set by beginLameDuck.
	second       *grpc.Server
	served       chan error    // the second server's Serve result
	firstStopped chan struct{} // closed when the first server's GracefulStop returned
}

// acceptMux accepts from a listener on one goroutine (run, ended by Close)
// and hands each connection to whichever subListener asks first.
type acceptMux struct {
	lis   net.Listener
	conns chan net.Conn
	quit  chan struct{} // closed by Close
	done  chan struct{} // closed when run returned; err is set then
	err   error
	once  sync.Once
	wg    sync.WaitGroup // run and requeues
}

func newAcceptMux(lis net.Listener) *acceptMux {
	m := &acceptMux{lis: lis, conns: make(chan net.Conn), quit: make(chan struct{}), done: make(chan struct{})}
	m.wg.Add(1)
	go m.run()
	return m
}

func (m *acceptMux) run() {
	defer m.wg.Done()
	defer close(m.done)
	for {
		c, err := m.lis.Accept()
		if err != nil {
			var ne interface{ Temporary() bool }
			if errors.As(err, &ne) && ne.Temporary() {
				continue
			}
			m.err = err
			return
		}
		m.hand(c)
	}
}

// hand gives c to a subListener, or closes it once the mux is closed.
func (m *acceptMux) hand(c net.Conn) {
	select {
	case m.conns <- c:
	case <-m.quit:
		_ = c.Close()
	}
}

// Close closes the listener (new connections are refused) and waits for
// the mux's goroutines. Idempotent.
func (m *acceptMux) Close() {
	m.once.Do(func() {
		close(m.quit)
		_ = m.lis.Close()
	})
	m.wg.Wait()
}

// closing says Close was called.
func (m *acceptMux) closing() bool {
	select {
	case <-m.quit:
		return true
	default:
		return false
	}
}

// listener returns a new subListener.
func (m *acceptMux) listener() *subListener {
	return &subListener{m: m, closed: make(chan struct{})}
}

// subListener is one server's view of an acceptMux.
type subListener struct {
	m      *acceptMux
	closed chan struct{}
	once   sync.Once
}

func (s *subListener) Accept() (net.Conn, error) {
	select {
	case <-s.closed:
		return nil, net.ErrClosed
	default:
	}
	select {
	case c := <-s.m.conns:
		select {
		case <-s.closed:
			// Closed meanwhile: the other server takes it.
			s.m.wg.Add(1)
			go func() {
				defer s.m.wg.Done()
				s.m.hand(c)
			}()
			return nil, net.ErrClosed
		default:
			return c, nil
		}
	case <-s.closed:
		return nil, net.ErrClosed
	case <-s.m.done:
		if s.m.err != nil {
			return nil, s.m.err
		}
		return nil, net.ErrClosed
	}
}

// Close ends this server's accept loop; the listener stays open.
func (s *subListener) Close() error {
	s.once.Do(func() { close(s.closed) })
	return nil
}

func (s *subListener) Addr() net.Addr { return s.m.lis.Addr() }

// beginLameDuck starts the lame duck's server on the listener and stops
// the first one gracefully (GOAWAY to its connections). It returns nil when
// there is no lame duck (not cluster mode, ClusterConfig.LameDuck
// negative, or Serve not running).
func (g *Gateway) beginLameDuck() *lameDuck {
	g.lameMu.Lock()
	defer g.lameMu.Unlock()
	ld := g.lame
	if ld == nil {
		g.lame = &lameDuck{} // Serve, if called now, serves nothing
		return nil
	}
	if g.cluster.cfg.LameDuck <= 0 || ld.second != nil {
		return ld
	}
	ld.second = g.buildLame()
	ld.served = make(chan error, 1)
	ld.firstStopped = make(chan struct{})
	sub := ld.mux.listener()
	go func() { ld.served <- ld.second.Serve(sub) }()
	go func() {
		g.grpc.GracefulStop() // GOAWAY to every connection made before the shutdown
		close(ld.firstStopped)
	}()
	return ld
}

// serveMux is Serve in cluster mode: the main server on a subListener;
// after a shutdown it returns once the lame duck's server has stopped too.
func (g *Gateway) serveMux(lis net.Listener) error {
	g.lameMu.Lock()
	if g.lame != nil { // Shutdown began before Serve
		g.lameMu.Unlock()
		return nil
	}
	m := newAcceptMux(lis)
	ld := &lameDuck{mux: m, first: m.listener()}
	g.lame = ld
	g.lameMu.Unlock()
	err := g.grpc.Serve(ld.first)
	if errors.Is(err, grpc.ErrServerStopped) || m.closing() {
		err = nil // Shutdown closed the listener (see Shutdown)
	}
	g.lameMu.Lock()
	second := ld.second
	g.lameMu.Unlock()
	if second != nil {
		if lerr := <-ld.served; lerr != nil && !errors.Is(lerr, grpc.ErrServerStopped) && !m.closing() && err == nil {
			err = lerr
		}
	}
	if err != nil {
		m.Close()
	}
	return err
}
