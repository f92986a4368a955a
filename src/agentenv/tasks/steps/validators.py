"""Built-in steps: validators family (being written)."""
