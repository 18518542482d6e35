package debounce

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestAccept(t *testing.T) {
	t0 := time.Unix(1000, 0)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	cases := map[string]struct {
		edges []time.Time
		want  []bool
	}{
		"first edge is a press":          {[]time.Time{ms(0)}, []bool{true}},
		"bounce inside window ignored":   {[]time.Time{ms(0), ms(3), ms(7)}, []bool{true, false, false}},
		"exactly at window is new press": {[]time.Time{ms(0), ms(50)}, []bool{true, true}},
		"just inside window ignored":     {[]time.Time{ms(0), ms(49)}, []bool{true, false}},
		"chatter extends the window":     {[]time.Time{ms(0), ms(40), ms(80), ms(120)}, []bool{true, false, false, false}},
		"quiet then press":               {[]time.Time{ms(0), ms(40), ms(100)}, []bool{true, false, true}},
		"two clean presses":              {[]time.Time{ms(0), ms(500)}, []bool{true, true}},
		"out of order edge ignored":      {[]time.Time{ms(100), ms(90), ms(120)}, []bool{true, false, false}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			d := Debouncer{Window: 50 * time.Millisecond}
			var got []bool
			for _, e := range tc.edges {
				got = append(got, d.Accept(e))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Accept results (-want +got):\n%s", diff)
			}
		})
	}
}
