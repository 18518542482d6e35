// Package grpcauth decides who may call which RPC of the agent's gRPC API
// and keeps an audit log of every call that changes something. Callers are
// identified by what the transport proved: the client certificate the TLS
// handshake verified (its Organization carries the role), or the peer
// credentials the kernel reports for a unix socket (SO_PEERCRED). A server
// installs the interceptors with a Policy naming, for every method, the
// least role it needs; a method the Policy does not name is refused.
package grpcauth

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/kubeblade/kubeblade/internal/pki"
)

// Roles, as client certificates carry them (package pki).
type Role = pki.Role

const (
	RoleNone     = pki.RoleNone
	RoleViewer   = pki.RoleViewer
	RoleOperator = pki.RoleOperator
)

// Caller is who made a call, as the transport proved it.
type Caller struct {
	// Name identifies the caller in logs: the certificate subject, or the
	// unix user and process.
	Name string
	// Transport is "tls" or "unix".
	Transport string
	Role      Role
	// Attrs are details for the audit line (serial number, uid, pid).
	Attrs []slog.Attr
}

// Identify returns the caller of ctx. Over TLS the role comes from the
// verified client certificate; over a unix socket (served with
// UnixCredentials) every peer is an operator: the socket's file mode and
// group decide who can connect at all.
func Identify(ctx context.Context) (Caller, error) {
	p, ok := peer.FromContext(ctx)
	if !ok || p.AuthInfo == nil {
		return Caller{}, status.Error(codes.Unauthenticated, "the transport proved no identity")
	}
	switch ai := p.AuthInfo.(type) {
	case credentials.TLSInfo:
		if len(ai.State.VerifiedChains) == 0 || len(ai.State.VerifiedChains[0]) == 0 {
			return Caller{}, status.Error(codes.Unauthenticated, "no verified client certificate")
		}
		return certCaller(ai.State.VerifiedChains[0][0])
	case UnixPeer:
		return Caller{Name: ai.String(), Transport: "unix", Role: RoleOperator,
			Attrs: []slog.Attr{slog.Int("uid", ai.UID), slog.Int("gid", ai.GID), slog.Int("pid", ai.PID)}}, nil
	}
	return Caller{}, status.Errorf(codes.Unauthenticated, "unknown transport %s", p.AuthInfo.AuthType())
}

func certCaller(c *x509.Certificate) (Caller, error) {
	caller := Caller{Name: c.Subject.String(), Transport: "tls",
		Attrs: []slog.Attr{slog.String("serial", c.SerialNumber.Text(16))}}
	role, err := pki.RoleOf(c.Subject.Organization)
	if err != nil {
		return caller, status.Errorf(codes.PermissionDenied, "client certificate %s: %v", caller.Name, err)
	}
	caller.Role = role
	return caller, nil
}

// Rule says who may call a method and whether calls are audited.
type Rule struct {
	// Role is the least role the method needs.
	Role Role
	// Audit logs every call: methods that change the blade.
	Audit bool
}

// Policy maps full method names ("/package.Service/Method") to rules.
type Policy map[string]Rule

// Missing returns the methods of the services in info that p names no
// rule for, sorted. A server refuses to start with any: they could never
// be called, and the gap is a mistake.
func (p Policy) Missing(info map[string]grpc.ServiceInfo) []string {
	var out []string
	for svc, si := range info {
		for _, m := range si.Methods {
			if _, ok := p["/"+svc+"/"+m.Name]; !ok {
				out = append(out, "/"+svc+"/"+m.Name)
			}
		}
	}
	slices.Sort(out)
	return out
}

// Authorizer enforces a Policy and writes the audit log.
type Authorizer struct {
	Policy Policy
	// Audit receives one line per audited call and per refused call.
	Audit *slog.Logger
}

// authorize returns the caller of a call to method, or the refusal.
func (a *Authorizer) authorize(ctx context.Context, method string) (Caller, Rule, error) {
	rule, ok := a.Policy[method]
	if !ok {
		return Caller{}, rule, status.Errorf(codes.PermissionDenied, "%s has no access rule", method)
	}
	c, err := Identify(ctx)
	if err != nil {
		return c, rule, err
	}
	if c.Role < rule.Role {
		return c, rule, status.Errorf(codes.PermissionDenied, "%s has role %s; %s needs role %s",
			c.Name, c.Role, method, rule.Role)
	}
	return c, rule, nil
}

// Unary is the unary server interceptor.
func (a *Authorizer) Unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	start := time.Now()
	c, rule, err := a.authorize(ctx, info.FullMethod)
	if err != nil {
		a.log(ctx, c, info.FullMethod, req, err, start)
		return nil, err
	}
	resp, err := h(ctx, req)
	if rule.Audit {
		a.log(ctx, c, info.FullMethod, req, err, start)
	}
	return resp, err
}

// Stream is the stream server interceptor. Streams carry no arguments in
// the audit line: the interceptor runs before the first message.
func (a *Authorizer) Stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	start := time.Now()
	c, rule, err := a.authorize(ss.Context(), info.FullMethod)
	if err != nil {
		a.log(ss.Context(), c, info.FullMethod, nil, err, start)
		return err
	}
	err = h(srv, ss)
	if rule.Audit {
		a.log(ss.Context(), c, info.FullMethod, nil, err, start)
	}
	return err
}

// log writes one audit line: who (and how they were identified), which
// RPC, its arguments and its result.
func (a *Authorizer) log(ctx context.Context, c Caller, method string, req any, err error, start time.Time) {
	if a.Audit == nil {
		return
	}
	who := c.Name
	if who == "" {
		who = "unidentified"
	}
	attrs := []slog.Attr{
		slog.String("who", who), slog.String("transport", c.Transport), slog.String("role", c.Role.String()),
		slog.String("rpc", method), slog.String("args", args(req)),
		slog.String("result", status.Code(err).String()),
	}
	if err != nil {
		attrs = append(attrs, slog.String("error", status.Convert(err).Message()))
	}
	attrs = append(attrs, slog.Duration("took", time.Since(start)))
	attrs = append(attrs, c.Attrs...)
	a.Audit.LogAttrs(ctx, slog.LevelInfo, "audit", attrs...)
}

func args(req any) string {
	m, ok := req.(proto.Message)
	if !ok || m == nil {
		return ""
	}
	// EmitUnpopulated: a zero is an argument too (SetFanSpeed{0} turns
	// the fan off), and proto3 does not tell it from "not set".
	b, err := protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true}.Marshal(m)
	if err != nil {
		return fmt.Sprintf("<%v>", err)
	}
	// protojson randomises whitespace between tokens; a log line wants none.
	var buf bytes.Buffer
	if json.Compact(&buf, b) != nil {
		return string(b)
	}
	return buf.String()
}
