package broker

import (
	"fmt"
	"net"
	"sync"
)

// pipeListener is a net.Listener of in-memory connections: dial makes a
// net.Pipe and hands one end to Accept, the broker's listener loop.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

// dial returns the client's end of a new connection, once the listener
// has taken the broker's end.
func (l *pipeListener) dial() (net.Conn, error) {
	select {
	case <-l.done:
		return nil, errPipeClosed
	default:
	}
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
		client.Close()
		server.Close()
		return nil, errPipeClosed
	}
}

var errPipeClosed = fmt.Errorf("embedded broker: dial pipe: %w", net.ErrClosed)

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

// pipeAddr is the address of the in-memory listener and its connections.
type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }
