package testregistry

import (
	"net/http"
	"testing"
)

func TestStartServesTheDistributionAPI(t *testing.T) {
	r := Start(t, Options{})
	resp, err := http.Get("http://" + r.Host + "/v2/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v2/: %s, want 200", resp.Status)
	}
	if got := resp.Header.Get("Docker-Distribution-API-Version"); got != "registry/2.0" {
		t.Errorf("Docker-Distribution-API-Version %q, want registry/2.0", got)
	}
}

func TestStartWithHtpasswdRefusesAnonymousRequests(t *testing.T) {
	r := Start(t, Options{Htpasswd: TestHtpasswd})
	for user, want := range map[string]int{"": http.StatusUnauthorized, TestUser: http.StatusOK} {
		req, _ := http.NewRequest(http.MethodGet, "http://"+r.Host+"/v2/", nil)
		if user != "" {
			req.SetBasicAuth(user, TestPassword)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("user %q: %s, want %d", user, resp.Status, want)
		}
	}
}
