"""A server that fails at start, saying why on stderr."""

import sys

print("config file missing: /nowhere/config.toml", file=sys.stderr)
sys.exit(2)
