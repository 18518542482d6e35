package pki

import "testing"

func TestRoleOf(t *testing.T) {
	for name, tc := range map[string]struct {
		orgs    []string
		want    Role
		wantErr bool
	}{
		"viewer":             {[]string{OrgViewers}, RoleViewer, false},
		"operator":           {[]string{"example.com", OrgOperators}, RoleOperator, false},
		"admin before roles": {[]string{OrgAdmins}, RoleOperator, false},
		"none":               {nil, RoleNone, false},
		"operator twice":     {[]string{OrgAdmins, OrgOperators}, RoleOperator, false},
		"two roles":          {[]string{OrgViewers, OrgOperators}, RoleNone, true},
	} {
		got, err := RoleOf(tc.orgs)
		if got != tc.want || (err != nil) != tc.wantErr {
			t.Errorf("%s: RoleOf(%q) = %s, %v", name, tc.orgs, got, err)
		}
	}
	for _, r := range []Role{RoleViewer, RoleOperator} {
		if got, _ := RoleOf([]string{r.Organization()}); got != r {
			t.Errorf("%s's organization grants %s", r, got)
		}
		if p, err := ParseRole(r.String()); p != r || err != nil {
			t.Errorf("ParseRole(%q) = %s, %v", r, p, err)
		}
	}
}
