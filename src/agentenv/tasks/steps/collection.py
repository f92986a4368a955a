"""Built-in steps: collection family (being written)."""
