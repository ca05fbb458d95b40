"""Custom auth as LangGraph's documentation writes it: a token table, each thread stamped with
its owner when created and filtered by it on every other action, a permission that creating
threads and runs needs, and an action refused outright."""

from langgraph_sdk import Auth

auth = Auth()

# The tokens this deployment knows, as the tutorial's stand-in for an identity provider.
USERS = {
    "user1-token": {"identity": "user1", "name": "Alice", "permissions": ["threads:write"]},
    "user2-token": {"identity": "user2", "name": "Bob", "permissions": ["threads:write"]},
    "reader-token": {"identity": "reader", "name": "Rita", "permissions": []},
}


@auth.authenticate
async def get_current_user(authorization: str | None) -> Auth.types.MinimalUserDict:
    """The user a bearer token names."""
    if not authorization:
        raise Auth.exceptions.HTTPException(status_code=401, detail="Missing token")
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or token not in USERS:
        raise Auth.exceptions.HTTPException(status_code=401, detail="Invalid token")
    return USERS[token]


def owner(ctx: Auth.types.AuthContext) -> dict:
    return {"owner": ctx.user.identity}


@auth.on.threads.create
async def on_thread_create(ctx: Auth.types.AuthContext, value: Auth.types.on.threads.create.value):
    """Only writers create threads, each stamped with its owner."""
    if "threads:write" not in ctx.permissions:
        raise Auth.exceptions.HTTPException(status_code=403, detail="Writers only")
    metadata = value.setdefault("metadata", {}) or {}
    metadata.update(owner(ctx))
    value["metadata"] = metadata
    return owner(ctx)


@auth.on.threads.create_run
async def on_run_create(ctx: Auth.types.AuthContext, value: Auth.types.on.threads.create_run.value):
    """Only writers run, on their own threads; a thread a run creates is theirs."""
    if "threads:write" not in ctx.permissions:
        return False
    metadata = value.setdefault("metadata", {}) or {}
    metadata.update(owner(ctx))
    value["metadata"] = metadata
    return owner(ctx)


@auth.on.threads.read
@auth.on.threads.update
@auth.on.threads.search
async def own_threads(ctx: Auth.types.AuthContext, value: dict):
    """One sees, searches and changes one's own threads only."""
    return owner(ctx)


@auth.on.threads.delete
async def on_thread_delete(ctx: Auth.types.AuthContext, value: dict):
    """Nobody deletes a thread here but Alice, and only her own."""
    assert ctx.user.identity == "user1", "Only Alice deletes threads"
    return owner(ctx)


@auth.on.assistants
async def own_assistants(ctx: Auth.types.AuthContext, value: dict):
    """Assistants are their creator's: stamped when created or changed, filtered otherwise."""
    if "metadata" in value:
        metadata = value.get("metadata") or {}
        metadata.update(owner(ctx))
        value["metadata"] = metadata
    return owner(ctx)


@auth.on.crons
async def own_crons(ctx: Auth.types.AuthContext, value: dict):
    """Crons too."""
    if "metadata" in value:
        metadata = value.get("metadata") or {}
        metadata.update(owner(ctx))
        value["metadata"] = metadata
    return owner(ctx)


@auth.on.store
async def own_namespace(ctx: Auth.types.AuthContext, value: dict):
    """Each user's memories under a namespace of their own, as the documentation's store example."""
    value["namespace"] = (ctx.user.identity, *(value.get("namespace") or ()))
