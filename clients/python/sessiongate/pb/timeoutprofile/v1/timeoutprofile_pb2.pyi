from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor
PROFILE_SOURCE_CONFIG: ProfileSource
PROFILE_SOURCE_FALLBACK: ProfileSource
PROFILE_SOURCE_GUIDANCE: ProfileSource
PROFILE_SOURCE_METHOD_OPTION: ProfileSource
PROFILE_SOURCE_SUB_KEY: ProfileSource
PROFILE_SOURCE_UNSPECIFIED: ProfileSource

class ListProfilesRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class ListProfilesResponse(_message.Message):
    __slots__ = ["profiles", "sub_key_methods", "sub_keys"]
    PROFILES_FIELD_NUMBER: _ClassVar[int]
    SUB_KEYS_FIELD_NUMBER: _ClassVar[int]
    SUB_KEY_METHODS_FIELD_NUMBER: _ClassVar[int]
    profiles: _containers.RepeatedCompositeFieldContainer[TimeoutProfile]
    sub_key_methods: _containers.RepeatedScalarFieldContainer[str]
    sub_keys: _containers.RepeatedCompositeFieldContainer[SubKeyMapping]
    def __init__(self, profiles: _Optional[_Iterable[_Union[TimeoutProfile, _Mapping]]] = ..., sub_keys: _Optional[_Iterable[_Union[SubKeyMapping, _Mapping]]] = ..., sub_key_methods: _Optional[_Iterable[str]] = ...) -> None: ...

class ResolveProfileRequest(_message.Message):
    __slots__ = ["caller", "full_method", "sub_key"]
    CALLER_FIELD_NUMBER: _ClassVar[int]
    FULL_METHOD_FIELD_NUMBER: _ClassVar[int]
    SUB_KEY_FIELD_NUMBER: _ClassVar[int]
    caller: str
    full_method: str
    sub_key: str
    def __init__(self, full_method: _Optional[str] = ..., caller: _Optional[str] = ..., sub_key: _Optional[str] = ...) -> None: ...

class ResolveProfileResponse(_message.Message):
    __slots__ = ["profile", "reason", "source", "streaming", "sub_key_pattern"]
    PROFILE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    STREAMING_FIELD_NUMBER: _ClassVar[int]
    SUB_KEY_PATTERN_FIELD_NUMBER: _ClassVar[int]
    profile: TimeoutProfile
    reason: str
    source: ProfileSource
    streaming: StreamingTimeoutPolicy
    sub_key_pattern: str
    def __init__(self, profile: _Optional[_Union[TimeoutProfile, _Mapping]] = ..., source: _Optional[_Union[ProfileSource, str]] = ..., reason: _Optional[str] = ..., streaming: _Optional[_Union[StreamingTimeoutPolicy, _Mapping]] = ..., sub_key_pattern: _Optional[str] = ...) -> None: ...

class StreamingTimeoutPolicy(_message.Message):
    __slots__ = ["initial_timeout_ms", "message_gap_timeout_ms", "total_timeout_ms"]
    INITIAL_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_GAP_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    initial_timeout_ms: int
    message_gap_timeout_ms: int
    total_timeout_ms: int
    def __init__(self, initial_timeout_ms: _Optional[int] = ..., message_gap_timeout_ms: _Optional[int] = ..., total_timeout_ms: _Optional[int] = ...) -> None: ...

class SubKeyMapping(_message.Message):
    __slots__ = ["pattern", "profile_name", "streaming"]
    PATTERN_FIELD_NUMBER: _ClassVar[int]
    PROFILE_NAME_FIELD_NUMBER: _ClassVar[int]
    STREAMING_FIELD_NUMBER: _ClassVar[int]
    pattern: str
    profile_name: str
    streaming: StreamingTimeoutPolicy
    def __init__(self, pattern: _Optional[str] = ..., profile_name: _Optional[str] = ..., streaming: _Optional[_Union[StreamingTimeoutPolicy, _Mapping]] = ...) -> None: ...

class TimeoutExceeded(_message.Message):
    __slots__ = ["configured_timeout_ms", "elapsed_ms", "limit", "method", "profile_name", "service"]
    CONFIGURED_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    ELAPSED_MS_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    PROFILE_NAME_FIELD_NUMBER: _ClassVar[int]
    SERVICE_FIELD_NUMBER: _ClassVar[int]
    configured_timeout_ms: int
    elapsed_ms: int
    limit: str
    method: str
    profile_name: str
    service: str
    def __init__(self, profile_name: _Optional[str] = ..., configured_timeout_ms: _Optional[int] = ..., elapsed_ms: _Optional[int] = ..., service: _Optional[str] = ..., method: _Optional[str] = ..., limit: _Optional[str] = ...) -> None: ...

class TimeoutProfile(_message.Message):
    __slots__ = ["allow_infinite", "default_timeout_ms", "max_timeout_ms", "min_timeout_ms", "profile_name"]
    ALLOW_INFINITE_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    MAX_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    MIN_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    PROFILE_NAME_FIELD_NUMBER: _ClassVar[int]
    allow_infinite: bool
    default_timeout_ms: int
    max_timeout_ms: int
    min_timeout_ms: int
    profile_name: str
    def __init__(self, profile_name: _Optional[str] = ..., default_timeout_ms: _Optional[int] = ..., min_timeout_ms: _Optional[int] = ..., max_timeout_ms: _Optional[int] = ..., allow_infinite: bool = ...) -> None: ...

class ProfileSource(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
