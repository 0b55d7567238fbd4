from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SparkProgramType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SPARK_PROGRAM_TYPE_UNSPECIFIED: _ClassVar[SparkProgramType]
    SPARK_PROGRAM_TYPE_PYSPARK: _ClassVar[SparkProgramType]
    SPARK_PROGRAM_TYPE_SQL: _ClassVar[SparkProgramType]
    SPARK_PROGRAM_TYPE_JAR: _ClassVar[SparkProgramType]

class SparkDeployMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SPARK_DEPLOY_MODE_UNSPECIFIED: _ClassVar[SparkDeployMode]
    SPARK_DEPLOY_MODE_CLIENT: _ClassVar[SparkDeployMode]
    SPARK_DEPLOY_MODE_CLUSTER: _ClassVar[SparkDeployMode]
SPARK_PROGRAM_TYPE_UNSPECIFIED: SparkProgramType
SPARK_PROGRAM_TYPE_PYSPARK: SparkProgramType
SPARK_PROGRAM_TYPE_SQL: SparkProgramType
SPARK_PROGRAM_TYPE_JAR: SparkProgramType
SPARK_DEPLOY_MODE_UNSPECIFIED: SparkDeployMode
SPARK_DEPLOY_MODE_CLIENT: SparkDeployMode
SPARK_DEPLOY_MODE_CLUSTER: SparkDeployMode

class SparkTask(_message.Message):
    __slots__ = ("program_type", "script", "main_file", "main_class", "master", "deploy_mode", "driver_cores", "driver_memory", "executor_cores", "executor_memory", "num_executors", "conf", "py_files", "files", "app_name", "args")
    class ConfEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    PROGRAM_TYPE_FIELD_NUMBER: _ClassVar[int]
    SCRIPT_FIELD_NUMBER: _ClassVar[int]
    MAIN_FILE_FIELD_NUMBER: _ClassVar[int]
    MAIN_CLASS_FIELD_NUMBER: _ClassVar[int]
    MASTER_FIELD_NUMBER: _ClassVar[int]
    DEPLOY_MODE_FIELD_NUMBER: _ClassVar[int]
    DRIVER_CORES_FIELD_NUMBER: _ClassVar[int]
    DRIVER_MEMORY_FIELD_NUMBER: _ClassVar[int]
    EXECUTOR_CORES_FIELD_NUMBER: _ClassVar[int]
    EXECUTOR_MEMORY_FIELD_NUMBER: _ClassVar[int]
    NUM_EXECUTORS_FIELD_NUMBER: _ClassVar[int]
    CONF_FIELD_NUMBER: _ClassVar[int]
    PY_FILES_FIELD_NUMBER: _ClassVar[int]
    FILES_FIELD_NUMBER: _ClassVar[int]
    APP_NAME_FIELD_NUMBER: _ClassVar[int]
    ARGS_FIELD_NUMBER: _ClassVar[int]
    program_type: SparkProgramType
    script: str
    main_file: str
    main_class: str
    master: str
    deploy_mode: SparkDeployMode
    driver_cores: int
    driver_memory: str
    executor_cores: int
    executor_memory: str
    num_executors: int
    conf: _containers.ScalarMap[str, str]
    py_files: _containers.RepeatedScalarFieldContainer[str]
    files: _containers.RepeatedScalarFieldContainer[str]
    app_name: str
    args: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, program_type: _Optional[_Union[SparkProgramType, str]] = ..., script: _Optional[str] = ..., main_file: _Optional[str] = ..., main_class: _Optional[str] = ..., master: _Optional[str] = ..., deploy_mode: _Optional[_Union[SparkDeployMode, str]] = ..., driver_cores: _Optional[int] = ..., driver_memory: _Optional[str] = ..., executor_cores: _Optional[int] = ..., executor_memory: _Optional[str] = ..., num_executors: _Optional[int] = ..., conf: _Optional[_Mapping[str, str]] = ..., py_files: _Optional[_Iterable[str]] = ..., files: _Optional[_Iterable[str]] = ..., app_name: _Optional[str] = ..., args: _Optional[_Iterable[str]] = ...) -> None: ...
