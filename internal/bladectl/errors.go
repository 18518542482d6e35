package bladectl

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// explain turns an error from talking to a blade into one sentence a
// person can act on; gRPC's own text ("rpc error: code = Unavailable desc =
// connection error: desc = transport: …") helps nobody at 2 a.m.
func explain(addr string, timeout time.Duration, err error) error {
	if err == nil {
		return nil
	}
	s, ok := status.FromError(err)
	if !ok {
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			return fmt.Errorf("no answer from %s within %s", addr, timeout)
		case errors.Is(err, context.Canceled):
			return errors.New("interrupted")
		}
		return err
	}
	msg := s.Message()
	switch s.Code() {
	case codes.Unavailable:
		return unreachable(addr, msg)
	case codes.DeadlineExceeded:
		return fmt.Errorf("no answer from %s within %s", addr, timeout)
	case codes.Canceled:
		return errors.New("interrupted")
	case codes.InvalidArgument, codes.FailedPrecondition, codes.Unimplemented, codes.OutOfRange:
		return fmt.Errorf("refused by the agent: %s", msg)
	case codes.PermissionDenied, codes.Unauthenticated:
		return fmt.Errorf("%s refused these credentials: %s", addr, msg)
	}
	return fmt.Errorf("%s: %s", addr, msg)
}

func unreachable(addr, msg string) error {
	detail := msg
	// Keep only the innermost cause: "…: connect: permission denied".
	if i := strings.LastIndex(detail, ": "); i >= 0 && !strings.Contains(detail, "tls:") && !strings.Contains(detail, "x509:") {
		detail = detail[i+2:]
	}
	detail = strings.Trim(detail, `"`)
	hint := ""
	switch {
	case strings.Contains(msg, "permission denied"):
		hint = " — are you in the kubeblade group?"
	case strings.Contains(msg, "no such file or directory"):
		detail = "no such socket"
		hint = " — is kubeblade-agent running?"
	case strings.Contains(msg, "connection refused"):
		hint = " — is kubeblade-agent running, with remote access enabled for TCP?"
	case strings.Contains(msg, "x509:") || strings.Contains(msg, "tls:") || strings.Contains(msg, "handshake"):
		return fmt.Errorf("TLS handshake with %s failed: %s — check the blade's certificate-authority and client certificate in the bladectl config",
			addr, tlsDetail(msg))
	}
	return fmt.Errorf("cannot reach agent at %s: %s%s", addr, detail, hint)
}

func tlsDetail(msg string) string {
	for _, marker := range []string{"x509: ", "tls: "} {
		if i := strings.Index(msg, marker); i >= 0 {
			return strings.Trim(msg[i:], `"`)
		}
	}
	return msg
}
