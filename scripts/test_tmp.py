"""Print a fresh directory for a test run's files: in memory (a tmpfs such as /dev/shm) where one has room, else
under the system's temporary directory.

The suite writes and removes tens of thousands of small files (case directories, dumps, manifests); on a disk
file system each create and unlink goes through the journal, and that is most of the run's system time. A
tmpfs with at least MIN_FREE bytes free (the suite's largest moment is about 5 GiB) takes them instead;
a small one (a container's 64 MiB /dev/shm) is not used. ACLNN_TEST_TMP names the parent directory instead (a
machine whose tmpfs is shared with others' runs).
"""

from __future__ import annotations

import os
import tempfile

MIN_FREE = 8 << 30
CANDIDATES = ("/dev/shm",)


def _tmpfs_with_room(path: str) -> bool:
    try:
        with open("/proc/mounts", encoding="utf-8") as mounts:
            tmpfs = any(line.split()[1] == path and line.split()[2] == "tmpfs" for line in mounts if len(line.split()) > 2)
        st = os.statvfs(path)
    except OSError:
        return False
    return tmpfs and st.f_bavail * st.f_frsize >= MIN_FREE and os.access(path, os.W_OK)


def main() -> None:
    where = os.environ.get("ACLNN_TEST_TMP") or next((p for p in CANDIDATES if _tmpfs_with_room(p)), None)
    try:
        if where:
            os.makedirs(where, exist_ok=True)
        print(tempfile.mkdtemp(prefix="aclnn-test-", dir=where))
    except OSError as exc:
        raise SystemExit(f"make: cannot make the test run's directory under {where or tempfile.gettempdir()}: "
                         f"{exc.strerror}")


if __name__ == "__main__":
    main()
