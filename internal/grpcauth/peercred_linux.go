package grpcauth

import (
	"syscall"

	"golang.org/x/sys/unix"
)

func peerCred(raw syscall.RawConn) (UnixPeer, error) {
	var cred *unix.Ucred
	var serr error
	if err := raw.Control(func(fd uintptr) {
		cred, serr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return UnixPeer{}, err
	}
	if serr != nil {
		return UnixPeer{}, serr
	}
	return UnixPeer{UID: int(cred.Uid), GID: int(cred.Gid), PID: int(cred.Pid)}, nil
}
