package server

import (
	"context"
	"strings"
	"sync"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/sessiongate/sessiongate/gateway/arcp"
	"github.com/sessiongate/sessiongate/gateway/wirecodec"
	sessiongatev1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
	"github.com/sessiongate/sessiongate/timeoutprofile"
)

// Per-agent timeout profiles. The timeout profile library chooses a
// profile within a method by sub-key (timeoutprofile.WithSubKeys); for the
// job methods the gateway's sub-key is the agent, most specific first:
// "name@version", then "name". The configuration's "sub_keys" then map
// agents, versions and globs to profiles, e.g. a code-review agent to a 2 h
// tool budget beside an echo agent's 5 s:
//
//	{"profiles": {"code_review": {…}, "quick_tool": {…}},
//	 "sub_keys": {"code-review": {"profile": "code_review"},
//	              "echo": {"profile": "quick_tool"}}}
//
// RunJob and SubmitJob take the agent from their request (agent and
// agent_version, or "name@version" in agent). WatchJob's request names a
// job: its agent is the one a SubmitJob through this gateway gave it,
// remembered until the job ends (jobAgents); a job of a session taken over
// after its owner was lost has the agent the runtime's job listing names
// (session.list_jobs, §6.6, which adopting the job reads: listedAgent); any
// other job submitted elsewhere, or already ended, is watched under
// WatchJob's own profile.
//
// In cluster mode the session's owner chooses: cluster routing runs before
// the timeout profile, so a call that enters another replica is forwarded
// without passing that replica's profile, and runs on the owner under the
// owner's configuration; a forwarded SubmitJob runs there too, so the owner
// remembers the job's agent for WatchJob (TestClusterAgentProfileOwnerChooses).
// A job the owner did not submit itself — one adopted after a takeover of
// its session — is watched under its listed agent's profile where the
// runtime's listing names the agent (TestClusterAdoptedJobAgentProfile in
// cmd/gateway), else under WatchJob's own.

// agentMethods are the methods whose timeout profile follows the agent.
var agentMethods = []string{
	sessiongatev1.SessionGateway_RunJob_FullMethodName,
	sessiongatev1.SessionGateway_SubmitJob_FullMethodName,
	sessiongatev1.SessionGateway_WatchJob_FullMethodName,
}

// The field numbers of agent and agent_version in RunJobRequest and
// SubmitJobRequest, for a request that reaches the interceptors as bytes
// (cluster mode's rawHandler).
var (
	agentField        = (&sessiongatev1.RunJobRequest{}).ProtoReflect().Descriptor().Fields().ByName("agent").Number()
	agentVersionField = (&sessiongatev1.RunJobRequest{}).ProtoReflect().Descriptor().Fields().ByName("agent_version").Number()
)

// jobAgents remembers the agent of each job submitted through SubmitJob
// until the job ends, for WatchJob's sub-key. Safe for concurrent use.
type jobAgents struct{ m sync.Map } // job id → agent ("name" or "name@version")

func (j *jobAgents) put(jobID, agent string) { j.m.Store(jobID, agent) }
func (j *jobAgents) drop(jobID string)       { j.m.Delete(jobID) }

func (j *jobAgents) get(jobID string) string {
	if v, ok := j.m.Load(jobID); ok {
		return v.(string)
	}
	return ""
}

// agentSubKeys is the gateway's timeoutprofile.SubKeyFunc.
func (s *service) agentSubKeys(ctx context.Context, _ string, req any) []string {
	var agent, version string
	switch r := req.(type) {
	case *sessiongatev1.RunJobRequest:
		agent, version = r.GetAgent(), r.GetAgentVersion()
	case *sessiongatev1.SubmitJobRequest:
		agent, version = r.GetAgent(), r.GetAgentVersion()
	case *sessiongatev1.WatchJobRequest:
		agent = s.agents.get(r.GetJobId())
		if agent == "" {
			agent = s.listedAgent(ctx, r.GetSessionId(), r.GetJobId())
		}
	case *wirecodec.RawMessage:
		agent, version = agentFromWire(r.Bytes)
	case timeoutprofile.SubKeyQuery: // ResolveProfile's sub_key
		agent = string(r)
	}
	return agentKeys(agent, version)
}

// listedAgent is the agent the runtime's job listing names for a job of a
// taken-over session (upstream.Conn.ListedAgent), "" for any other.
func (s *service) listedAgent(ctx context.Context, sessionID, jobID string) string {
	sess, ok := s.table.Get(sessionID, callerFrom(ctx))
	if !ok {
		return ""
	}
	return sess.Conn.ListedAgent(ctx, jobID)
}

// agentKeys are the sub-keys of an agent: "name@version" and "name", or
// "name" alone; none without a name.
func agentKeys(agent, version string) []string {
	if name, v, ok := strings.Cut(agent, "@"); ok {
		agent, version = name, v
	}
	switch {
	case agent == "":
		return nil
	case version == "":
		return []string{agent}
	}
	return []string{agent + "@" + version, agent}
}

// acceptedAgent is the agent to remember for a job: the resolved one the
// runtime named, else the request's.
func acceptedAgent(acc arcp.Accepted, req jobRequest) string {
	if acc.Agent != "" {
		return acc.Agent
	}
	return req.GetAgent()
}

// agentFromWire reads agent and agent_version from an encoded RunJobRequest
// or SubmitJobRequest (the last occurrence wins, as in protobuf); malformed
// bytes give what was read before them (the handler reports the error).
func agentFromWire(b []byte) (agent, version string) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return
		}
		b = b[n:]
		if typ == protowire.BytesType && (num == agentField || num == agentVersionField) {
			v, m := protowire.ConsumeBytes(b)
			if m < 0 {
				return
			}
			if num == agentField {
				agent = string(v)
			} else {
				version = string(v)
			}
			b = b[m:]
			continue
		}
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return
		}
		b = b[m:]
	}
	return
}

// agentProfiles is the option NewEnforcer gets for the gateway's service.
func (s *service) agentProfiles() timeoutprofile.Option {
	return timeoutprofile.WithSubKeys(s.agentSubKeys, agentMethods...)
}
