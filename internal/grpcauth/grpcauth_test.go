package grpcauth

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

func TestMissing(t *testing.T) {
	p := Policy{"/svc.A/Get": {Role: RoleViewer}}
	info := map[string]grpc.ServiceInfo{"svc.A": {Methods: []grpc.MethodInfo{{Name: "Get"}, {Name: "Set"}}}, "svc.B": {Methods: []grpc.MethodInfo{{Name: "Do"}}}}
	if diff := cmp.Diff([]string{"/svc.A/Set", "/svc.B/Do"}, p.Missing(info)); diff != "" {
		t.Error(diff)
	}
}

// A method without a rule, and a caller the transport did not identify,
// are refused before the handler runs.
func TestRefusedBeforeTheHandler(t *testing.T) {
	a := &Authorizer{Policy: Policy{"/svc.A/Set": {Role: RoleOperator, Audit: true}}}
	unix := peer.NewContext(context.Background(), &peer.Peer{AuthInfo: UnixPeer{UID: 0}})
	for name, tc := range map[string]struct {
		ctx    context.Context
		method string
		want   codes.Code
	}{
		"no rule":     {unix, "/svc.A/Other", codes.PermissionDenied},
		"no identity": {context.Background(), "/svc.A/Set", codes.Unauthenticated},
		"unix peer":   {unix, "/svc.A/Set", codes.OK},
	} {
		ran := false
		_, err := a.Unary(tc.ctx, nil, &grpc.UnaryServerInfo{FullMethod: tc.method}, func(context.Context, any) (any, error) {
			ran = true
			return nil, nil
		})
		if got := status.Code(err); got != tc.want || ran != (tc.want == codes.OK) {
			t.Errorf("%s: code %s, handler ran %v; want %s", name, got, ran, tc.want)
		}
	}
}
