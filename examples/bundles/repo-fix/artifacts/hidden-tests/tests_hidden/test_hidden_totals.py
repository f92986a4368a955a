"""Held back from the agent: loaded next to the repository only when grading."""

import unittest

from invoice import Line, subtotal, total


class HiddenTotalsTest(unittest.TestCase):
    def test_quantities(self):
        self.assertEqual(subtotal([Line(199, 3)]), 597)

    def test_half_cent_rounds_up(self):
        self.assertEqual(total([Line(1)], tax_percent=50), 2)

    def test_discount_then_tax_rounds_half_up(self):
        self.assertEqual(total([Line(1000, 2)], discount_percent=12.5, tax_percent=7), 1873)

    def test_empty_invoice(self):
        self.assertEqual(total([]), 0)


if __name__ == "__main__":
    unittest.main()
