"""Totals of an invoice: line amounts, a percentage discount, then tax."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Line:
    """One line of an invoice: a unit price in cents and a quantity."""

    price_cents: int
    quantity: int = 1


def subtotal(lines: list[Line]) -> int:
    """The sum of the lines, in cents."""
    return sum(line.price_cents for line in lines)


def total(lines: list[Line], discount_percent: float = 0, tax_percent: float = 0) -> int:
    """The amount due in cents: the discount comes off the subtotal, then tax is added,
    rounded half up to a whole cent."""
    discounted = subtotal(lines) * (1 - discount_percent / 100)
    taxed = discounted * (1 + tax_percent / 100)
    return int(taxed)
