// LangGraph's store for a run's graph, executed by the worker in mostrador's store (the thread's
// owner's items, as the worker reads and writes them). Under the project's `store.index`, the
// worker embeds what a put indexes and what a search asks (`query`), and ranks by similarity;
// without one, a search finds items by namespace prefix and filter, newest first.

const item = (found) => ({
  namespace: found.namespace,
  key: found.key,
  value: found.value,
  createdAt: new Date(found.created_at),
  updatedAt: new Date(found.updated_at),
});

function storeOp(op) {
  if ("namespacePrefix" in op) {
    const search = {
      op: "search",
      namespace_prefix: op.namespacePrefix,
      filter: op.filter ?? null,
      limit: op.limit ?? 10,
      offset: op.offset ?? 0,
      refresh_ttl: op.refreshTtl ?? true,
    };
    if (op.query) search.query = op.query;
    return search;
  }
  if (!("key" in op)) {
    const conditions = Object.fromEntries((op.matchConditions ?? []).map((c) => [c.matchType, c.path]));
    return {
      op: "list_namespaces",
      prefix: conditions.prefix ?? [],
      suffix: conditions.suffix ?? [],
      max_depth: op.maxDepth ?? null,
      limit: op.limit ?? 100,
      offset: op.offset ?? 0,
    };
  }
  if ("value" in op) {
    // A value of null deletes the item; `index` (false, or the fields to embed) is the put's own.
    const put = { op: "put", namespace: op.namespace, key: op.key, value: op.value ?? null, ttl: null };
    if (op.index !== undefined) put.index = op.index;
    return put;
  }
  return { op: "get", namespace: op.namespace, key: op.key, refresh_ttl: op.refreshTtl ?? true };
}

function storeResult(op, sent, result) {
  if (sent.op === "get") return result == null ? null : item(result);
  if (sent.op === "search") return result.map((found) => ({ ...item(found), score: found.score ?? undefined }));
  if (sent.op === "list_namespaces") return result;
  return undefined;
}

export function storeClass(BaseStore) {
  return class MostradorStore extends BaseStore {
    constructor(channel) {
      super();
      this.channel = channel;
    }

    async batch(operations) {
      const sent = operations.map(storeOp);
      const results = await this.channel.call("store", { ops: sent });
      return operations.map((op, i) => storeResult(op, sent[i], results[i]));
    }
  };
}
