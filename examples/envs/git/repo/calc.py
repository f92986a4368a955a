"""Small arithmetic helpers."""


def divide(a: float, b: float) -> float:
    """a / b, refusing a zero divisor with a clear message."""
    if b == 0:
        raise ValueError("cannot divide by zero")
    return a / b
