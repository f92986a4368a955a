"""Held back from the agent: loaded next to the repository only when grading."""

import unittest

from invoice import format_cents


class FormatCentsTest(unittest.TestCase):
    def test_dollars_and_cents(self):
        self.assertEqual(format_cents(1234), "$12.34")

    def test_small_amounts_keep_two_digits(self):
        self.assertEqual(format_cents(5), "$0.05")

    def test_thousands_are_grouped(self):
        self.assertEqual(format_cents(123456789), "$1,234,567.89")

    def test_negative_amounts(self):
        self.assertEqual(format_cents(-250), "-$2.50")

    # Amounts the prompt does not name, so a table of its examples does not pass.
    def test_amounts_beyond_the_examples(self):
        self.assertEqual(format_cents(0), "$0.00")
        self.assertEqual(format_cents(99), "$0.99")
        self.assertEqual(format_cents(100000), "$1,000.00")
        self.assertEqual(format_cents(-123456), "-$1,234.56")


if __name__ == "__main__":
    unittest.main()
