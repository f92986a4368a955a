"""Tools of the bank service: accounts, payees and transactions (USD).

Money is handled in whole cents internally, so balances never drift. Every change of a
balance writes a transaction with the balance after it, in the same tool call: either both
are stored or neither is.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

from agentenv import ToolContext, ToolError, tool

DAILY_PAYEE_LIMIT = 500_000  # cents: $5,000.00 a day to payees


def _stamp(now: datetime) -> str:
    return now.strftime("%Y-%m-%dT%H:%M:%SZ")


def _cents(amount: float, field: str = "amount") -> int:
    cents = round(amount * 100)
    if abs(amount * 100 - cents) > 1e-6:
        raise ToolError(f"{field}: {amount} has more than two decimals")
    return cents


def _usd(cents: int) -> str:
    return f"{'-' if cents < 0 else ''}${abs(cents) / 100:,.2f}"


def _account(ctx: ToolContext, account_id: str) -> dict[str, Any]:
    found = ctx.state.get("accounts", account_id)
    if found is None:
        known = ", ".join(ctx.state.keys("accounts"))
        raise ToolError(f"no account {account_id!r} (accounts: {known})")
    return found


def _post(
    ctx: ToolContext,
    account: dict[str, Any],
    cents: int,
    description: str,
    kind: str,
    counterparty: str | None = None,
    category: str | None = None,
    reference: str | None = None,
) -> dict[str, Any]:
    """Move a balance by `cents` and write the transaction that says so."""
    balance = _cents(account["balance"], "balance") + cents
    ctx.state.update("accounts", account["id"], {"balance": balance / 100})
    numbers = [int(k[3:]) for k in ctx.state.keys("transactions") if k[3:].isdigit()]
    return ctx.state.insert(
        "transactions",
        {
            "id": f"TX-{max(numbers, default=0) + 1:04d}",
            "account_id": account["id"],
            "date": _stamp(ctx.now),
            "amount": cents / 100,
            "balance_after": balance / 100,
            "description": description,
            "counterparty": counterparty,
            "category": category,
            "kind": kind,
            "reference": reference,
        },
    )


def _require_funds(account: dict[str, Any], cents: int, what: str) -> None:
    available = _cents(account["balance"], "balance")
    if cents > available:
        raise ToolError(
            f"insufficient funds: {account['id']} has {_usd(available)} available, "
            f"{what} of {_usd(cents)} refused"
        )


@tool(kind="read", duration=2)
def get_balance(ctx: ToolContext, account_id: str | None = None) -> dict[str, Any]:
    """The balance of one account, or of every account with the total.

    Args:
        account_id: CHK-001 or SAV-001; every account if unset.
    """
    accounts = [_account(ctx, account_id)] if account_id else ctx.state.list("accounts")
    total = sum(_cents(a["balance"], "balance") for a in accounts)
    return {"accounts": accounts, "total": total / 100, "currency": "USD"}


@tool(kind="read", duration=3)
def list_transactions(
    ctx: ToolContext,
    account_id: str = "CHK-001",
    since: str | None = None,
    category: str | None = None,
    limit: int = 20,
) -> dict[str, Any]:
    """List an account's transactions, newest first.

    Args:
        account_id: The account, e.g. CHK-001.
        since: Only transactions on or after this date, YYYY-MM-DD.
        category: Only this category, e.g. groceries, rent, shopping.
        limit: At most this many (1-200).
    """
    _account(ctx, account_id)
    if not 1 <= limit <= 200:
        raise ToolError(f"limit must be between 1 and 200 (got {limit})")
    rows = ctx.state.find("transactions", account_id=account_id)
    if since:
        try:
            day = date.fromisoformat(since).isoformat()
        except ValueError:
            raise ToolError(f"since: {since!r} is not a date; use YYYY-MM-DD") from None
        rows = [t for t in rows if t["date"][:10] >= day]
    if category:
        rows = [t for t in rows if (t.get("category") or "").lower() == category.lower()]
    rows.sort(key=lambda t: (t["date"], t["id"]), reverse=True)
    return {"account_id": account_id, "transactions": rows[:limit], "total": len(rows)}


@tool(kind="write", duration=15)
def transfer(
    ctx: ToolContext,
    from_account: str,
    amount: float,
    to_account: str | None = None,
    payee_id: str | None = None,
    memo: str = "",
) -> dict[str, Any]:
    """Move money to another of Alex's accounts, or pay a saved payee.

    Give exactly one of `to_account` and `payee_id`. The amount cannot exceed the available
    balance; payments to payees are limited to $5,000.00 a day.

    Args:
        from_account: The account the money leaves, e.g. CHK-001.
        amount: Dollars, positive, at most two decimals, e.g. 42.50.
        to_account: Another of Alex's accounts, e.g. SAV-001.
        payee_id: A saved payee, e.g. PY-001 (list_payees shows them).
        memo: A note shown on the statement.
    """
    if (to_account is None) == (payee_id is None):
        raise ToolError("give exactly one of to_account and payee_id")
    cents = _cents(amount)
    if cents <= 0:
        raise ToolError(f"the amount must be positive (got {amount})")
    source = _account(ctx, from_account)
    memo = memo.strip()
    if to_account is not None:
        target = _account(ctx, to_account)
        if target["id"] == source["id"]:
            raise ToolError("from_account and to_account are the same account")
        _require_funds(source, cents, "transfer")
        text = memo or f"Transfer to {target['name']}"
        out = _post(ctx, source, -cents, text, "transfer", target["id"], "transfer")
        _post(
            ctx,
            target,
            cents,
            memo or f"Transfer from {source['name']}",
            "transfer",
            source["id"],
            "transfer",
            out["id"],
        )
        return {"transaction": out, "to": target["id"], "balance_after": out["balance_after"]}
    payee = ctx.state.get("payees", payee_id)
    if payee is None:
        raise ToolError(f"unknown payee {payee_id!r}; list_payees shows the saved ones")
    _require_funds(source, cents, "payment")
    today = ctx.now.date().isoformat()
    paid_today = -sum(
        _cents(t["amount"])
        for t in ctx.state.find("transactions", kind="payment")
        if t["date"][:10] == today
    )
    if paid_today + cents > DAILY_PAYEE_LIMIT:
        raise ToolError(
            f"daily limit: {_usd(paid_today)} already paid to payees today; "
            f"{_usd(cents)} more would pass the {_usd(DAILY_PAYEE_LIMIT)} limit"
        )
    text = memo or f"Payment to {payee['name']}"
    out = _post(ctx, source, -cents, text, "payment", payee["name"], payee["category"])
    return {"transaction": out, "to": payee["id"], "balance_after": out["balance_after"]}


@tool(kind="write", duration=0)
def record_card_payment(
    ctx: ToolContext,
    merchant: str,
    amount: float,
    reference: str,
    account_id: str = "CHK-001",
    category: str = "shopping",
    refund: bool = False,
) -> dict[str, Any]:
    """Charge (or refund) the debit card of an account; used by shops, through triggers.

    Args:
        merchant: Who charged the card.
        amount: Dollars, positive.
        reference: The merchant's reference, e.g. an order id.
        account_id: The account behind the card.
        category: The spending category.
        refund: Money back to the card instead of a charge.
    """
    cents = _cents(amount)
    if cents <= 0:
        raise ToolError(f"the amount must be positive (got {amount})")
    account = _account(ctx, account_id)
    if refund:
        return _post(
            ctx, account, cents, f"Card refund: {merchant}", "card", merchant, category, reference
        )
    _require_funds(account, cents, f"card payment to {merchant}")
    return _post(ctx, account, -cents, f"Card: {merchant}", "card", merchant, category, reference)
