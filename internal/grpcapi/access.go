package grpcapi

import (
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	agentv1 "github.com/kubeblade/kubeblade/api/agent/v1alpha1"
	bladeapiv1 "github.com/kubeblade/kubeblade/api/bladeapi/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/grpcauth"
)

// AccessPolicy is who may call each RPC the server serves: viewers read,
// operators also change the blade (and those calls are audited), the
// health service is open to every authenticated caller. Serve refuses to
// start while a served method has no rule here.
var AccessPolicy = grpcauth.Policy{
	bladeapiv1.BladeAgentService_GetStatus_FullMethodName:              read,
	bladeapiv1.BladeAgentService_WaitForIdentifyConfirm_FullMethodName: read,
	bladeapiv1.BladeAgentService_EmitEvent_FullMethodName:              change,
	bladeapiv1.BladeAgentService_SetFanSpeed_FullMethodName:            change,
	bladeapiv1.BladeAgentService_SetFanSpeedAuto_FullMethodName:        change,
	bladeapiv1.BladeAgentService_SetStealthMode_FullMethodName:         change,

	agentv1.AgentService_GetStatus_FullMethodName:   read,
	agentv1.AgentService_WatchStatus_FullMethodName: read,
	agentv1.AgentService_SetIdentify_FullMethodName: change,
	agentv1.AgentService_SetStealth_FullMethodName:  change,
	agentv1.AgentService_SetFan_FullMethodName:      change,
	agentv1.AgentService_SetLEDColor_FullMethodName: change,

	healthpb.Health_Check_FullMethodName: {Role: grpcauth.RoleNone},
	healthpb.Health_Watch_FullMethodName: {Role: grpcauth.RoleNone},
	healthpb.Health_List_FullMethodName:  {Role: grpcauth.RoleNone},
}

var (
	read   = grpcauth.Rule{Role: grpcauth.RoleViewer}
	change = grpcauth.Rule{Role: grpcauth.RoleOperator, Audit: true}
)
