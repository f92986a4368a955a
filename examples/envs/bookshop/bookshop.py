"""A small online bookshop, written as a plain Python class (the style EnvScaler generates).

The class is the whole environment: `__init__` seeds the state, every dict attribute becomes
a state collection (books, customers, orders), every other attribute a record of the
`_attributes` collection, and every public method a tool. Methods answer
`{"success": True, "data": ...}` or `{"success": False, "error": "..."}`; a failure (or an
exception) fails the call and leaves the state exactly as it was, even if the method had
already changed some attributes.
"""

from __future__ import annotations

from typing import Any


class Bookshop:
    """An online bookshop: browse the catalogue, buy books with store credit, cancel orders."""

    def __init__(self) -> None:
        self.books: dict[str, dict[str, Any]] = {
            "B-001": {
                "title": "The Left Hand of Darkness",
                "author": "Ursula K. Le Guin",
                "genre": "science fiction",
                "price": 14.5,
                "stock": 3,
            },
            "B-002": {
                "title": "Middlemarch",
                "author": "George Eliot",
                "genre": "classics",
                "price": 11.0,
                "stock": 5,
            },
            "B-003": {
                "title": "The Pragmatic Programmer",
                "author": "David Thomas and Andrew Hunt",
                "genre": "computing",
                "price": 42.0,
                "stock": 1,
            },
            "B-004": {
                "title": "A Wizard of Earthsea",
                "author": "Ursula K. Le Guin",
                "genre": "fantasy",
                "price": 9.99,
                "stock": 0,
            },
            "B-005": {
                "title": "Braiding Sweetgrass",
                "author": "Robin Wall Kimmerer",
                "genre": "nature",
                "price": 18.0,
                "stock": 4,
            },
        }
        self.customers: dict[str, dict[str, Any]] = {
            "U-001": {"name": "Priya Shah", "email": "priya@example.com", "credit": 50.0},
            "U-002": {"name": "Tom Becker", "email": "tom@example.com", "credit": 12.0},
            "U-003": {"name": "Mei Lin", "email": "mei@example.com", "credit": 100.0},
        }
        self.orders: dict[str, dict[str, Any]] = {
            "ORD-0001": {
                "customer_id": "U-003",
                "lines": [{"book_id": "B-002", "quantity": 1, "price": 11.0}],
                "total": 11.0,
                "status": "placed",
            },
        }
        self.next_order_number = 2

    # -- browsing -------------------------------------------------------------------------

    def search_books(self, query: str = "", in_stock_only: bool = False) -> dict[str, Any]:
        """Search the catalogue by title, author or genre.

        Args:
            query: Text to look for (case-insensitive); empty lists every book.
            in_stock_only: Leave out books that are out of stock.
        """
        needle = query.strip().lower()
        found = [
            {"book_id": book_id, **book}
            for book_id, book in self.books.items()
            if needle in f"{book['title']} {book['author']} {book['genre']}".lower()
            and (book["stock"] > 0 or not in_stock_only)
        ]
        return {"success": True, "data": found}

    def get_book(self, book_id: str) -> dict[str, Any]:
        """Get one book: title, author, genre, price and how many are in stock.

        Args:
            book_id: The book's id, e.g. B-001.
        """
        if book_id not in self.books:
            return {"success": False, "error": f"no book {book_id!r}"}
        return {"success": True, "data": {"book_id": book_id, **self.books[book_id]}}

    def get_customer(self, customer_id: str) -> dict[str, Any]:
        """Get a customer's name, email and store credit.

        Args:
            customer_id: The customer's id, e.g. U-001.
        """
        if customer_id not in self.customers:
            return {"success": False, "error": f"no customer {customer_id!r}"}
        return {
            "success": True,
            "data": {"customer_id": customer_id, **self.customers[customer_id]},
        }

    def list_orders(self, customer_id: str) -> dict[str, Any]:
        """List a customer's orders, oldest first.

        Args:
            customer_id: The customer's id, e.g. U-003.
        """
        if customer_id not in self.customers:
            return {"success": False, "error": f"no customer {customer_id!r}"}
        orders = [
            {"order_id": order_id, **order}
            for order_id, order in sorted(self.orders.items())
            if order["customer_id"] == customer_id
        ]
        return {"success": True, "data": orders}

    # -- buying ---------------------------------------------------------------------------

    def place_order(self, customer_id: str, book_id: str, quantity: int = 1) -> dict[str, Any]:
        """Buy copies of a book with the customer's store credit.

        Args:
            customer_id: Who buys, e.g. U-001.
            book_id: Which book, e.g. B-001.
            quantity: How many copies (at least 1).
        """
        if quantity < 1:
            return {"success": False, "error": "quantity must be at least 1"}
        customer = self.customers.get(customer_id)
        if customer is None:
            return {"success": False, "error": f"no customer {customer_id!r}"}
        book = self.books.get(book_id)
        if book is None:
            return {"success": False, "error": f"no book {book_id!r}"}
        # Take the stock first, as generated code often does; the checks below may still
        # fail, and then the gateway throws this change away.
        book["stock"] -= quantity
        if book["stock"] < 0:
            return {
                "success": False,
                "error": f"only {book['stock'] + quantity} of {book_id} in stock",
            }
        total = round(book["price"] * quantity, 2)
        if customer["credit"] < total:
            return {
                "success": False,
                "error": f"the order costs {total:.2f} but {customer_id} has "
                f"{customer['credit']:.2f} of credit",
            }
        customer["credit"] = round(customer["credit"] - total, 2)
        order_id = f"ORD-{self.next_order_number:04d}"
        self.next_order_number += 1
        self.orders[order_id] = {
            "customer_id": customer_id,
            "lines": [{"book_id": book_id, "quantity": quantity, "price": book["price"]}],
            "total": total,
            "status": "placed",
        }
        return {"success": True, "data": {"order_id": order_id, **self.orders[order_id]}}

    def cancel_order(self, order_id: str) -> dict[str, Any]:
        """Cancel a placed order: the books go back in stock and the credit back to the customer.

        Args:
            order_id: The order's id, e.g. ORD-0001.
        """
        order = self.orders.get(order_id)
        if order is None:
            return {"success": False, "error": f"no order {order_id!r}"}
        if order["status"] != "placed":
            return {"success": False, "error": f"order {order_id} is {order['status']}"}
        for line in order["lines"]:
            self.books[line["book_id"]]["stock"] += line["quantity"]
        customer = self.customers[order["customer_id"]]
        customer["credit"] = round(customer["credit"] + order["total"], 2)
        order["status"] = "cancelled"
        return {"success": True, "data": {"order_id": order_id, **order}}

    # -- staff ----------------------------------------------------------------------------

    def restock_book(self, book_id: str, quantity: int) -> dict[str, Any]:
        """Add copies of a book to the stock (staff only).

        Args:
            book_id: Which book, e.g. B-004.
            quantity: How many copies arrived (at least 1).
        """
        if book_id not in self.books:
            return {"success": False, "error": f"no book {book_id!r}"}
        if quantity < 1:
            return {"success": False, "error": "quantity must be at least 1"}
        self.books[book_id]["stock"] += quantity
        return {"success": True, "data": {"book_id": book_id, **self.books[book_id]}}
