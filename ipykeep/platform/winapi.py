"""The Win32 calls the seam makes through ``ctypes`` (kernel32 only, no pywin32).

Only ``processes`` uses it, and only when ``system.IS_WINDOWS``; the structures are plain
``ctypes`` so this module imports on any platform, and ``kernel32()`` is the one function a
windows-logic test replaces with a stand-in.
"""

from __future__ import annotations

import ctypes
from typing import Any

PROCESS_TERMINATE = 0x0001
PROCESS_SET_QUOTA = 0x0100
PROCESS_QUERY_LIMITED_INFORMATION = 0x1000
STILL_ACTIVE = 259
ERROR_ACCESS_DENIED = 5
JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE = 0x2000
JOB_OBJECT_EXTENDED_LIMIT_INFORMATION_CLASS = 9
#: ``subprocess`` creation flags (the constants exist only in Windows' ``subprocess``).
DETACHED_PROCESS = 0x00000008
CREATE_NEW_PROCESS_GROUP = 0x00000200


class IoCounters(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_uint64)
        for name in (
            "ReadOperationCount",
            "WriteOperationCount",
            "OtherOperationCount",
            "ReadTransferCount",
            "WriteTransferCount",
            "OtherTransferCount",
        )
    ]


class BasicLimitInformation(ctypes.Structure):
    _fields_ = [
        ("PerProcessUserTimeLimit", ctypes.c_int64),
        ("PerJobUserTimeLimit", ctypes.c_int64),
        ("LimitFlags", ctypes.c_uint32),
        ("MinimumWorkingSetSize", ctypes.c_size_t),
        ("MaximumWorkingSetSize", ctypes.c_size_t),
        ("ActiveProcessLimit", ctypes.c_uint32),
        ("Affinity", ctypes.c_size_t),
        ("PriorityClass", ctypes.c_uint32),
        ("SchedulingClass", ctypes.c_uint32),
    ]


class ExtendedLimitInformation(ctypes.Structure):
    """``JOBOBJECT_EXTENDED_LIMIT_INFORMATION``."""

    _fields_ = [
        ("BasicLimitInformation", BasicLimitInformation),
        ("IoInfo", IoCounters),
        ("ProcessMemoryLimit", ctypes.c_size_t),
        ("JobMemoryLimit", ctypes.c_size_t),
        ("PeakProcessMemoryUsed", ctypes.c_size_t),
        ("PeakJobMemoryUsed", ctypes.c_size_t),
    ]


def kernel32() -> Any:
    """The kernel32 library (Windows only)."""
    return ctypes.WinDLL("kernel32", use_last_error=True)  # type: ignore[attr-defined,unused-ignore]


def last_error() -> int:
    return int(ctypes.get_last_error())  # type: ignore[attr-defined,unused-ignore]


def kill_on_close_job(pid: int) -> int:
    """A Job Object holding process ``pid`` that kills every process in it when its last handle
    closes (``JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE``); returns the job's handle.

    Children the process starts afterwards join the job, so they die with it; the handle is
    held by this process, so they also die when it dies, however it dies.
    """
    k32 = kernel32()
    job = k32.CreateJobObjectW(None, None)
    if not job:
        raise OSError(last_error(), "CreateJobObjectW failed")
    info = ExtendedLimitInformation()
    info.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE
    ok = k32.SetInformationJobObject(
        job, JOB_OBJECT_EXTENDED_LIMIT_INFORMATION_CLASS, ctypes.byref(info), ctypes.sizeof(info)
    )
    process = k32.OpenProcess(PROCESS_SET_QUOTA | PROCESS_TERMINATE, False, pid) if ok else None
    if not ok or not process:
        error = last_error()
        k32.CloseHandle(job)
        raise OSError(error, f"could not put process {pid} in a job object")
    try:
        if not k32.AssignProcessToJobObject(job, process):
            error = last_error()
            k32.CloseHandle(job)
            raise OSError(error, f"could not put process {pid} in a job object")
    finally:
        k32.CloseHandle(process)
    return int(job)


def terminate_job(job: int) -> None:
    """Kill every process in the job and close its handle."""
    k32 = kernel32()
    k32.TerminateJobObject(job, 1)
    k32.CloseHandle(job)


def process_alive(pid: int) -> bool:
    """Whether ``pid`` names a running process (an exit code of STILL_ACTIVE)."""
    k32 = kernel32()
    handle = k32.OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, False, pid)
    if not handle:
        # Access denied means it exists (another user's process); anything else, it does not.
        return last_error() == ERROR_ACCESS_DENIED
    try:
        code = ctypes.c_uint32()
        if not k32.GetExitCodeProcess(handle, ctypes.byref(code)):
            return True
        return code.value == STILL_ACTIVE
    finally:
        k32.CloseHandle(handle)
