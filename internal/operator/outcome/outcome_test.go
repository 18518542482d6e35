package outcome

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	kbv1 "github.com/kubeblade/kubeblade/api/v1alpha1"
)

func TestRecordFailuresAndClear(t *testing.T) {
	s := New()
	bc := &kbv1.BladeConfig{}
	bc.Name, bc.Generation = "rack-a", 3
	drain := func() []string {
		var out []string
		for {
			select {
			case e := <-s.Changed():
				out = append(out, e.Object.GetName())
			default:
				return out
			}
		}
	}

	s.Record("daemonset", bc, nil)
	if got := drain(); len(got) != 0 {
		t.Errorf("a success without a failure announced %v", got)
	}
	refused := errors.New(`DaemonSet.apps "kubeblade-agent-rack-a" is invalid: spec.template.spec.containers[0].resources.requests: Invalid value: "2": must be less than or equal to cpu limit of 1`)
	s.Record("daemonset", bc, refused)
	s.Record("daemonset", bc, refused) // the same again: no news
	s.Record("assignment", bc, errors.New("node blade-1: forbidden"))
	if diff := cmp.Diff([]string{"rack-a", "rack-a"}, drain()); diff != "" {
		t.Errorf("announcements (-want +got):\n%s", diff)
	}
	want := []Failure{
		{Controller: "assignment", Generation: 3, Message: "node blade-1: forbidden"},
		{Controller: "daemonset", Generation: 3, Message: refused.Error()},
	}
	if diff := cmp.Diff(want, s.Failures("rack-a")); diff != "" {
		t.Errorf("failures (-want +got):\n%s", diff)
	}
	if got := s.Failures("rack-b"); len(got) != 0 {
		t.Errorf("another config has failures %v", got)
	}

	// A fix: the next success of each controller clears its failure.
	bc.Generation = 4
	s.Record("daemonset", bc, nil)
	if diff := cmp.Diff(want[:1], s.Failures("rack-a")); diff != "" {
		t.Errorf("after the DaemonSet applied (-want +got):\n%s", diff)
	}
	s.Record("assignment", bc, nil)
	if got := s.Failures("rack-a"); len(got) != 0 {
		t.Errorf("after both succeeded: %v", got)
	}
	if diff := cmp.Diff([]string{"rack-a", "rack-a"}, drain()); diff != "" {
		t.Errorf("announcements of the fixes (-want +got):\n%s", diff)
	}
	s.Record("daemonset", bc, refused)
	s.Forget("rack-a")
	if got := s.Failures("rack-a"); len(got) != 0 {
		t.Errorf("after Forget: %v", got)
	}
}
