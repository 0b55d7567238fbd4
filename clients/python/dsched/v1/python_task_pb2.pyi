from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class PythonTask(_message.Message):
    __slots__ = ("script", "interpreter")
    SCRIPT_FIELD_NUMBER: _ClassVar[int]
    INTERPRETER_FIELD_NUMBER: _ClassVar[int]
    script: str
    interpreter: str
    def __init__(self, script: _Optional[str] = ..., interpreter: _Optional[str] = ...) -> None: ...
