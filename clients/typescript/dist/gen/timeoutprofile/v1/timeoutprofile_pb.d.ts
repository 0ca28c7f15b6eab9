import type { GenEnum, GenExtension, GenFile, GenMessage, GenService } from "@bufbuild/protobuf/codegenv2";
import type { MethodOptions } from "@bufbuild/protobuf/wkt";
import type { Message } from "@bufbuild/protobuf";
/**
 * Describes the file timeoutprofile/v1/timeoutprofile.proto.
 */
export declare const file_timeoutprofile_v1_timeoutprofile: GenFile;
/**
 * TimeoutProfile is a named timeout budget (SW4-002 §1.1).
 *
 * @generated from message timeoutprofile.v1.TimeoutProfile
 */
export type TimeoutProfile = Message<"timeoutprofile.v1.TimeoutProfile"> & {
    /**
     * Profile name, e.g. "heartbeat", "tool_call".
     *
     * @generated from field: string profile_name = 1;
     */
    profileName: string;
    /**
     * Timeout applied when the caller asks for none.
     *
     * @generated from field: uint32 default_timeout_ms = 2;
     */
    defaultTimeoutMs: number;
    /**
     * Smallest override honoured; shorter requests are raised to it.
     *
     * @generated from field: uint32 min_timeout_ms = 3;
     */
    minTimeoutMs: number;
    /**
     * Largest override honoured; longer requests are lowered to it.
     *
     * @generated from field: uint32 max_timeout_ms = 4;
     */
    maxTimeoutMs: number;
    /**
     * Whether an explicit override of 0 means "no timeout".
     *
     * @generated from field: bool allow_infinite = 5;
     */
    allowInfinite: boolean;
};
/**
 * Describes the message timeoutprofile.v1.TimeoutProfile.
 * Use `create(TimeoutProfileSchema)` to create a new message.
 */
export declare const TimeoutProfileSchema: GenMessage<TimeoutProfile>;
/**
 * StreamingTimeoutPolicy bounds a server-streaming call (SW4-002 §4.1).
 * A zero field means that limit is not enforced.
 *
 * @generated from message timeoutprofile.v1.StreamingTimeoutPolicy
 */
export type StreamingTimeoutPolicy = Message<"timeoutprofile.v1.StreamingTimeoutPolicy"> & {
    /**
     * Time from the start of the call to the first message sent.
     *
     * @generated from field: uint32 initial_timeout_ms = 1;
     */
    initialTimeoutMs: number;
    /**
     * Longest pause allowed between two consecutive messages.
     *
     * @generated from field: uint32 message_gap_timeout_ms = 2;
     */
    messageGapTimeoutMs: number;
    /**
     * Total stream duration (0 = unlimited).
     *
     * @generated from field: uint32 total_timeout_ms = 3;
     */
    totalTimeoutMs: number;
};
/**
 * Describes the message timeoutprofile.v1.StreamingTimeoutPolicy.
 * Use `create(StreamingTimeoutPolicySchema)` to create a new message.
 */
export declare const StreamingTimeoutPolicySchema: GenMessage<StreamingTimeoutPolicy>;
/**
 * TimeoutExceeded is the typed status detail carried by DEADLINE_EXCEEDED
 * when a profile's budget ran out (SW4-002 §5.1).
 *
 * @generated from message timeoutprofile.v1.TimeoutExceeded
 */
export type TimeoutExceeded = Message<"timeoutprofile.v1.TimeoutExceeded"> & {
    /**
     * The profile the call ran under.
     *
     * @generated from field: string profile_name = 1;
     */
    profileName: string;
    /**
     * The budget that was exceeded, in milliseconds.
     *
     * @generated from field: uint32 configured_timeout_ms = 2;
     */
    configuredTimeoutMs: number;
    /**
     * Time elapsed when the limit fired, in milliseconds: since the start of
     * the call, or for limit "gap" since the last message sent.
     *
     * @generated from field: uint32 elapsed_ms = 3;
     */
    elapsedMs: number;
    /**
     * Fully qualified service name, e.g. "sessiongate.v1.SessionGateway".
     *
     * @generated from field: string service = 4;
     */
    service: string;
    /**
     * Method name, e.g. "RunJob".
     *
     * @generated from field: string method = 5;
     */
    method: string;
    /**
     * Which limit fired: "unary", "initial", "gap" or "total".
     *
     * @generated from field: string limit = 6;
     */
    limit: string;
};
/**
 * Describes the message timeoutprofile.v1.TimeoutExceeded.
 * Use `create(TimeoutExceededSchema)` to create a new message.
 */
export declare const TimeoutExceededSchema: GenMessage<TimeoutExceeded>;
/**
 * ListProfilesRequest has no fields.
 *
 * @generated from message timeoutprofile.v1.ListProfilesRequest
 */
export type ListProfilesRequest = Message<"timeoutprofile.v1.ListProfilesRequest"> & {};
/**
 * Describes the message timeoutprofile.v1.ListProfilesRequest.
 * Use `create(ListProfilesRequestSchema)` to create a new message.
 */
export declare const ListProfilesRequestSchema: GenMessage<ListProfilesRequest>;
/**
 * ListProfilesResponse is the effective profile table.
 *
 * @generated from message timeoutprofile.v1.ListProfilesResponse
 */
export type ListProfilesResponse = Message<"timeoutprofile.v1.ListProfilesResponse"> & {
    /**
     * Profiles sorted by name.
     *
     * @generated from field: repeated timeoutprofile.v1.TimeoutProfile profiles = 1;
     */
    profiles: TimeoutProfile[];
    /**
     * The sub-key mappings (configuration "sub_keys"), sorted by pattern. A
     * server that supplies sub-keys for some methods (sessiongate: the agent of
     * RunJob, SubmitJob and WatchJob) gives their calls the profile of the
     * first mapping the call's sub-key matches.
     *
     * @generated from field: repeated timeoutprofile.v1.SubKeyMapping sub_keys = 2;
     */
    subKeys: SubKeyMapping[];
    /**
     * The methods whose calls carry sub-keys, sorted.
     *
     * @generated from field: repeated string sub_key_methods = 3;
     */
    subKeyMethods: string[];
};
/**
 * Describes the message timeoutprofile.v1.ListProfilesResponse.
 * Use `create(ListProfilesResponseSchema)` to create a new message.
 */
export declare const ListProfilesResponseSchema: GenMessage<ListProfilesResponse>;
/**
 * SubKeyMapping maps a sub-key pattern to a profile.
 *
 * @generated from message timeoutprofile.v1.SubKeyMapping
 */
export type SubKeyMapping = Message<"timeoutprofile.v1.SubKeyMapping"> & {
    /**
     * An exact sub-key ("code-review", "code-review@2.0.0") or a glob
     * ("review-*", "code-review@2.*"; path.Match syntax).
     *
     * @generated from field: string pattern = 1;
     */
    pattern: string;
    /**
     * The profile calls with a matching sub-key get.
     *
     * @generated from field: string profile_name = 2;
     */
    profileName: string;
    /**
     * The streaming limits for streaming methods, if the mapping sets them.
     *
     * @generated from field: timeoutprofile.v1.StreamingTimeoutPolicy streaming = 3;
     */
    streaming?: StreamingTimeoutPolicy | undefined;
};
/**
 * Describes the message timeoutprofile.v1.SubKeyMapping.
 * Use `create(SubKeyMappingSchema)` to create a new message.
 */
export declare const SubKeyMappingSchema: GenMessage<SubKeyMapping>;
/**
 * ResolveProfileRequest names a method.
 *
 * @generated from message timeoutprofile.v1.ResolveProfileRequest
 */
export type ResolveProfileRequest = Message<"timeoutprofile.v1.ResolveProfileRequest"> & {
    /**
     * Full method name, "/package.Service/Method".
     *
     * @generated from field: string full_method = 1;
     */
    fullMethod: string;
    /**
     * Optional caller identity, to include its per-caller overrides.
     *
     * @generated from field: string caller = 2;
     */
    caller: string;
    /**
     * Optional sub-key of the call (sessiongate: the agent, "name" or
     * "name@version"), for methods that carry sub-keys.
     *
     * @generated from field: string sub_key = 3;
     */
    subKey: string;
};
/**
 * Describes the message timeoutprofile.v1.ResolveProfileRequest.
 * Use `create(ResolveProfileRequestSchema)` to create a new message.
 */
export declare const ResolveProfileRequestSchema: GenMessage<ResolveProfileRequest>;
/**
 * ResolveProfileResponse is the outcome of profile selection for a method.
 *
 * @generated from message timeoutprofile.v1.ResolveProfileResponse
 */
export type ResolveProfileResponse = Message<"timeoutprofile.v1.ResolveProfileResponse"> & {
    /**
     * The effective profile, after customisation for the caller, if given.
     *
     * @generated from field: timeoutprofile.v1.TimeoutProfile profile = 1;
     */
    profile?: TimeoutProfile | undefined;
    /**
     * Which rule selected it.
     *
     * @generated from field: timeoutprofile.v1.ProfileSource source = 2;
     */
    source: ProfileSource;
    /**
     * Human-readable explanation, e.g. "method option on /pkg.Svc/M".
     *
     * @generated from field: string reason = 3;
     */
    reason: string;
    /**
     * The streaming limits configured or declared for the method, if any. It is
     * reported whatever the method's streaming kind; only streaming calls
     * enforce it.
     *
     * @generated from field: timeoutprofile.v1.StreamingTimeoutPolicy streaming = 4;
     */
    streaming?: StreamingTimeoutPolicy | undefined;
    /**
     * The sub-key mapping's pattern that chose the profile, when source is
     * PROFILE_SOURCE_SUB_KEY.
     *
     * @generated from field: string sub_key_pattern = 5;
     */
    subKeyPattern: string;
};
/**
 * Describes the message timeoutprofile.v1.ResolveProfileResponse.
 * Use `create(ResolveProfileResponseSchema)` to create a new message.
 */
export declare const ResolveProfileResponseSchema: GenMessage<ResolveProfileResponse>;
/**
 * ProfileSource says which selection rule chose the profile.
 *
 * @generated from enum timeoutprofile.v1.ProfileSource
 */
export declare enum ProfileSource {
    /**
     * @generated from enum value: PROFILE_SOURCE_UNSPECIFIED = 0;
     */
    UNSPECIFIED = 0,
    /**
     * An explicit method → profile mapping in the configuration.
     *
     * @generated from enum value: PROFILE_SOURCE_CONFIG = 1;
     */
    CONFIG = 1,
    /**
     * The method's (timeoutprofile.v1.profile) option.
     *
     * @generated from enum value: PROFILE_SOURCE_METHOD_OPTION = 2;
     */
    METHOD_OPTION = 2,
    /**
     * The SW4-002 §3 service guidance table.
     *
     * @generated from enum value: PROFILE_SOURCE_GUIDANCE = 3;
     */
    GUIDANCE = 3,
    /**
     * The configured fallback for methods nothing else matched.
     *
     * @generated from enum value: PROFILE_SOURCE_FALLBACK = 4;
     */
    FALLBACK = 4,
    /**
     * A sub-key mapping (configuration "sub_keys") matched the call's sub-key.
     *
     * @generated from enum value: PROFILE_SOURCE_SUB_KEY = 5;
     */
    SUB_KEY = 5
}
/**
 * Describes the enum timeoutprofile.v1.ProfileSource.
 */
export declare const ProfileSourceSchema: GenEnum<ProfileSource>;
/**
 * TimeoutProfileService reports the effective timeout configuration of the
 * server that hosts it.
 *
 * @generated from service timeoutprofile.v1.TimeoutProfileService
 */
export declare const TimeoutProfileService: GenService<{
    /**
     * ListProfiles returns the effective profile table after all
     * customisation (environment, file, server options).
     *
     * @generated from rpc timeoutprofile.v1.TimeoutProfileService.ListProfiles
     */
    listProfiles: {
        methodKind: "unary";
        input: typeof ListProfilesRequestSchema;
        output: typeof ListProfilesResponseSchema;
    };
    /**
     * ResolveProfile tells which profile a method gets, and why.
     *
     * @generated from rpc timeoutprofile.v1.TimeoutProfileService.ResolveProfile
     */
    resolveProfile: {
        methodKind: "unary";
        input: typeof ResolveProfileRequestSchema;
        output: typeof ResolveProfileResponseSchema;
    };
}>;
/**
 * The timeout profile a method runs under, e.g.
 *   option (timeoutprofile.v1.profile) = "tool_call";
 *
 * @generated from extension: string profile = 51001;
 */
export declare const profile: GenExtension<MethodOptions, string>;
/**
 * The streaming limits of a server-streaming method.
 *
 * @generated from extension: timeoutprofile.v1.StreamingTimeoutPolicy streaming = 51002;
 */
export declare const streaming: GenExtension<MethodOptions, StreamingTimeoutPolicy>;
