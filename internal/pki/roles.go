package pki

import "fmt"

// Role is what a client certificate lets its holder do on an agent's gRPC
// API, in increasing order. It travels in the certificate subject's
// Organization, which kubeblade's signers and the standalone issuer set;
// package grpcauth enforces it.
type Role int

const (
	// RoleNone: a certificate that names no role; only the health service.
	RoleNone Role = iota
	// RoleViewer reads: status, watches, capabilities, waiting for the
	// button's identify confirmation.
	RoleViewer
	// RoleOperator also changes the blade: fan, stealth, identify, LEDs.
	RoleOperator
)

func (r Role) String() string {
	switch r {
	case RoleViewer:
		return "viewer"
	case RoleOperator:
		return "operator"
	default:
		return "none"
	}
}

// ParseRole reads "viewer" or "operator".
func ParseRole(s string) (Role, error) {
	switch s {
	case "viewer":
		return RoleViewer, nil
	case "operator":
		return RoleOperator, nil
	}
	return RoleNone, fmt.Errorf("unknown role %q: want viewer or operator", s)
}

// Organizations that carry roles. A client certificate names exactly one.
const (
	OrgViewers   = "kubeblade:viewers"
	OrgOperators = "kubeblade:operators"
	// OrgAdmins is what client certificates carried before roles existed
	// (each could change everything): they keep working as operators.
	OrgAdmins = "kubeblade:admins"
)

// Organization is the subject Organization that grants r ("" for none).
func (r Role) Organization() string {
	switch r {
	case RoleViewer:
		return OrgViewers
	case RoleOperator:
		return OrgOperators
	}
	return ""
}

// RoleOf returns the role a certificate's Organizations grant: RoleNone
// for none, an error for more than one (kubeblade never issues such a
// certificate, so it is trusted with neither).
func RoleOf(orgs []string) (Role, error) {
	found := map[Role]bool{}
	for _, o := range orgs {
		switch o {
		case OrgViewers:
			found[RoleViewer] = true
		case OrgOperators, OrgAdmins:
			found[RoleOperator] = true
		}
	}
	switch len(found) {
	case 0:
		return RoleNone, nil
	case 1:
		for r := range found {
			return r, nil
		}
	}
	return RoleNone, fmt.Errorf("organizations %q name more than one role", orgs)
}
