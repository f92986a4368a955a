"""Built-in steps: verification family (being written)."""
