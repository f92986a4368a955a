"""A server that writes its pid into `$PIDS` and then never starts serving (a start in flight)."""

import os
import time
from pathlib import Path

if __name__ == "__main__":
    (Path(os.environ["PIDS"]) / str(os.getpid())).write_text("")
    time.sleep(600)
