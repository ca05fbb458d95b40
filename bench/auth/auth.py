"""The trivial custom auth the benchmark serves: a token table, each resource stamped with its
owner and filtered by it (LangGraph's documentation's first example)."""

from langgraph_sdk import Auth

auth = Auth()
TOKENS = {f"user{i}-token": f"user{i}" for i in range(16)}


@auth.authenticate
async def authenticate(authorization: str | None) -> str:
    scheme, _, token = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or token not in TOKENS:
        raise Auth.exceptions.HTTPException(status_code=401, detail="Invalid token")
    return TOKENS[token]


@auth.on
async def owner_only(ctx: Auth.types.AuthContext, value: dict):
    if isinstance(value.get("metadata"), dict) or "metadata" in value:
        metadata = value.get("metadata") or {}
        metadata["owner"] = ctx.user.identity
        value["metadata"] = metadata
    return {"owner": ctx.user.identity}
