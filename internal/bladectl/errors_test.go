package bladectl

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestExplain(t *testing.T) {
	const sock = "unix:///run/kubeblade/agent.sock"
	cases := map[string]struct {
		err  error
		want string
	}{
		"permission denied": {
			status.Error(codes.Unavailable, `connection error: desc = "transport: Error while dialing: dial unix /run/kubeblade/agent.sock: connect: permission denied"`),
			"cannot reach agent at " + sock + ": permission denied — are you in the kubeblade group?",
		},
		"no socket": {
			status.Error(codes.Unavailable, `connection error: desc = "transport: Error while dialing: dial unix /run/kubeblade/agent.sock: connect: no such file or directory"`),
			"cannot reach agent at " + sock + ": no such socket — is kubeblade-agent running?",
		},
		"refused": {
			status.Error(codes.Unavailable, `connection error: desc = "transport: Error while dialing: dial tcp 10.0.0.1:8081: connect: connection refused"`),
			"cannot reach agent at " + sock + ": connection refused — is kubeblade-agent running, with remote access enabled for TCP?",
		},
		"bad certificate": {
			status.Error(codes.Unavailable, `connection error: desc = "transport: authentication handshake failed: tls: failed to verify certificate: x509: certificate signed by unknown authority"`),
			"TLS handshake with " + sock + " failed: x509: certificate signed by unknown authority — check the blade's certificate-authority and client certificate in the bladectl config",
		},
		"deadline":        {status.Error(codes.DeadlineExceeded, "context deadline exceeded"), "no answer from " + sock + " within 2s"},
		"plain deadline":  {context.DeadlineExceeded, "no answer from " + sock + " within 2s"},
		"invalid":         {status.Error(codes.InvalidArgument, "fan percent 101 is outside 0–100"), "refused by the agent: fan percent 101 is outside 0–100"},
		"critical":        {status.Error(codes.FailedPrecondition, "critical temperature mode is active"), "refused by the agent: critical temperature mode is active"},
		"internal":        {status.Error(codes.Internal, "boom"), sock + ": boom"},
		"unauthenticated": {status.Error(codes.Unauthenticated, "no"), sock + " refused these credentials: no"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := explain(sock, 2*time.Second, tc.err).Error(); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}
