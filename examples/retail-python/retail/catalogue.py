"""The shop's data (stores, products, stock, orders) and the tools the model may call.

The data is a small in-memory sample, read-only: a real deployment reads its own database here.
`propose_refund` is the one tool with a human in the loop: it stops the run with `interrupt()`
until a manager of the store decides, and is resumed with
`Command(resume={"approved": True | False, "amount": ..., "note": ...})`.
"""

import re
import unicodedata
from typing import Any

from langchain_core.tools import tool
from langgraph.types import interrupt

# Days after delivery during which an order may be returned.
RETURN_DAYS = 30

STORES = {
    "madrid-centro": {"city": "Madrid", "address": "Calle Mayor 12"},
    "madrid-norte": {"city": "Madrid", "address": "Av. de la Ilustración 3"},
    "valencia-puerto": {"city": "Valencia", "address": "Calle de la Reina 40"},
}

PRODUCTS = {
    "ZT-CUMBRE-42": {"name": "Zapatillas de trail Cumbre 42", "price": 89.90},
    "ZT-CUMBRE-43": {"name": "Zapatillas de trail Cumbre 43", "price": 89.90},
    "CH-BRISA-M": {"name": "Chaqueta impermeable Brisa M", "price": 59.90},
    "MO-RUTA-20": {"name": "Mochila Ruta 20 L", "price": 34.50},
}

# Units of each product in each store.
STOCK = {
    "ZT-CUMBRE-42": {"madrid-centro": 3, "madrid-norte": 0, "valencia-puerto": 5},
    "ZT-CUMBRE-43": {"madrid-centro": 0, "madrid-norte": 2, "valencia-puerto": 1},
    "CH-BRISA-M": {"madrid-centro": 7, "madrid-norte": 4, "valencia-puerto": 0},
    "MO-RUTA-20": {"madrid-centro": 1, "madrid-norte": 0, "valencia-puerto": 9},
}

ORDERS = {
    "P-1001": {
        "customer": "ana",
        "store_id": "madrid-centro",
        "days_since_delivery": 9,
        "lines": [{"product_id": "ZT-CUMBRE-42", "quantity": 1, "amount": 89.90}],
    },
    "P-1002": {
        "customer": "ana",
        "store_id": "madrid-centro",
        "days_since_delivery": 12,
        "lines": [{"product_id": "CH-BRISA-M", "quantity": 1, "amount": 59.90}],
    },
    "P-0907": {
        "customer": "ana",
        "store_id": "madrid-norte",
        "days_since_delivery": 75,
        "lines": [{"product_id": "MO-RUTA-20", "quantity": 1, "amount": 34.50}],
    },
}


def _words(text: str) -> set[str]:
    """Lowercase words without accents: digits, and words of three letters or more."""
    plain = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode().lower()
    return {w for w in re.findall(r"[a-z0-9]+", plain) if w.isdigit() or len(w) >= 3}


def _refundable(order: dict[str, Any]) -> float:
    if order["days_since_delivery"] > RETURN_DAYS:
        return 0.0
    return round(sum(line["amount"] for line in order["lines"]), 2)


@tool
def search_products(query: str) -> dict[str, Any]:
    """Search the catalogue by name; the best matches first."""
    wanted = _words(query)
    scored = []
    for product_id, product in PRODUCTS.items():
        score = len(wanted & _words(product["name"]))
        if score:
            scored.append((-score, product_id, product))
    return {
        "products": [
            {"product_id": product_id, "name": product["name"], "price": product["price"]}
            for _, product_id, product in sorted(scored)[:3]
        ]
    }


@tool
def check_stock(product_id: str) -> dict[str, Any]:
    """Units of a product in every store of the chain."""
    if product_id not in STOCK:
        return {"error": f"no product {product_id!r}"}
    return {
        "product_id": product_id,
        "name": PRODUCTS[product_id]["name"],
        "stores": [
            {"store_id": store_id, "city": STORES[store_id]["city"], "units": units}
            for store_id, units in STOCK[product_id].items()
        ],
    }


@tool
def lookup_order(order_id: str) -> dict[str, Any]:
    """An order: its store, its lines, and how much of it the return policy still refunds."""
    order = ORDERS.get(order_id)
    if order is None:
        return {"error": f"no order {order_id!r}"}
    return {
        "order_id": order_id,
        "store_id": order["store_id"],
        "days_since_delivery": order["days_since_delivery"],
        "lines": [
            {"name": PRODUCTS[line["product_id"]]["name"], "amount": line["amount"]}
            for line in order["lines"]
        ],
        "refundable": _refundable(order),
        "return_days": RETURN_DAYS,
    }


@tool
def propose_refund(order_id: str, amount: float, reason: str) -> dict[str, Any]:
    """Propose a refund of an order; a manager of the order's store must approve it."""
    order = ORDERS.get(order_id)
    if order is None:
        return {"status": "refused", "order_id": order_id, "note": "no such order"}
    # The model never decides the amount on its own: at most what the policy refunds.
    amount = round(min(amount, _refundable(order)), 2)
    if amount <= 0:
        return {"status": "refused", "order_id": order_id, "note": "nothing left to refund"}
    # The run stops here until a manager resumes it; on resume this tool runs again from the
    # top, and `interrupt` returns the manager's answer instead of stopping.
    decision = interrupt(
        {
            "type": "refund_approval",
            "order_id": order_id,
            "store_id": order["store_id"],
            "amount": amount,
            "reason": reason,
            "question": f"¿Apruebas un reembolso de {amount:.2f} € del pedido {order_id}?",
        }
    )
    if not (isinstance(decision, dict) and decision.get("approved") is True):
        note = decision.get("note", "") if isinstance(decision, dict) else ""
        return {"status": "declined", "order_id": order_id, "note": note}
    # A manager may approve less than proposed, never more.
    approved = round(min(float(decision.get("amount", amount)), amount), 2)
    return {
        "status": "refunded",
        "order_id": order_id,
        "amount": approved,
        "refund_id": f"RE-{order_id}",
        "note": decision.get("note", ""),
    }


TOOLS = [search_products, check_stock, lookup_order, propose_refund]
