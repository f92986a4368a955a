"""Built-in steps: control family (being written)."""
