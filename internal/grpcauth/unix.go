package grpcauth

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/user"
	"strconv"
	"syscall"

	"google.golang.org/grpc/credentials"
)

// UnixPeer is the AuthInfo of a unix-socket connection: the credentials of
// the process that connected, as the kernel recorded them at connect time
// (SO_PEERCRED), so a client cannot claim to be someone else.
type UnixPeer struct {
	credentials.CommonAuthInfo
	UID, GID, PID int
}

// AuthType implements credentials.AuthInfo.
func (UnixPeer) AuthType() string { return "unix-peercred" }

func (p UnixPeer) String() string {
	name := "uid=" + strconv.Itoa(p.UID)
	if u, err := user.LookupId(strconv.Itoa(p.UID)); err == nil {
		name += "(" + u.Username + ")"
	}
	return fmt.Sprintf("unix:%s,gid=%d,pid=%d", name, p.GID, p.PID)
}

// UnixCredentials are server transport credentials for a unix socket: no
// handshake on the wire (clients dial it with insecure credentials, as
// before), only the peer's credentials read from the kernel.
func UnixCredentials() credentials.TransportCredentials { return unixCreds{} }

type unixCreds struct{}

func (unixCreds) ServerHandshake(c net.Conn) (net.Conn, credentials.AuthInfo, error) {
	sc, ok := c.(syscall.Conn)
	if !ok || c.LocalAddr().Network() != "unix" {
		return nil, nil, fmt.Errorf("peer credentials need a unix socket, not %s", c.LocalAddr().Network())
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil, nil, err
	}
	p, err := peerCred(raw)
	if err != nil {
		return nil, nil, fmt.Errorf("reading the peer's credentials: %w", err)
	}
	// The kernel vouches for the peer and nothing leaves the machine.
	p.CommonAuthInfo = credentials.CommonAuthInfo{SecurityLevel: credentials.PrivacyAndIntegrity}
	return c, p, nil
}

func (unixCreds) ClientHandshake(context.Context, string, net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("grpcauth.UnixCredentials are for servers")
}

func (unixCreds) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: "unix-peercred"}
}

func (unixCreds) Clone() credentials.TransportCredentials { return unixCreds{} }

// OverrideServerName is a no-op: the interface still requires it.
func (unixCreds) OverrideServerName(string) error { return nil }
