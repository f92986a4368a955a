"""A server that writes its pid into `$PIDS`, says why on stderr and exits at start."""

import os
import sys
from pathlib import Path

if __name__ == "__main__":
    (Path(os.environ["PIDS"]) / str(os.getpid())).write_text("")
    print("cannot open the database", file=sys.stderr)
    sys.exit(3)
