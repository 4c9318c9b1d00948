"""Which operating system this is: the one place ipykeep tests ``sys.platform``.

The seam's modules read these attributes at call time (``system.IS_WINDOWS``), so a test can
flip them to run the other platform's branch with the OS calls substituted.
"""

from __future__ import annotations

import sys

IS_WINDOWS: bool = sys.platform == "win32"
IS_MACOS: bool = sys.platform == "darwin"
#: Linux has ``/proc`` (zombie detection, the umask without a set-and-restore).
IS_LINUX: bool = sys.platform.startswith("linux")
