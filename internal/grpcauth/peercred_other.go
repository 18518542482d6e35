//go:build !linux

package grpcauth

import (
	"errors"
	"syscall"
)

// The agent runs on Linux; elsewhere (a developer's machine) peer
// credentials are not read and the socket refuses connections.
func peerCred(syscall.RawConn) (UnixPeer, error) {
	return UnixPeer{}, errors.New("peer credentials are read on Linux only")
}
