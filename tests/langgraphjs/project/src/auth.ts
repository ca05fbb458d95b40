// Custom auth as LangGraph.js's documentation writes it: a token table, each thread stamped with
// its owner when created and filtered by it on every other action, a permission that creating
// threads and runs needs, and an action refused outright.
import { Auth, HTTPException } from "@langchain/langgraph-sdk/auth";

// The tokens this deployment knows, the tutorial's stand-in for an identity provider.
const USERS: Record<string, { identity: string; name: string; permissions: string[] }> = {
  "user1-token": { identity: "user1", name: "Alice", permissions: ["threads:write"] },
  "user2-token": { identity: "user2", name: "Bob", permissions: ["threads:write"] },
  "reader-token": { identity: "reader", name: "Rita", permissions: [] },
};

export const auth = new Auth()
  .authenticate(async (request: Request) => {
    const authorization = request.headers.get("authorization");
    if (!authorization) throw new HTTPException(401, { message: "Missing token" });
    const [scheme, token] = authorization.split(" ");
    const user = scheme?.toLowerCase() === "bearer" ? USERS[token ?? ""] : undefined;
    if (!user) throw new HTTPException(401, { message: "Invalid token" });
    return user;
  })
  .on("threads:create", ({ value, user, permissions }) => {
    if (!permissions.includes("threads:write")) throw new HTTPException(403, { message: "Writers only" });
    value.metadata ??= {};
    value.metadata.owner = user.identity;
    return { owner: user.identity };
  })
  .on("threads:create_run", ({ value, user, permissions }) => {
    if (!permissions.includes("threads:write")) return false;
    value.metadata ??= {};
    value.metadata.owner = user.identity;
    return { owner: user.identity };
  })
  .on("threads:delete", ({ user }) => {
    if (user.identity !== "user1") throw new HTTPException(403, { message: "Only Alice deletes threads" });
    return { owner: user.identity };
  })
  .on("threads", ({ user }) => ({ owner: user.identity }));
