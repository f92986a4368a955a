"""Tools of the shopping service: Cartwheel, an online shop.

Stock is checked when something goes into the cart and again when the order is placed;
placing an order takes the stock and empties the cart in one call (all or nothing).
The shop never touches a bank: composed environments charge the card with a trigger on
`place_order` (see examples/envs/personal).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Literal

from agentenv import ToolContext, ToolError, tool

ADDRESSES = {
    "home": "Alex Rivera, 41 Marlborough St, Apt 3, Boston MA 02116",
    "office": "Alex Rivera, Northwind Labs, 200 Clarendon St, Boston MA 02116",
}
DELIVERY_DAYS = 2
MAX_PER_LINE = 10


def _stamp(now: datetime) -> str:
    return now.strftime("%Y-%m-%dT%H:%M:%SZ")


def _product(ctx: ToolContext, product_id: str) -> dict[str, Any]:
    found = ctx.state.get("products", product_id)
    if found is None:
        raise ToolError(f"no product {product_id!r}; search_products shows the catalogue")
    return found


def _cart(ctx: ToolContext) -> dict[str, Any]:
    lines, total = [], 0
    for line in ctx.state.list("cart"):
        product = _product(ctx, line["product_id"])
        cents = round(product["price"] * 100) * line["quantity"]
        total += cents
        lines.append(
            {
                "product_id": product["id"],
                "name": product["name"],
                "quantity": line["quantity"],
                "price": product["price"],
                "line_total": cents / 100,
                "in_stock": product["stock"],
            }
        )
    return {"lines": lines, "items": sum(x["quantity"] for x in lines), "total": total / 100}


@tool(kind="read", duration=3)
def search_products(
    ctx: ToolContext,
    query: str = "",
    category: str | None = None,
    max_price: float | None = None,
    in_stock_only: bool = False,
) -> dict[str, Any]:
    """Search the catalogue by name or description, cheapest first.

    Args:
        query: Words to look for, e.g. "daypack"; everything if empty.
        category: Only this category, e.g. outdoors, kitchen, electronics, books.
        max_price: Only products at or under this price (USD).
        in_stock_only: Leave out sold-out products.
    """
    words = query.lower().split()
    rows = []
    for product in ctx.state.list("products"):
        text = f"{product['name']} {product.get('description', '')}".lower()
        if words and not all(w in text for w in words):
            continue
        if category and product["category"] != category.lower():
            continue
        if max_price is not None and product["price"] > max_price:
            continue
        if in_stock_only and product["stock"] == 0:
            continue
        rows.append(product)
    rows.sort(key=lambda p: (p["price"], p["id"]))
    return {"products": rows, "total": len(rows)}


@tool(kind="write", duration=2)
def update_cart(ctx: ToolContext, product_id: str, quantity: int = 1) -> dict[str, Any]:
    """Set how many of a product are in the cart (0 takes it out).

    Args:
        product_id: The product, e.g. P-002.
        quantity: The number wanted, 0-10.
    """
    product = _product(ctx, product_id)
    if not 0 <= quantity <= MAX_PER_LINE:
        raise ToolError(f"quantity must be between 0 and {MAX_PER_LINE} (got {quantity})")
    if quantity == 0:
        if not ctx.state.has("cart", product_id):
            raise ToolError(f"{product_id} is not in the cart")
        ctx.state.delete("cart", product_id)
        return _cart(ctx)
    if product["stock"] == 0:
        raise ToolError(f"{product['name']} ({product_id}) is sold out")
    if quantity > product["stock"]:
        raise ToolError(
            f"only {product['stock']} of {product['name']} ({product_id}) in stock, "
            f"asked for {quantity}"
        )
    ctx.state.put("cart", {"product_id": product_id, "quantity": quantity})
    return _cart(ctx)


@tool(kind="read", duration=1)
def view_cart(ctx: ToolContext) -> dict[str, Any]:
    """What is in the cart, with line totals and the total."""
    return _cart(ctx)


@tool(kind="write", duration=10)
def place_order(
    ctx: ToolContext, ship_to: Literal["home", "office"] = "home", gift_note: str | None = None
) -> dict[str, Any]:
    """Order everything in the cart; the cart is emptied and the stock taken.

    Args:
        ship_to: home or office.
        gift_note: A note printed on the packing slip, for gifts.
    """
    cart = _cart(ctx)
    if not cart["lines"]:
        raise ToolError("the cart is empty; add products with update_cart first")
    items = []
    for line in cart["lines"]:
        product = _product(ctx, line["product_id"])
        if line["quantity"] > product["stock"]:
            raise ToolError(f"only {product['stock']} of {product['name']} left; update the cart")
        ctx.state.update("products", product["id"], {"stock": product["stock"] - line["quantity"]})
        ctx.state.delete("cart", product["id"])
        items.append({k: line[k] for k in ("product_id", "name", "quantity", "price")})
    numbers = [int(k[2:]) for k in ctx.state.keys("orders") if k[2:].isdigit()]
    order = {
        "id": f"O-{max(numbers, default=0) + 1:04d}",
        "items": items,
        "total": cart["total"],
        "status": "placed",
        "placed_at": _stamp(ctx.now),
        "estimated_delivery": (ctx.now + timedelta(days=DELIVERY_DAYS)).date().isoformat(),
        "ship_to": ADDRESSES[ship_to],
        "gift_note": gift_note,
    }
    return ctx.state.insert("orders", order)


@tool(kind="write", duration=5)
def cancel_order(ctx: ToolContext, order_id: str) -> dict[str, Any]:
    """Cancel an order that has not shipped yet; its items go back into stock.

    Args:
        order_id: The order, e.g. O-1042.
    """
    order = ctx.state.get("orders", order_id)
    if order is None:
        raise ToolError(f"no order {order_id!r}; list_orders shows Alex's orders")
    if order["status"] != "placed":
        raise ToolError(
            f"order {order_id} is {order['status']}; only placed orders can be cancelled"
        )
    for item in order["items"]:
        product = ctx.state.get("products", item["product_id"])
        if product is not None:
            stock = product["stock"] + item["quantity"]
            ctx.state.update("products", product["id"], {"stock": stock})
    return ctx.state.update("orders", order_id, {"status": "cancelled"})
