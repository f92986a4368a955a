"""Built-in steps: setup family (being written)."""
