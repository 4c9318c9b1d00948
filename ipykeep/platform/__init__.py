"""The platform seam: every decision that differs between Linux, macOS and Windows is made here.

The rest of ipykeep calls these modules and never tests ``sys.platform``, imports ``fcntl`` or
``msvcrt``, or uses a POSIX-only call of ``os`` or ``signal`` (``tests/test_platform_seam.py``
enforces it). Each module reads the switches of ``system`` when it is called, not when it is
imported, so the Windows branches can be exercised on Linux by substituting the OS calls
(``tests/platform/test_windows_logic.py``; that proves the logic, not that Windows works).

- ``system``: which platform this is (the one place it is tested);
- ``locks``: advisory locks on a file (blocking, non-blocking, shared) and on a directory;
- ``files``: private (owner-only) files and directories, private opens, positional reads and
  writes, the umask, the per-user temp dir;
- ``processes``: pid liveness, detaching the daemon, a kernel's process tree (interrupt, kill),
  the daemon's stop and user signals, command lines and stopped states, fork safety;
- ``transport``: the ZeroMQ transport local kernels use;
- ``winapi``: the few Win32 calls made through ``ctypes`` (loaded only on Windows).

Standard library only, and cheap to import: the thin CLI's path goes through ``locks`` and
``processes``.
"""
