"""Kill every process this uid may signal (run as a sandbox's uid: what its run left)."""

import os
import signal

if __name__ == "__main__":
    for _ in range(3):
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            break
