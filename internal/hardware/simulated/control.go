package simulated

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/kubeblade/kubeblade/internal/hardware"
)

// ControlHandler exposes the simulated blade's controls over HTTP so the
// demo and end-to-end tests can press its button or heat it from outside the
// agent process. The agent serves it on a unix socket in its state directory
// only when the simulated backend is in use; it is never on a TCP port.
//
//	GET  /state                      read-out as JSON
//	POST /button                     one press (a click)
//	POST /button?hold=3.5s           press, hold (the request waits), release:
//	                                 3 s or more toggles maintenance
//	POST /load?value=1.5             CPU load
//	POST /temperature?celsius=70     jump the SoC temperature
//	POST /power?source=poe-or-usbc   PoE detect line
//	POST /fan-stall?stalled=true     stall the fan
//	POST /sensor-hang?hung=true      temperature reads block (a wedged bus)
func ControlHandler(b *Blade) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /state", func(w http.ResponseWriter, r *http.Request) {
		writeState(w, b)
	})
	mux.HandleFunc("POST /button", func(w http.ResponseWriter, r *http.Request) {
		hold := r.URL.Query().Get("hold")
		if hold == "" {
			if !b.PressButton() {
				http.Error(w, "button press not accepted (blade closed or queue full)", http.StatusConflict)
				return
			}
			writeState(w, b)
			return
		}
		d, err := time.ParseDuration(hold)
		if err != nil || d <= 0 || d > time.Minute {
			http.Error(w, fmt.Sprintf("hold %q: want a duration from 1ms to 1m, e.g. 3.5s", hold), http.StatusBadRequest)
			return
		}
		if !b.ButtonDown() {
			http.Error(w, "button press not accepted (blade closed or queue full)", http.StatusConflict)
			return
		}
		// The hold is real time: the control socket serves the demo and
		// end-to-end tests, whose agents run on the real clock. The
		// button is released even when the caller gives up waiting.
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
		}
		if !b.ButtonUp() {
			http.Error(w, "button release not accepted (blade closed or queue full)", http.StatusConflict)
			return
		}
		writeState(w, b)
	})
	mux.HandleFunc("POST /load", func(w http.ResponseWriter, r *http.Request) {
		v, err := floatParam(r, "value")
		if err == nil {
			err = b.SetLoad(v)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		writeState(w, b)
	})
	mux.HandleFunc("POST /temperature", func(w http.ResponseWriter, r *http.Request) {
		v, err := floatParam(r, "celsius")
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		b.SetTemperature(v)
		writeState(w, b)
	})
	mux.HandleFunc("POST /power", func(w http.ResponseWriter, r *http.Request) {
		switch p := hardware.PowerSource(r.URL.Query().Get("source")); p {
		case hardware.PowerPoEPlus, hardware.PowerPoEOrUSBC:
			b.SetPower(p)
			writeState(w, b)
		default:
			http.Error(w, fmt.Sprintf("source %q: want %s or %s", p, hardware.PowerPoEPlus, hardware.PowerPoEOrUSBC), http.StatusBadRequest)
		}
	})
	mux.HandleFunc("POST /fan-stall", func(w http.ResponseWriter, r *http.Request) {
		v, err := strconv.ParseBool(r.URL.Query().Get("stalled"))
		if err != nil {
			http.Error(w, "stalled: want true or false", http.StatusBadRequest)
			return
		}
		b.SetFanStalled(v)
		writeState(w, b)
	})
	mux.HandleFunc("POST /sensor-hang", func(w http.ResponseWriter, r *http.Request) {
		v, err := strconv.ParseBool(r.URL.Query().Get("hung"))
		if err != nil {
			http.Error(w, "hung: want true or false", http.StatusBadRequest)
			return
		}
		b.SetSensorHang(v)
		writeState(w, b)
	})
	return mux
}

func floatParam(r *http.Request, name string) (float64, error) {
	s := r.URL.Query().Get(name)
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("%s %q: want a number", name, s)
	}
	return v, nil
}

func writeState(w http.ResponseWriter, b *Blade) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(b.State())
}
