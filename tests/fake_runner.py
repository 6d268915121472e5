#!/usr/bin/env python3
"""A stand-in for aclnn-runner that speaks the harness contract and nothing else (driver plumbing tests).

It does not compute: a done case gets status 0 and its initial output storage as the dump.
FAKE_SOC sets the SoC it reports; FAKE_CRASH / FAKE_HANG / FAKE_ERROR name a case id to crash
(SIGSEGV), hang or answer 'error' on; FAKE_FAIL_START makes it exit before 'ready';
FAKE_EXIT=N makes it exit with N after the last case; FAKE_ORPHAN=PATH makes it first start a child that leaves
its session (setsid) and sleeps, its pid written to PATH (what run must not leave alive).
"""

import os
import shutil
import signal
import sys
import time


def main() -> None:
    args = sys.argv[1:]
    reply_fd = int(args[args.index("--reply-fd") + 1]) if "--reply-fd" in args else 1
    if os.environ.get("FAKE_ORPHAN"):
        orphan = os.fork()
        if orphan == 0:
            os.setsid()
            time.sleep(3600)
            os._exit(0)
        with open(os.environ["FAKE_ORPHAN"], "a") as f:  # (here: the child may be killed before it first runs)
            f.write(f"{orphan}\n")
    replies = os.fdopen(reply_fd, "w", buffering=1)
    if os.environ.get("FAKE_FAIL_START"):
        print("cannot open device", file=sys.stderr)
        sys.exit(3)
    replies.write(f"ready {os.environ.get('FAKE_PROTOCOL', 'aclnn-runner/1')} {os.environ.get('FAKE_SOC', 'Ascend910B1')}\n")
    case, status, outputs = None, None, []
    for line in sys.stdin:
        key, _, rest = line.rstrip("\n").partition(" ")
        if key == "case":
            case, status, outputs = rest, None, []
        elif key == "tensor" and rest.startswith("out "):
            words = rest.split()
            ndim = int(words[4])
            storage_ndim = int(words[5 + 2 * ndim + 1])
            outputs.append([rest.split(" ", 5 + 2 * ndim + 2 + storage_ndim)[-1], None])
        elif key == "dump":
            outputs[-1][1] = rest
        elif key == "status":
            status = rest
        elif key == "end":
            print(f"running {case}", file=sys.stderr, flush=True)
            if case == os.environ.get("FAKE_CRASH"):
                os.kill(os.getpid(), signal.SIGSEGV)
            if case == os.environ.get("FAKE_HANG"):
                time.sleep(3600)
            if case == os.environ.get("FAKE_ERROR"):
                replies.write(f"error {case} aclrtMalloc returned 207001\n")
                continue
            with open(status, "w") as f:
                f.write("0\n")
            for initial, dump in outputs:
                if dump:
                    shutil.copyfile(initial, dump)
            replies.write(f"done {case} 0\n")
    if os.environ.get("FAKE_EXIT"):  # like a sanitizer's leak report at exit
        print("LeakSanitizer: detected memory leaks", file=sys.stderr)
        sys.exit(int(os.environ["FAKE_EXIT"]))


if __name__ == "__main__":
    main()
