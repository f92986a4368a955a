"""Invoice totals for a small shop."""

from invoice.totals import Line, subtotal, total

__all__ = ["Line", "subtotal", "total"]
