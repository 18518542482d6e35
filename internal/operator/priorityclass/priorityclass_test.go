package priorityclass

import (
	"context"
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	kbv1 "github.com/kubeblade/kubeblade/api/v1alpha1"
)

func TestMissing(t *testing.T) {
	s := runtime.NewScheme()
	if err := kbv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	exists := Metadata()
	exists.Name = "blades"
	broken := errors.New("connection refused")
	cases := map[string]struct {
		name    string
		failGet bool
		want    string // substring of the message; "" none
		wantErr bool
	}{
		"none named: the default":   {name: ""},
		"the default named":         {name: "system-node-critical", failGet: true}, // not even read
		"an existing class":         {name: "blades"},
		"a class that is not there": {name: "bladez", want: `PriorityClass "bladez" does not exist`},
		"the API server failing":    {name: "bladez", failGet: true, wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			b := fake.NewClientBuilder().WithScheme(s).WithObjects(exists)
			if tc.failGet {
				b = b.WithInterceptorFuncs(interceptor.Funcs{Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
					return broken
				}})
			}
			bc := &kbv1.BladeConfig{}
			bc.Spec.DaemonSet.PriorityClassName = tc.name
			msg, err := Missing(context.Background(), b.Build(), bc, "system-node-critical")
			if (err != nil) != tc.wantErr || (tc.wantErr && !errors.Is(err, broken)) {
				t.Fatalf("Missing error = %v, want error %v", err, tc.wantErr)
			}
			if tc.want == "" && msg != "" || tc.want != "" && !strings.Contains(msg, tc.want) {
				t.Errorf("Missing = %q, want %q", msg, tc.want)
			}
			if tc.want != "" && !strings.Contains(msg, "the agents run with system-node-critical") {
				t.Errorf("Missing = %q does not say which class the agents run with", msg)
			}
		})
	}
}
