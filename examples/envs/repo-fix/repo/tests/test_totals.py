import unittest

from invoice import Line, subtotal, total


class TotalsTest(unittest.TestCase):
    def test_subtotal_counts_quantities(self):
        self.assertEqual(subtotal([Line(250, 2), Line(100)]), 600)

    def test_discount_then_tax(self):
        self.assertEqual(total([Line(1000)], discount_percent=10, tax_percent=20), 1080)

    def test_rounds_half_up(self):
        self.assertEqual(total([Line(333)], tax_percent=5), 350)


if __name__ == "__main__":
    unittest.main()
