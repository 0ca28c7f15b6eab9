package timeoutprofile

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"

	timeoutprofilev1 "github.com/sessiongate/sessiongate/gen/timeoutprofile/v1"
)

// guidance is SW4-002 §3, keyed by service short name (see shortService),
// extended with the methods of the SW4RM services the table does not list.
var guidance = map[string]map[string]string{
	"Registry": {
		"RegisterAgent":   "registration",
		"Heartbeat":       "heartbeat",
		"DeregisterAgent": "registration",
	},
	"Scheduler": {
		"SubmitTask":        "task_submit",
		"CancelTask":        "task_submit",
		"GetTaskStatus":     "workflow_status",
		"RequestPreemption": "task_submit", // like CancelTask: signals a running agent
	},
	"NegotiationRoom": {
		"SubmitProposal":  "negotiation_open",
		"SubmitVote":      "negotiation_vote",
		"GetDecision":     "negotiation_decision",
		"WaitForDecision": "negotiation_vote",
		"GetVotes":        "negotiation_decision", // read-only, like GetDecision
	},
	"Handoff": {
		"RequestHandoff":     "handoff",
		"AcceptHandoff":      "handoff",
		"RejectHandoff":      "message_route",
		"CompleteHandoff":    "handoff",         // may finish context restoration
		"GetPendingHandoffs": "workflow_status", // read-only listing
	},
	"Tool": {
		"InvokeTool":   "tool_call",
		"DescribeTool": "message_route",
		"Call":         "tool_call",   // SW4RM's name for InvokeTool
		"CallStream":   "tool_call",   // streaming InvokeTool
		"Cancel":       "task_submit", // like Scheduler.CancelTask: signals a running tool
	},
}

// shortService reduces a fully qualified service name to the name the
// guidance table uses: the last dot-separated element, minus a "Service"
// suffix. "sw4rm.registry.v1.RegistryService", "RegistryService" and
// "Registry" all become "Registry". The match is case-sensitive.
func shortService(service string) string {
	short := service[strings.LastIndexByte(service, '.')+1:]
	if s, ok := strings.CutSuffix(short, "Service"); ok && s != "" {
		short = s
	}
	return short
}

// resolve selects the profile of fullMethod: (a) the configuration's
// mapping of the method, then of its service; (b) the method's
// (timeoutprofile.v1.profile) option; (c) the guidance table; (d) the
// fallback. The streaming policy is the configuration's for the method,
// then for its service, then the method's (timeoutprofile.v1.streaming)
// option.
func (e *Enforcer) resolve(fullMethod string) *method {
	m := &method{full: fullMethod}
	service, name, ok := splitFullMethod(fullMethod)
	if ok {
		m.service, m.name = service, name
	} else {
		// Not a well-formed name: nothing but the fallback can match.
		m.name = fullMethod
	}

	var optProfile string
	var optPolicy *timeoutprofilev1.StreamingTimeoutPolicy
	if ok {
		optProfile, optPolicy = e.methodOptions(service, name)
	}

	var profile, note string
	switch {
	case ok && e.exact[fullMethod] != "":
		profile, m.source = e.exact[fullMethod], timeoutprofilev1.ProfileSource_PROFILE_SOURCE_CONFIG
		m.reason = fmt.Sprintf("configuration maps %s to %q", fullMethod, profile)
	case ok && e.services[service] != "":
		profile, m.source = e.services[service], timeoutprofilev1.ProfileSource_PROFILE_SOURCE_CONFIG
		m.reason = fmt.Sprintf("configuration maps /%s/* to %q", service, profile)
	case optProfile != "" && e.profiles[optProfile] != nil:
		profile, m.source = optProfile, timeoutprofilev1.ProfileSource_PROFILE_SOURCE_METHOD_OPTION
		m.reason = fmt.Sprintf("method option (timeoutprofile.v1.profile) = %q on %s", profile, fullMethod)
	default:
		if optProfile != "" {
			note = fmt.Sprintf("method option (timeoutprofile.v1.profile) names unknown profile %q; ", optProfile)
			if _, ok := e.warn.allow(context.Background(), warnKey{fullMethod, warnBadOption}); ok {
				e.log.LogAttrs(context.Background(), slog.LevelWarn, "timeoutprofile: method option names an unknown profile",
					slog.String("method", fullMethod), slog.String("profile", optProfile))
			}
		}
		short := shortService(service)
		if g := guidance[short][name]; ok && g != "" {
			profile, m.source = g, timeoutprofilev1.ProfileSource_PROFILE_SOURCE_GUIDANCE
			m.reason = fmt.Sprintf("%sSW4-002 §3 guidance: %s.%s → %q", note, short, name, profile)
		} else {
			profile, m.source = e.fallback, timeoutprofilev1.ProfileSource_PROFILE_SOURCE_FALLBACK
			m.reason = fmt.Sprintf("%sno mapping, method option or guidance entry for %s: fallback profile %q", note, fullMethod, profile)
		}
	}
	m.profile = &e.profiles[profile].p
	m.byCaller = e.callers[profile]

	var pol StreamingPolicy
	var has bool
	if p, ok2 := e.exactPol[fullMethod]; ok && ok2 {
		pol, has = p, true
	} else if p, ok2 := e.servicePol[service]; ok && ok2 {
		pol, has = p, true
	} else if optPolicy != nil {
		pol, has = policyFromProto(optPolicy), true
	}
	if has && !pol.isZero() {
		m.streaming = &pol
	}
	return m
}

// methodOptions reads the method's timeout options from the descriptors in
// e.files. It returns zero values when the method is unknown there or sets
// no option.
func (e *Enforcer) methodOptions(service, name string) (string, *timeoutprofilev1.StreamingTimeoutPolicy) {
	d, err := e.files.FindDescriptorByName(protoreflect.FullName(service))
	if err != nil {
		return "", nil
	}
	sd, ok := d.(protoreflect.ServiceDescriptor)
	if !ok {
		return "", nil
	}
	md := sd.Methods().ByName(protoreflect.Name(name))
	if md == nil {
		return "", nil
	}
	opts, ok := md.Options().(*descriptorpb.MethodOptions)
	if !ok || opts == nil {
		return "", nil
	}
	var profile string
	var pol *timeoutprofilev1.StreamingTimeoutPolicy
	if proto.HasExtension(opts, timeoutprofilev1.E_Profile) {
		profile, _ = proto.GetExtension(opts, timeoutprofilev1.E_Profile).(string)
	}
	if proto.HasExtension(opts, timeoutprofilev1.E_Streaming) {
		pol, _ = proto.GetExtension(opts, timeoutprofilev1.E_Streaming).(*timeoutprofilev1.StreamingTimeoutPolicy)
	}
	return profile, pol
}
